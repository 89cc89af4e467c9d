"""`adr check`: every problem in an ADR folder, each with its file and line."""
import dataclasses
import glob
import os
import urllib.parse

from graphview.adr.dates import BadDate, find_date
from graphview.adr.index import render_index
from graphview.adr.record import heading_key

SECTIONS = ("Status", "Context", "Decision", "Consequences")
CONSEQUENCES = ("Advantages", "Disadvantages")
STATUS_HELP = "Proposed, Discussion, Accepted, Implemented, Rejected or Superseded by NNNN"
# The statuses of a decision that has been taken: its governed paths must exist, and it may supersede others.
TAKEN = ("Accepted", "Implemented", "Superseded by")


@dataclasses.dataclass(frozen=True, order=True)
class Problem:
    path: str
    line: int
    message: str

    def __str__(self):
        return f"{self.path}:{self.line}: {self.message}"


def check(folder):
    """All problems in ``folder`` (an AdrFolder), sorted by file and line; [] when it is clean."""
    problems = []
    for entry in folder.entries:
        if entry.number is None:
            problems.append(Problem(entry.path, 1, f"file name {entry.name!r} is not NNNN-kebab-case-title.md"))
        if entry.error is not None:
            problems.append(Problem(entry.path, entry.error.line, f"does not parse: {entry.error.message}"))
        elif entry.number is not None:
            problems += _record_problems(entry.number, entry.record, folder)
    problems += _numbering_problems(folder)
    problems += _index_problems(folder)
    return sorted(problems)


def _record_problems(number, record, folder):
    return (_title_problems(number, record) + _section_problems(record) + _status_problems(number, record, folder)
            + _attribution_problems(record) + _governs_problems(record, folder)
            + _relates_problems(number, record, folder) + _supersedes_problems(number, record, folder)
            + _link_problems(record))


def _title_problems(number, record):
    if record.title_number is not None and record.title_number != number:
        return [Problem(record.path, record.title_line, f"title declares number {record.title_number:04d} "
                                                        f"but the file name says {number:04d}")]
    return []


def _find(record, level, name, after=0, before=None):
    return next((line for lvl, text, line in record.headings if lvl == level and heading_key(text) == name.lower()
                 and line > after and (before is None or line < before)), None)


def _section_problems(record):
    problems = []
    for name in SECTIONS:
        if _find(record, 2, name) is None:
            problems.append(Problem(record.path, record.title_line, f"missing required section '## {name}'"
                                    + _elsewhere(record, name)))
    consequences = _find(record, 2, "Consequences")
    if consequences is not None:
        end = next((line for lvl, _, line in record.headings if lvl <= 2 and line > consequences), None)
        for name in CONSEQUENCES:
            if _find(record, 3, name, after=consequences, before=end) is None:
                problems.append(Problem(record.path, consequences, f"missing required section '### {name}' "
                                        f"under '## Consequences'" + _elsewhere(record, name)))
    return problems


def _elsewhere(record, name):
    found = [(level, line) for level, text, line in record.headings if heading_key(text) == name.lower()]
    return "".join(f" (found '{'#' * level} {name}' at line {line})" for level, line in found[:1])


def _status_problems(number, record, folder):
    if _find(record, 2, "Status") is None:
        return []
    if record.status_text is None:
        return [Problem(record.path, record.status_line, f"'## Status' names no status; expected {STATUS_HELP}")]
    if record.status is None:
        return [Problem(record.path, record.status_line,
                        f"unknown status {record.status_text!r}; expected {STATUS_HELP}")]
    if record.status == "Superseded by" and not record.superseded_by:
        return [Problem(record.path, record.status_line, "'Superseded by' names no record number")]
    problems = []
    for target in record.superseded_by:
        if target == number or not folder.find(target):
            problems.append(Problem(record.path, record.status_line, _missing_target("Superseded by", target, number)))
        elif (newer := folder.record(target)) is not None and newer.status not in TAKEN:
            problems.append(Problem(record.path, record.status_line, f"superseded by {target:04d}, whose status is "
                                    f"{newer.status_text or '(none)'!r}; only an Accepted or Implemented record "
                                    f"supersedes another (run 'graphview adr status {target:04d} Accepted')"))
    return problems


def _missing_target(what, target, number):
    if target == number:
        return f"{what} {target:04d} points at this record itself"
    return f"{what} {target:04d} points nowhere: there is no record {target:04d}"


def _attribution_problems(record):
    problems = []
    status = _find(record, 2, "Status") or record.title_line
    for name, label, date_required in (("proposed", "Proposed by", True), ("discussed", "Discussed with", False),
                                       ("finalized", "Finalized by", True)):
        field = record.field(name)
        if field is None:
            if name == "proposed":
                problems.append(Problem(record.path, status, "no 'Proposed by:' line"))
            continue
        try:
            date = find_date(field.value)
        except BadDate as error:
            problems.append(Problem(record.path, field.line, f"'{label}:' date {error}"))
            continue
        if date is None and date_required:
            problems.append(Problem(record.path, field.line,
                                    f"'{label}:' has no date; write e.g. 'Name (23rd November 2026)'"))
    return problems


