"""`graphview adr {init,list,new,status,supersede,check,index,graph}`: argument parsing and the eight commands.

The `graphview` command calls ``register(subparsers)``; after parsing, ``args.func(args)`` runs the chosen
command and returns its exit status. ``main(argv)`` runs the same commands on their own (``python -m graphview.adr``).
Exit status: 0 success (and a clean check), 1 problems found by check (for status and supersede: in the records they
rewrote), 2 usage error (one line on stderr).
"""
import argparse
import os
import re
import sys

from graphview.adr import lifecycle
from graphview.adr.check import check
from graphview.adr.folder import AdrFolder
from graphview.adr.graph import link_graph, to_dot
from graphview.adr.index import render_list, write_index
from graphview.adr.new import new_record
from graphview.cli_usage import chosen_parser, unrecognized, with_suggestion

USAGE_ERROR = 2


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line on stderr and exit status 2."""

    def error(self, message):
        _one_line_error(self, message)


def _one_line_error(parser, message):
    print(f"{parser.prog}: error: {with_suggestion(message)}", file=sys.stderr)
    sys.exit(USAGE_ERROR)


def register(subparsers):
    """Add the ``adr`` sub-command to ``subparsers`` (from ``parser.add_subparsers()``); return its parser."""
    parser = subparsers.add_parser("adr", help="list, create, change, check, index and graph the decision records",
                                   description="Manage the architecture decision records in adr/.")
    _configure(parser)
    return parser


def _configure(parser):
    parser.error = lambda message: _one_line_error(parser, message)
    parser.set_defaults(func=run)
    commands = parser.add_subparsers(dest="adr_command", metavar="COMMAND", required=True, parser_class=_Parser)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--dir", default="adr", metavar="PATH", help="the ADR folder (default: ./adr)")
    commands.add_parser("init", parents=[common], help="create the ADR folder and its index (as adr-tools' init)")
    commands.add_parser("list", parents=[common], help="print number, title, status and date of each record")
    new = commands.add_parser("new", parents=[common], help="write the next record from the template")
    new.add_argument("title", help="the record's title, e.g. \"Graph file format\"")
    new.add_argument("--author", default="graphview team",
                     help="the name on the 'Proposed by:' line (default: graphview team)")
    new.add_argument("--governs", action="append", type=_paths, default=[], metavar="PATH[,PATH...]",
                     help="a repository path the decision shapes, for its 'Governs:' line (repeatable or "
                          "comma-separated; 'adr check' wants at least one)")
    status = commands.add_parser("status", parents=[common], help="set a record's status, then rewrite the index")
    status.add_argument("number", type=_number, help="the record's number, e.g. 0005")
    status.add_argument("status", nargs="+", help="Proposed, Discussion, Accepted, Implemented, Rejected, "
                                                  "or Superseded by NNNN")
    supersede = commands.add_parser("supersede", parents=[common],
                                    help="mark OLD 'Superseded by NEW' and NEW 'Supersedes: OLD', then rewrite "
                                         "the index; NEW must be Accepted or Implemented")
    supersede.add_argument("old", type=_number, help="the record that is replaced")
    supersede.add_argument("new", type=_number, help="the record that replaces it")
    commands.add_parser("check", parents=[common], help="report problems with file and line; exit 1 if any")
    commands.add_parser("index", parents=[common], help="regenerate README.md, the table of all records")
    commands.add_parser("graph", parents=[common], help="print the supersedes/relates-to links as DOT")


def _paths(text):
    paths = [path.strip() for path in text.split(",") if path.strip()]
    if not paths:
        raise argparse.ArgumentTypeError("give a repository path, e.g. --governs graphview/graph.py")
    return paths


def _number(text):
    match = re.fullmatch(r"\s*(?:adr[-\s]?)?(\d{1,4})\s*", text, re.IGNORECASE)
    if match is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a record number like 0005")
    return int(match.group(1))


def _typed(text):
    """An argument as it was typed: under a locale that is not UTF-8, Python hands UTF-8 bytes over as lone
    surrogates (PEP 383), which would turn "über" into "ber" and could not be written to a UTF-8 file."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return os.fsencode(text).decode("utf-8", "replace")


