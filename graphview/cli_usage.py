"""Usage errors with a "did you mean": a misspelled sub-command, choice or option, at every command level."""
import argparse
import re

from graphview.errors import did_you_mean

_INVALID_CHOICE = re.compile(r"invalid choice: '(?P<given>[^']*)' \(choose from (?P<choices>.*)\)$")


def with_suggestion(message):
    """argparse's ``message``, with the choices closest to an invalid one named first."""
    match = _INVALID_CHOICE.search(message)
    if match is None:
        return message
    choices = re.findall(r"'([^']*)'", match["choices"])
    return (f"{message[:match.start()]}invalid choice: {match['given']!r}{did_you_mean(match['given'], choices)}; "
            f"choose from {match['choices']}")


def chosen_parser(parser, args):
    """The (sub-)parser that parsed the command ``args`` names: ``graphview adr new``'s for ``adr new``."""
    while True:
        actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        chosen = getattr(args, actions[0].dest, None) if actions else None
        if chosen is None or chosen not in actions[0].choices:
            return parser
        parser = actions[0].choices[chosen]


def unrecognized(parser, extras):
    """The error for arguments ``parser`` (the chosen sub-parser) does not know, each unknown option with the
    options of that command closest to it."""
    options = [option for action in parser._actions for option in action.option_strings]
    described = []
    for extra in extras:
        if extra.startswith("-") and len(extra) > 1:
            described.append(f"{extra}{did_you_mean(extra.split('=', 1)[0], options)}")
        else:
            described.append(extra)
    noun = "argument" if len(extras) == 1 else "arguments"
    return f"{parser.prog}: error: unrecognized {noun}: {', '.join(described)} (see {parser.prog} --help)"