def _governs_problems(record, folder):
    field = record.field("governs")
    if field is None:
        return [Problem(record.path, record.title_line,
                        "no 'Governs:' line listing the repository paths this decision shapes")]
    if not record.governs:
        return [Problem(record.path, field.line, "'Governs:' lists no paths; write the repository paths this "
                        "decision shapes after it, separated by commas ('graphview adr new --governs PATH' "
                        "fills it in)")]
    # A proposal may name the files it would create; once a decision is taken (or its status is unknown), they exist.
    must_exist = record.status not in ("Proposed", "Discussion", "Rejected")
    return [Problem(record.path, field.line, message) for path in record.governs
            for message in [governs_path_problem(path, folder.root, must_exist)] if message]


def governs_path_problem(path, root, must_exist=True):
    """Why ``path`` (relative to the repository root) is not a repository path (one that exists, if
    ``must_exist``), or None."""
    if os.path.isabs(path) or os.path.normpath(path).split(os.sep)[0] == "..":
        return f"Governs path {path!r} is outside the repository (paths are relative to {root})"
    full = os.path.join(root, path)
    if any(char in path for char in "*?["):
        if must_exist and not glob.glob(full, recursive=True):
            return f"Governs pattern {path!r} matches nothing"
        return None
    if path.endswith("/") and not os.path.isdir(full) and (must_exist or os.path.exists(os.path.normpath(full))):
        return f"Governs path {path!r} is not a directory in the repository"
    if must_exist and not os.path.exists(full):
        return f"Governs path {path!r} does not exist in the repository"
    return None


def _reference_problems(number, record, folder, key, items, label, extra=None):
    """Problems of the record numbers a ``label:`` line names (``items``: (text, number or None)): not a
    number, itself or missing, and what ``extra(target)`` says of an existing one."""
    field = record.field(key)
    problems = []
    for item, target in items:
        if target is None:
            problems.append(Problem(record.path, field.line, f"'{label}:' item {item!r} is not a record number"))
        elif target == number or not folder.find(target):
            problems.append(Problem(record.path, field.line, _missing_target(label, target, number)))
        elif extra is not None and (problem := extra(target)):
            problems.append(Problem(record.path, field.line, problem))
    return problems


def _relates_problems(number, record, folder):
    return _reference_problems(number, record, folder, "relates", record.relates_to, "Relates to")


def _supersedes_problems(number, record, folder):
    """``Supersedes:`` names existing records whose status says ``Superseded by`` this one."""
    def confirmed(target):
        older = folder.record(target)
        if older is not None and number not in older.superseded_by:
            return (f"supersedes {target:04d}, whose status is {older.status_text or '(none)'!r}, not "
                    f"'Superseded by {number:04d}' (run 'graphview adr supersede {target:04d} {number:04d}')")
        return None
    return _reference_problems(number, record, folder, "supersedes", record.supersedes, "Supersedes", confirmed)


def _link_problems(record):
    problems = []
    base = os.path.dirname(record.path)
    for target, line in record.links:
        parsed = urllib.parse.urlsplit(target)
        if parsed.scheme or parsed.netloc or not parsed.path:
            continue                      # a web address, a mail address or an anchor in this file
        if not os.path.exists(os.path.join(base, urllib.parse.unquote(parsed.path))):
            problems.append(Problem(record.path, line, f"link {target!r} points nowhere"))
    return problems


def _numbering_problems(folder):
    problems = [Problem(entry.path, 1, "number 0000: records are numbered from 0001") for entry in folder.find(0)]
    for number in folder.numbers():
        entries = folder.find(number)
        for entry in entries[1:]:
            problems.append(Problem(entry.path, 1, f"number {number:04d} is also used by {entries[0].name}"))
    numbers = folder.numbers()
    expected = 1
    for number in numbers:
        if number > expected:
            gap = f"{expected:04d}" if number == expected + 1 else f"{expected:04d}-{number - 1:04d}"
            problems.append(Problem(folder.find(number)[0].path, 1,
                                    f"number{'s' if number > expected + 1 else ''} {gap} missing before this "
                                    "record; numbers run from 0001 without gaps"))
        expected = max(expected, number + 1)
    return problems


def _index_problems(folder):
    try:
        with open(folder.index_path, encoding="utf-8") as file:
            current = file.read()
    except FileNotFoundError:
        return [Problem(folder.index_path, 1, "index is missing; run 'graphview adr index'")]
    except UnicodeDecodeError:
        current = ""
    wanted = render_index(folder)
    if current == wanted:
        return []
    old, new = current.splitlines(), wanted.splitlines()
    line = next((i for i, (a, b) in enumerate(zip(old, new), start=1) if a != b), min(len(old), len(new)) + 1)
    return [Problem(folder.index_path, line, "index is out of date; run 'graphview adr index'")]