def run(args):
    """Run the parsed ``adr`` command; return the exit status."""
    prog = f"graphview adr {args.adr_command}"
    if args.adr_command == "init":
        return _init(args.dir, prog)
    if not os.path.isdir(args.dir):
        init = "graphview adr init" + ("" if args.dir == "adr" else f" --dir {args.dir}")
        print(f"{prog}: error: --dir {args.dir}: no such directory; run '{init}' to create it, or give the "
              "folder that holds the records with --dir PATH", file=sys.stderr)
        return USAGE_ERROR
    folder = AdrFolder(args.dir)
    if args.adr_command == "new":
        return _new(folder, args, prog)
    if args.adr_command in ("status", "supersede"):
        return _change(folder, args, prog)
    if args.adr_command == "check":
        return _check(folder)
    for entry in folder.entries:
        if entry.error is not None or entry.number is None:
            reason = entry.error.message if entry.error else "name is not NNNN-kebab-case-title.md"
            print(f"{prog}: warning: skipping {entry.path}: {reason}", file=sys.stderr)
    if args.adr_command == "list":
        sys.stdout.write(render_list(folder))
    elif args.adr_command == "index":
        print(write_index(folder))
    else:
        sys.stdout.write(to_dot(link_graph(folder)))
    return 0


def _init(directory, prog):
    """Create the ADR folder and its (empty) index; refuse a folder that already holds records."""
    if os.path.exists(directory) and not os.path.isdir(directory):
        print(f"{prog}: error: --dir {directory}: exists and is not a directory", file=sys.stderr)
        return USAGE_ERROR
    os.makedirs(directory, exist_ok=True)
    folder = AdrFolder(directory)
    if folder.entries or os.path.exists(folder.index_path):
        print(f"{prog}: error: --dir {directory}: already an ADR folder; 'graphview adr new \"Title\"' adds a record",
              file=sys.stderr)
        return USAGE_ERROR
    print(write_index(folder))
    return 0


def _new(folder, args, prog):
    """Write the next record and rewrite the index, print both paths; without --governs, say what check wants."""
    governs = [path for paths in args.governs for path in paths]
    try:
        path = new_record(folder, _typed(args.title), author=_typed(args.author), governs=[_typed(p) for p in governs])
    except (ValueError, FileExistsError) as error:
        print(f"{prog}: error: {error}", file=sys.stderr)
        return USAGE_ERROR
    print(path)
    print(write_index(AdrFolder(folder.directory)))
    if not governs:
        print(f"{prog}: note: {path} governs no paths yet; 'graphview adr check' fails until its 'Governs:' line "
              "lists the repository paths the decision shapes (or give --governs PATH)", file=sys.stderr)
    return 0


def _change(folder, args, prog):
    """Rewrite the records a status change touches and the index, print each path; then check those records."""
    try:
        if args.adr_command == "status":
            edits = lifecycle.set_status(folder, args.number, " ".join(args.status))
        else:
            edits = lifecycle.supersede(folder, args.old, args.new)
    except lifecycle.AdrCommandError as error:
        print(f"{prog}: error: {error}", file=sys.stderr)
        return USAGE_ERROR
    lifecycle.write(edits)
    folder = AdrFolder(folder.directory)
    for path in sorted(edits):
        print(path)
    print(write_index(folder))
    problems = [problem for problem in check(folder) if problem.path in edits]
    for problem in problems:
        print(f"{prog}: {problem}", file=sys.stderr)
    return 1 if problems else 0


def _check(folder):
    problems = check(folder)
    for problem in problems:
        print(problem)
    records = _count(len(folder.entries), "record")
    if problems:
        print(f"adr check: {_count(len(problems), 'problem')} in {folder.directory} ({records})")
        return 1
    print(f"adr check: {records} in {folder.directory}, no problems")
    return 0


def _count(number, noun):
    return f"{number} {noun}{'' if number == 1 else 's'}"


def main(argv=None):
    """Run ``graphview adr`` with ``argv`` (default: sys.argv[1:]); return the exit status."""
    parser = _Parser(prog="graphview adr", description="Manage the architecture decision records in adr/.")
    _configure(parser)
    try:
        args, extras = parser.parse_known_args(argv)
    except SystemExit as exit_:
        return exit_.code
    if extras:
        print(unrecognized(chosen_parser(parser, args), extras), file=sys.stderr)
        return USAGE_ERROR
    return args.func(args)
