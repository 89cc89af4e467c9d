"""`adr status NNNN STATUS` and `adr supersede OLD NEW`: change a record's status and keep the records that point
at it in step: OLD's ``Superseded by NEW`` status and NEW's ``Supersedes: OLD`` line are written together."""
import re

from graphview.adr.check import TAKEN
from graphview.adr.record import FIELD_LINE
from graphview.errors import GraphviewError

SETTABLE = ("Proposed", "Discussion", "Accepted", "Implemented", "Rejected")
_SUPERSEDED_BY = re.compile(r"^\s*superseded\s+by\s*:?\s*(?:adr[-\s]?)?(?P<number>\d+)\s*$", re.IGNORECASE)


class AdrCommandError(GraphviewError):
    """A status change that `adr status` or `adr supersede` refuses; nothing has been written."""


def set_status(folder, number, status):
    """Give record ``number`` the status ``status`` (one of SETTABLE, or "Superseded by NNNN", which is
    supersede(folder, number, NNNN)). Return {path: new text} for the records to rewrite."""
    superseding = _SUPERSEDED_BY.match(status)
    if superseding:
        return supersede(folder, number, int(superseding.group("number")), replace=True)
    canonical = next((s for s in SETTABLE if s.lower() == status.strip().lower()), None)
    if canonical is None:
        raise AdrCommandError(f"unknown status {status!r}; expected {', '.join(SETTABLE)} or 'Superseded by NNNN'")
    record = _record(folder, number)
    if canonical not in TAKEN:
        older = [n for n, other in folder.records() if number in other.superseded_by]
        if older:
            names = ", ".join(f"{n:04d}" for n in older)
            raise AdrCommandError(f"{number:04d} supersedes {names}, so it stays Accepted or Implemented; give "
                                  f"{names} another status first (e.g. graphview adr status {older[0]:04d} Accepted)")
    return {record.path: _with_status(record, canonical), **_unlinked(folder, number, record.superseded_by)}


def _unlinked(folder, old, newer):
    """Edits that take ``old`` off the ``Supersedes:`` lines of the records numbered ``newer``."""
    edits = {}
    for new in newer:
        record = folder.record(new)
        if record is not None and old in _numbers(record):
            edits[record.path] = _with_supersedes(record, [n for n in _numbers(record) if n != old])
    return edits


def supersede(folder, old, new, replace=False):
    """Mark record ``old`` "Superseded by ``new``" (besides the records that already supersede it, or, if
    ``replace``, instead of them) and add ``old`` to ``new``'s ``Supersedes:`` line; ``new`` must be Accepted or
    Implemented. Return {path: new text} for the records to rewrite."""
    if old == new:
        raise AdrCommandError(f"a record cannot supersede itself ({old:04d})")
    older, newer = _record(folder, old), _record(folder, new)
    if newer.status not in ("Accepted", "Implemented"):
        raise AdrCommandError(f"{new:04d} is {newer.status_text or '(no status)'!r}; only an Accepted or Implemented "
                              f"record supersedes another (first: graphview adr status {new:04d} Accepted)")
    if new in _numbers(older):
        raise AdrCommandError(f"{old:04d} supersedes {new:04d}; it cannot also be superseded by it")
    before = older.superseded_by
    numbers = [new] if replace else before + [n for n in [new] if n not in before]
    edits = _unlinked(folder, old, [n for n in before if n not in numbers])
    edits[older.path] = _with_status(older, "Superseded by " + ", ".join(f"{n:04d}" for n in numbers))
    edits[newer.path] = _with_supersedes(newer, _numbers(newer) + [n for n in [old] if n not in _numbers(newer)])
    return edits


def write(edits):
    """Write the texts from set_status or supersede."""
    for path, text in edits.items():
        with open(path, "w", encoding="utf-8", newline="") as file:
            file.write(text)


def _record(folder, number):
    entries = folder.find(number)
    if not entries:
        raise AdrCommandError(f"there is no record {number:04d} in {folder.directory}")
    if len(entries) > 1:
        raise AdrCommandError(f"number {number:04d} is used by {len(entries)} files: "
                              + ", ".join(entry.name for entry in entries))
    if entries[0].error is not None:
        raise AdrCommandError(f"{entries[0].path} does not parse: {entries[0].error.message}")
    return entries[0].record


def _numbers(record):
    return [n for _, n in record.supersedes if n is not None]


def _lines(record):
    with open(record.path, encoding="utf-8", newline="") as file:
        lines = file.read().splitlines(keepends=True)
    ending = "\r\n" if lines and lines[0].endswith("\r\n") else "\n"
    if lines and not lines[-1].endswith(("\n", "\r")):
        lines[-1] += ending
    return lines, ending


def _with_status(record, status):
    """The record's text with its status line saying ``status`` (emphasis around it kept)."""
    lines, ending = _lines(record)
    if record.status_text is None:                # "## Status" with no status line: write one under the heading
        lines.insert(record.status_line, status + ending)
    else:
        line = lines[record.status_line - 1]
        start = line.find(record.status_text)
        lines[record.status_line - 1] = line[:start] + status + line[start + len(record.status_text):]
    return "".join(lines)


def _with_supersedes(record, numbers):
    """The record's text with a ``Supersedes:`` line listing ``numbers`` (none: no line)."""
    lines, ending = _lines(record)
    value = ", ".join(f"{n:04d}" for n in numbers)
    field = record.field("supersedes")
    if field is not None:
        first = lines[field.line - 1]
        match = FIELD_LINE.match(first.rstrip("\r\n"))
        replaced = [first[:match.start("value")] + value + ending] if numbers else []
        for line in sorted(field.lines, reverse=True):
            del lines[line - 1]
        lines[field.line - 1:field.line - 1] = replaced
    elif numbers:
        lines.insert(_status_block_end(record), f"Supersedes: {value}{ending}")
    return "".join(lines)


def _status_block_end(record):
    """The line after the last ``Key:`` line of the Status section (or after the status line, if it has none)."""
    start = record.status_line
    end = next((line for level, _, line in record.headings if level <= 2 and line > start), None)
    inside = [line for field in record.fields.values() for line in field.lines
              if line > start and (end is None or line < end)]
    return max(inside, default=start)
