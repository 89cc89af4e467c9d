"""Reading one ADR file into a Record: its title, status, attribution lines, links and sections."""
import dataclasses
import re

from graphview.adr.dates import BadDate, find_date
from graphview.errors import GraphviewError

STATUSES = ("Proposed", "Discussion", "Accepted", "Implemented", "Rejected", "Superseded by")
FIELDS = {"proposed by": "proposed", "discussed with": "discussed", "finalized by": "finalized",
          "governs": "governs", "relates to": "relates", "supersedes": "supersedes"}
LISTS = ("governs", "relates", "supersedes")       # fields whose comma-separated values may go on over lines

FIELD_LINE = re.compile(r"^\s*(?:[-*+]\s+)?\**\s*(?P<key>proposed by|discussed with|finalized by|governs"
                        r"|relates to|supersedes)\s*\**\s*:\s*\**\s*(?P<value>.*?)\s*$", re.IGNORECASE)
_HEADING = re.compile(r"^(?P<hashes>#{1,6})\s+(?P<text>.*?)(?:\s+#+)?\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
# A number the title may carry: "0002 Graph", "0002: Graph", "ADR 2 - Graph", "ADR-0002: Graph", "2. Graph".
_TITLE_NUMBER = re.compile(r"^(?:adr[-\s]?(?P<adr>\d+)\s*[-:.\u2013\u2014]?|(?P<padded>\d{4})\s*[-:.\u2013\u2014]?"
                           r"|(?P<dotted>\d+)\.)\s+(?P<rest>\S.*)$", re.IGNORECASE)

_SUPERSEDED_BY = re.compile(r"^superseded\s+by\s*:?(?P<rest>.*)$", re.IGNORECASE | re.DOTALL)
# One superseding record: "0002", "ADR 0002" or a link "[0002](0002-x.md)"; later ones follow ",", "and" or "&".
_SUPERSEDING = re.compile(r"\s*(?:\[\s*(?:adr[-\s]?)?(?P<linked>\d+)\s*\]\([^)]*\)|(?:adr[-\s]?)?(?P<plain>\d+)\b)",
                          re.IGNORECASE)
_SEPARATOR = re.compile(r"\s*(?:,|&|\band\b)", re.IGNORECASE)


class RecordParseError(GraphviewError):
    """A file in the ADR folder that cannot be read as a record at all."""

    def __init__(self, path, line, message):
        super().__init__(f"{path}:{line}: {message}")
        self.path, self.line, self.message = path, line, message


@dataclasses.dataclass(frozen=True)
class Field:
    """A ``Key: value`` line (Proposed by, Governs, ...), where it is, and every line it spans (a list that goes
    on over lines, or a key written twice)."""
    value: str
    line: int
    lines: tuple = ()


@dataclasses.dataclass(frozen=True)
class Record:
    """One parsed ADR. Line numbers are 1-based; fields that are absent are None."""
    path: str
    title: str
    title_line: int
    title_number: int | None          # the number the title declares, if it declares one
    status_text: str | None           # the status as written, without emphasis
    status_line: int
    headings: tuple                   # (level, text, line) for every heading outside code fences
    fields: dict                      # lower-case field name ("governs", ...) -> Field
    links: tuple                      # (target, line) for every Markdown link outside code fences

    def field(self, name):
        return self.fields.get(name)

    @property
    def status(self):
        """The canonical status word (``Superseded by`` for a superseded record), or None if unknown."""
        text = (self.status_text or "").lower().rstrip(".")
        return next((s for s in STATUSES if text == s.lower() or
                     (s == "Superseded by" and text.startswith("superseded by"))), None)

    @property
    def superseded_by(self):
        """The numbers named in a ``Superseded by NNNN`` status ([] for any other status)."""
        if self.status != "Superseded by":
            return []
        # Only the list right after "Superseded by": a date or note after it ("(1st December 2026)") is no number.
        rest, numbers = _SUPERSEDED_BY.match(self.status_text).group("rest"), []
        while item := _SUPERSEDING.match(rest):
            numbers.append(int(item.group("linked") or item.group("plain")))
            separator = _SEPARATOR.match(rest, item.end())
            if separator is None:
                break
            rest = rest[separator.end():]
        return list(dict.fromkeys(numbers))

    @property
    def relates_to(self):
        """(item, number or None) for each comma-separated item of ``Relates to:``."""
        return self._numbered_items("relates")

    @property
    def supersedes(self):
        """(item, number or None) for each comma-separated item of ``Supersedes:``."""
        return self._numbered_items("supersedes")

    def _numbered_items(self, name):
        field = self.field(name)
        if field is None:
            return []
        items = [item.strip() for item in field.value.split(",") if item.strip()]
        return [(item, _first_number(item)) for item in items]

    @property
    def governs(self):
        """The paths of the ``Governs:`` line, backticks and quotes removed."""
        governs = self.field("governs")
        if governs is None:
            return []
        return [item.strip().strip("`'\"").strip() for item in governs.value.split(",") if item.strip(" `'\"")]

    @property
    def date(self):
        """The date of ``Proposed by:``, or None."""
        proposed = self.field("proposed")
        try:
            return find_date(proposed.value) if proposed else None
        except BadDate:
            return None


def _first_number(text):
    match = re.search(r"\d+", text)
    return int(match.group(0)) if match and re.fullmatch(r"\W*(?:adr[-\s]?)?\d+\b.*", text, re.I) else None


def heading_key(text):
    """A heading's text for matching section names: "**Context:**" -> "context"."""
    return _strip_emphasis(text).rstrip(":").strip().lower()


def _strip_emphasis(text):
    return re.sub(r"^[*_`\s]+|[*_`\s]+$", "", text)


def parse(path, text=None):
    """Parse the record at ``path`` (or ``text`` if given); raise RecordParseError if it has no ``# Title``."""
    if text is None:
        try:
            with open(path, encoding="utf-8") as file:
                text = file.read()
        except UnicodeDecodeError as error:
            raise RecordParseError(path, 1, f"is not UTF-8 text ({error.reason} at byte {error.start})") from None
    headings, fields, links, in_fence, continued = [], {}, [], False, None
    for number, line in enumerate(text.splitlines(), start=1):
        if _FENCE.match(line):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        heading = _HEADING.match(line)
        if heading:
            headings.append((len(heading.group("hashes")), heading.group("text"), number))
            continue
        field = FIELD_LINE.match(line)
        if continued and not field and line.strip():     # a list that ended with a comma goes on
            value = f"{fields[continued].value} {_strip_emphasis(line)}"
            fields[continued] = Field(value, fields[continued].line, fields[continued].lines + (number,))
            continued = continued if value.endswith(",") else None
            continue
        continued = None
        if field:
            name = FIELDS[field.group("key").lower()]
            value = _strip_emphasis(field.group("value"))
            if name in fields:       # a field written on two lines: keep the first line, join the values
                value = f"{fields[name].value}, {value}" if name in LISTS else fields[name].value
                fields[name] = Field(value, fields[name].line, fields[name].lines + (number,))
            else:
                fields[name] = Field(value, number, (number,))
            continued = name if name in LISTS and value.endswith(",") else None
        for target in re.findall(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", re.sub(r"`[^`]*`", "", line)):
            links.append((target, number))
    titles = [(text_, line) for level, text_, line in headings if level == 1]
    if not titles:
        raise RecordParseError(path, 1, "has no '# Title' heading")
    title, title_line = titles[0]
    numbered = _TITLE_NUMBER.match(title)
    title_number = None
    if numbered:
        title_number = int(numbered.group("adr") or numbered.group("padded") or numbered.group("dotted"))
        title = numbered.group("rest")
    status_text, status_line = _status(text.splitlines(), headings)
    return Record(path=str(path), title=title, title_line=title_line, title_number=title_number,
                  status_text=status_text, status_line=status_line, headings=tuple(headings), fields=fields,
                  links=tuple(links))


def _status(lines, headings):
    """The first line of the ``## Status`` section that is not a ``Key:`` line, and its line number."""
    start = next((line for level, text, line in headings if level == 2 and heading_key(text) == "status"),
                 None)
    if start is None:
        return None, 0
    end = next((line for level, _, line in headings if line > start and level <= 2), len(lines) + 1)
    for number in range(start + 1, end):
        text = lines[number - 1].strip()
        if text and not FIELD_LINE.match(text):
            return _strip_emphasis(text), number
    return None, start
