"""`adr new "Title"`: the next record, from the template, status Proposed, dated today."""
import datetime
import os

from graphview.adr.check import governs_path_problem
from graphview.adr.dates import long_form
from graphview.adr.names import slug

TEMPLATE = """# {title}

## Status
Proposed

Proposed by: {author} ({date})
Governs:{governs}

## Context

What forces are at play: the problem, the constraints, what we already have.

## Decision

What we will do, stated so that a reviewer can check the code against it.

## Consequences

### Advantages

* What gets easier.

### Disadvantages

* What gets harder, and what we give up.
"""


def new_record(folder, title, author="graphview team", governs=(), today=None):
    """Write record number ``folder.next_number()`` titled ``title``, governing the repository paths
    ``governs`` (which a proposal may name before they exist); return its path."""
    if not slug(title):
        raise ValueError(f"title {title!r} has no letters or digits to name the file with")
    for path in governs:
        if problem := governs_path_problem(path, folder.root, must_exist=False):
            raise ValueError(f"--governs {path}: {problem}")
    number = folder.next_number()
    path = os.path.join(folder.directory, f"{number:04d}-{slug(title)}.md")
    date = long_form(today or datetime.date.today())
    listed = f" {', '.join(governs)}" if governs else ""
    with open(path, "x", encoding="utf-8") as file:
        file.write(TEMPLATE.format(title=" ".join(title.split()), author=author, date=date, governs=listed))
    return path
