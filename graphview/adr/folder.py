"""The ADR folder: which files are records, their numbers, and the repository they belong to."""
import dataclasses
import os

from graphview.adr.names import record_number
from graphview.adr.record import RecordParseError, parse

INDEX_NAME = "README.md"


@dataclasses.dataclass(frozen=True)
class Entry:
    """A Markdown file in the ADR folder: its number (None if the name is not NNNN-kebab-case-title.md),
    and either the parsed record or the reason it could not be parsed."""
    name: str
    path: str
    number: int | None
    record: object = None
    error: RecordParseError | None = None


class AdrFolder:
    """The records under ``directory``; the repository root is the folder's parent."""

    def __init__(self, directory):
        self.directory = os.path.normpath(directory)
        self.root = os.path.dirname(os.path.abspath(self.directory))
        self.index_path = os.path.join(self.directory, INDEX_NAME)
        self.entries = [self._read(name) for name in sorted(os.listdir(self.directory))
                        if name.lower().endswith(".md") and name != INDEX_NAME
                        and os.path.isfile(os.path.join(self.directory, name))]

    def _read(self, name):
        path = os.path.join(self.directory, name)
        number = record_number(name)
        try:
            return Entry(name, path, number, record=parse(path))
        except RecordParseError as error:
            return Entry(name, path, number, error=error)

    def records(self):
        """(number, record) for every well-named file that parses, in number order."""
        return [(e.number, e.record) for e in self.entries if e.number is not None and e.record is not None]

    def numbers(self):
        return sorted({e.number for e in self.entries if e.number is not None})

    def next_number(self):
        return max(self.numbers(), default=0) + 1

    def find(self, number):
        """The well-named entries with this number."""
        return [e for e in self.entries if e.number == number]

    def record(self, number):
        """The record numbered ``number`` if exactly one file has that number and it parses, else None."""
        entries = self.find(number)
        return entries[0].record if len(entries) == 1 else None
