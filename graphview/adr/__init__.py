"""Architecture decision records: parse them, check them, and list, create, change the status of, index and graph
them."""
from graphview.adr.check import Problem, check
from graphview.adr.cli import main, register
from graphview.adr.folder import AdrFolder
from graphview.adr.record import Record, RecordParseError, parse

__all__ = ["AdrFolder", "Problem", "Record", "RecordParseError", "check", "main", "parse", "register"]
