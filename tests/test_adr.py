"""graphview.adr: the record parser, every problem `adr check` reports, and the list/new/index/graph commands."""
import argparse
import datetime
import os
import subprocess
import sys

import pytest
from hypothesis import given, strategies as st

from graphview.adr import AdrFolder, check, main, register
from graphview.adr.dates import find_date, long_form
from graphview.adr.graph import link_graph
from graphview.adr.index import write_index

GOOD = """# {title}

## Status
{status}

Proposed by: graphview team (23rd November 2026)
Finalized by: graphview team (24th November 2026)
Governs: {governs}
{relates}
## Context

Why.

## Decision

What.

## Consequences

### Advantages

* Good.

### Disadvantages

* Bad.
"""

# The seed's own record (ADR 0021, Create View), abridged: bold status, "Discussed with:" without a date.
SEED = """# Create View

## Status
**Discussion**

Proposed by: Adam Gibson (27th April 2022)
Discussed with: Paul Dubs
Finalized by: Adam Gibson (5th May 2022)


## Context

Views are copies. See [NonInplaceValidationListener](https://github.com/eclipse/deeplearning4j).

## Decision

CreateView is an op.

```
# Not a heading: inside a code fence
```

## In place exception in gradient checks

An exception.

## Consequences

### Advantages

* Self contained op

### Disadvantages
* Could introduce new bugs upon use
Governs: graphview/
"""


def record(title="Graph representation", status="Accepted", governs="graphview/graph.py", relates=""):
    return GOOD.format(title=title, status=status, governs=governs,
                       relates=f"Relates to: {relates}\n" if relates else "")


@pytest.fixture
def repo(tmp_path):
    """A repository root with graphview/graph.py and an empty adr/ folder."""
    (tmp_path / "graphview").mkdir()
    (tmp_path / "graphview" / "graph.py").write_text("")
    (tmp_path / "adr").mkdir()
    return tmp_path


def write(repo, name, text, index=True):
    (repo / "adr" / name).write_text(text, encoding="utf-8")
    if index:
        write_index(AdrFolder(repo / "adr"))
    return str(repo / "adr" / name)


def problems(repo):
    return [(os.path.basename(p.path), p.line, p.message) for p in check(AdrFolder(repo / "adr"))]


def only_problem(repo):
    found = problems(repo)
    assert len(found) == 1, found
    return found[0]


def run(repo, *argv, capsys=None):
    code = main([*argv, "--dir", str(repo / "adr")])
    return (code, *capsys.readouterr()) if capsys else code


# --- clean folders ---------------------------------------------------------------------------------------------

def test_clean_folder_has_no_problems_and_check_exits_0(repo, capsys):
    write(repo, "0001-recording-decisions.md", record("Recording decisions"))
    write(repo, "0002-graph-representation.md", record(relates="0001"))
    assert problems(repo) == []
    code, out, err = run(repo, "check", capsys=capsys)
    assert (code, err) == (0, "")
    assert "2 records" in out and "no problems" in out


def test_seed_format_parses_cleanly(repo):
    write(repo, "0001-create-view.md", SEED)
    assert problems(repo) == []
    parsed = AdrFolder(repo / "adr").records()[0][1]
    assert (parsed.title, parsed.status, parsed.date) == ("Create View", "Discussion", datetime.date(2022, 4, 27))


@pytest.mark.parametrize("title", ["0002 Graph representation", "0002: Graph representation",
                                   "ADR 2 - Graph representation", "2. Graph representation"])
def test_title_may_carry_the_matching_number(repo, title):
    write(repo, "0001-a.md", record("A"))
    write(repo, "0002-graph-representation.md", record(title))
    assert problems(repo) == []
    assert AdrFolder(repo / "adr").records()[1][1].title == "Graph representation"


# --- one test per problem the checker reports --------------------------------------------------------------------

def test_record_without_title_does_not_parse(repo):
    write(repo, "0001-a.md", "## Status\nAccepted\n")
    assert only_problem(repo) == ("0001-a.md", 1, "does not parse: has no '# Title' heading")


def test_record_that_is_not_utf8_does_not_parse(repo):
    (repo / "adr" / "0001-a.md").write_bytes(b"# Caf\xe9\n")
    write_index(AdrFolder(repo / "adr"))
    name, line, message = only_problem(repo)
    assert (name, line) == ("0001-a.md", 1) and message.startswith("does not parse: is not UTF-8")


@pytest.mark.parametrize("section", ["Status", "Context", "Decision", "Consequences"])
def test_missing_required_section(repo, section):
    text = record().replace(f"## {section}\n", "")
    write(repo, "0001-a.md", text)
    assert (f"missing required section '## {section}'") in [m for _, _, m in problems(repo)]


@pytest.mark.parametrize("section", ["Advantages", "Disadvantages"])
def test_missing_consequences_subsection(repo, section):
    write(repo, "0001-a.md", record().replace(f"### {section}\n", ""))
    assert only_problem(repo) == ("0001-a.md", 18, f"missing required section '### {section}' under "
                                                   "'## Consequences'")


def test_subsection_outside_consequences_is_reported_where_it_is(repo):
    text = record().replace("### Advantages\n\n* Good.\n", "").replace("## Decision\n", "## Decision\n### Advantages\n")
    write(repo, "0001-a.md", text)
    name, line, message = only_problem(repo)
    assert "'### Advantages' under '## Consequences' (found '### Advantages' at line 15)" in message


@pytest.mark.parametrize("status", ["Done", "accepted-ish", "Superseded"])
def test_unknown_status(repo, status):
    write(repo, "0001-a.md", record(status=status))
    assert only_problem(repo) == ("0001-a.md", 4, f"unknown status {status!r}; expected Proposed, Discussion, "
                                                  "Accepted, Implemented, Rejected or Superseded by NNNN")


def test_status_section_without_a_status(repo):
    write(repo, "0001-a.md", record(status=""))
    name, line, message = only_problem(repo)
    assert line == 3 and message.startswith("'## Status' names no status")


@pytest.mark.parametrize("status", ["Proposed", "**Discussion**", "accepted", "Implemented.", "_Rejected_"])
def test_known_statuses_in_any_emphasis(repo, status):
    write(repo, "0001-a.md", record(status=status))
    assert problems(repo) == []


def test_duplicate_numbers(repo):
    write(repo, "0001-a.md", record("A"))
    write(repo, "0001-b.md", record("B"))
    assert only_problem(repo) == ("0001-b.md", 1, "number 0001 is also used by 0001-a.md")


def test_missing_numbers(repo):
    write(repo, "0001-a.md", record("A"))
    write(repo, "0004-d.md", record("D"))
    write(repo, "0006-f.md", record("F"))
    assert problems(repo) == [
        ("0004-d.md", 1, "numbers 0002-0003 missing before this record; numbers run from 0001 without gaps"),
        ("0006-f.md", 1, "number 0005 missing before this record; numbers run from 0001 without gaps")]


def test_number_zero_is_reported(repo):
    write(repo, "0000-zero.md", record("Zero"))
    write(repo, "0001-a.md", record("A"))
    assert only_problem(repo) == ("0000-zero.md", 1, "number 0000: records are numbered from 0001")


@pytest.mark.parametrize("name", ["1-a.md", "0001_a.md", "0001-Graph-Representation.md", "notes.md"])
def test_file_name_not_matching_the_pattern(repo, name):
    write(repo, name, record())
    assert only_problem(repo) == (name, 1, f"file name {name!r} is not NNNN-kebab-case-title.md")


def test_title_number_not_matching_the_file_name(repo):
    write(repo, "0001-a.md", record("0003 Graph representation"))
    assert only_problem(repo) == ("0001-a.md", 1, "title declares number 0003 but the file name says 0001")


def test_superseded_by_pointing_nowhere(repo):
    write(repo, "0001-a.md", record(status="**Superseded by 0009**"))
    assert only_problem(repo) == ("0001-a.md", 4, "Superseded by 0009 points nowhere: there is no record 0009")


def test_superseded_by_without_a_number(repo):
    write(repo, "0001-a.md", record(status="Superseded by"))
    assert only_problem(repo) == ("0001-a.md", 4, "'Superseded by' names no record number")


def test_superseded_by_an_existing_record_is_fine(repo):
    write(repo, "0001-a.md", record(status="Superseded by [0002](0002-b.md)"))
    write(repo, "0002-b.md", record("B"))
    assert problems(repo) == []


@pytest.mark.parametrize("status, numbers", [
    ("Superseded by 0002 (1st December 2026)", [2]),
    ("Superseded by 0002, 0003", [2, 3]),
    ("Superseded by 0002 and 0003 on 1st December 2026", [2, 3]),
    ("Superseded by [0003](0003-c.md) (2026-12-01), see also 0001", [3]),
    ("Superseded by ADR 0002 & [ADR 3](0003-c.md).", [2, 3])])
def test_superseded_by_reads_only_the_numbers_right_after_it(repo, status, numbers):
    write(repo, "0001-a.md", record(status=status))
    write(repo, "0002-b.md", record("B"))
    write(repo, "0003-c.md", record("C"))
    assert AdrFolder(repo / "adr").find(1)[0].record.superseded_by == numbers
    assert problems(repo) == []


def test_superseded_by_with_a_date_still_checks_its_numbers(repo):
    write(repo, "0001-a.md", record(status="Superseded by 0001, 0009 (1st December 2026)"))
    assert problems(repo) == [("0001-a.md", 4, "Superseded by 0001 points at this record itself"),
                              ("0001-a.md", 4, "Superseded by 0009 points nowhere: there is no record 0009")]


def test_relates_to_pointing_nowhere(repo):
    write(repo, "0001-a.md", record(relates="0001, 0007, graph stuff"))
    assert sorted(problems(repo)) == [
        ("0001-a.md", 9, "'Relates to:' item 'graph stuff' is not a record number"),
        ("0001-a.md", 9, "Relates to 0001 points at this record itself"),
        ("0001-a.md", 9, "Relates to 0007 points nowhere: there is no record 0007")]


def test_markdown_link_pointing_nowhere(repo):
    text = record().replace("Why.", "See [B](0002-b.md), [code](../graphview/graph.py), [web](https://x.org) "
                                    "and [here](#context). Not a link: `[x](nowhere.md)`.")
    write(repo, "0001-a.md", text)
    assert only_problem(repo) == ("0001-a.md", 12, "link '0002-b.md' points nowhere")


@pytest.mark.parametrize("governs, message", [
    ("graphview/graph.py, graphview/nothing.py", "Governs path 'graphview/nothing.py' does not exist"),
    ("`graphview/graph.py/`", "Governs path 'graphview/graph.py/' is not a directory"),
    ("../elsewhere", "Governs path '../elsewhere' is outside the repository"),
    ("graphview/*.txt", "Governs pattern 'graphview/*.txt' matches nothing"),
    ("", "'Governs:' lists no paths"),
])
def test_governs_path_that_does_not_exist(repo, governs, message):
    write(repo, "0001-a.md", record(governs=governs))
    name, line, found = only_problem(repo)
    assert (name, line) == ("0001-a.md", 8) and found.startswith(message)


def test_governs_paths_that_exist(repo):
    write(repo, "0001-a.md", record(governs="graphview/, `graphview/graph.py`, graphview/*.py, adr"))
    assert problems(repo) == []


def test_missing_governs_line(repo):
    write(repo, "0001-a.md", record().replace("Governs: graphview/graph.py\n", ""))
    assert only_problem(repo) == ("0001-a.md", 1, "no 'Governs:' line listing the repository paths this "
                                                  "decision shapes")


@pytest.mark.parametrize("old, new, line, message", [
    ("Proposed by: graphview team (23rd November 2026)\n", "", 3, "no 'Proposed by:' line"),
    ("(23rd November 2026)", "(someday)", 6, "'Proposed by:' has no date"),
    ("(23rd November 2026)", "(31st February 2026)", 6, "'Proposed by:' date '31st February 2026' is not a real"),
    ("(24th November 2026)", "", 7, "'Finalized by:' has no date"),
])
def test_attribution_lines_need_dates(repo, old, new, line, message):
    write(repo, "0001-a.md", record().replace(old, new))
    name, found_line, found = only_problem(repo)
    assert found_line == line and found.startswith(message)


def test_missing_index(repo):
    write(repo, "0001-a.md", record(), index=False)
    assert only_problem(repo) == ("README.md", 1, "index is missing; run 'graphview adr index'")


def test_out_of_date_index(repo):
    path = write(repo, "0001-a.md", record())
    with open(path, "w") as file:
        file.write(record(status="Implemented"))
    assert only_problem(repo) == ("README.md", 8, "index is out of date; run 'graphview adr index'")


def test_check_prints_problems_with_file_and_line_and_exits_1(repo, capsys):
    write(repo, "0001-a.md", record(status="Done"))
    code, out, err = run(repo, "check", capsys=capsys)
    assert code == 1 and err == ""
    assert out.splitlines()[0] == f"{repo / 'adr' / '0001-a.md'}:4: unknown status 'Done'; expected Proposed, " \
                                  "Discussion, Accepted, Implemented, Rejected or Superseded by NNNN"
    assert out.splitlines()[-1].startswith("adr check: 1 problem in ")


# --- new, list, index, graph ---------------------------------------------------------------------------------------

def test_new_writes_the_next_number_from_the_template_and_the_index(repo, capsys):
    write(repo, "0001-a.md", record("A"))
    write(repo, "0003-c.md", record("C"))
    code, out, err = run(repo, "new", "Graph file format (v1)", "--governs", "graphview/graph.py", capsys=capsys)
    path = repo / "adr" / "0004-graph-file-format-v1.md"
    assert (code, out, err) == (0, f"{path}\n{repo / 'adr' / 'README.md'}\n", "")
    text = path.read_text()
    today = long_form(datetime.date.today())
    assert text.startswith(f"# Graph file format (v1)\n\n## Status\nProposed\n\nProposed by: graphview team ({today})\n"
                           "Governs: graphview/graph.py\n")
    parsed = dict(AdrFolder(repo / "adr").records())[4]
    assert (parsed.status, parsed.date, parsed.governs) == ("Proposed", datetime.date.today(), ["graphview/graph.py"])
    assert "0004-graph-file-format-v1.md" in (repo / "adr" / "README.md").read_text()


def test_new_record_with_governs_passes_check_at_once(repo, capsys):
    code, out, err = run(repo, "new", "First", "--governs", "graphview/graph.py,graphview/planned.py",
                         "--governs", "adr/", capsys=capsys)
    assert (code, err) == (0, "")
    assert "Governs: graphview/graph.py, graphview/planned.py, adr/\n" in (repo / "adr" / "0001-first.md").read_text()
    assert problems(repo) == []      # a proposal may name a file it will create (graphview/planned.py)
    assert run(repo, "check", capsys=capsys)[0] == 0


def test_new_record_without_governs_says_what_check_wants(repo, capsys):
    code, out, err = run(repo, "new", "First", capsys=capsys)
    assert code == 0 and "governs no paths yet" in err and "--governs PATH" in err
    [(name, line, message)] = problems(repo)
    assert (name, line) == ("0001-first.md", 7)
    assert message.startswith("'Governs:' lists no paths; write the repository paths this decision shapes")
    assert "graphview adr new --governs PATH" in message


def test_new_refuses_a_governs_path_outside_the_repository(repo, capsys):
    code, out, err = run(repo, "new", "First", "--governs", "../elsewhere", capsys=capsys)
    assert (code, out) == (2, "") and "--governs ../elsewhere: Governs path '../elsewhere' is outside" in err
    assert not (repo / "adr" / "0001-first.md").exists()


def test_new_without_the_folder_says_to_run_init_which_creates_it(tmp_path, capsys):
    missing = tmp_path / "adr"
    code = main(["new", "X", "--dir", str(missing)])
    err = capsys.readouterr().err
    assert code == 2 and f"no such directory; run 'graphview adr init --dir {missing}' to create it" in err
    assert not missing.exists()
    assert main(["init", "--dir", str(missing)]) == 0
    assert capsys.readouterr().out == f"{missing / 'README.md'}\n"
    assert main(["new", "X", "--dir", str(missing), "--governs", "adr"]) == 0
    assert main(["check", "--dir", str(missing)]) == 0
    assert main(["init", "--dir", str(missing)]) == 2
    assert "already an ADR folder" in capsys.readouterr().err


@pytest.mark.parametrize("title", ["", "!!!"])
def test_new_rejects_a_title_without_letters(repo, title, capsys):
    code, out, err = run(repo, "new", title, capsys=capsys)
    assert code == 2 and out == "" and len(err.splitlines()) == 1 and "has no letters or digits" in err


def test_list_prints_number_title_status_and_date(repo, capsys):
    write(repo, "0001-recording-decisions.md", record("Recording decisions"))
    write(repo, "0002-b.md", record("B", status="Superseded by 0001"))
    code, out, err = run(repo, "list", capsys=capsys)
    assert (code, err) == (0, "")
    assert out.splitlines() == ["0001  Recording decisions  Accepted            2026-11-23",
                                "0002  B                    Superseded by 0001  2026-11-23"]


def test_list_skips_unparseable_records_with_a_warning(repo, capsys):
    write(repo, "0001-a.md", "no title\n")
    code, out, err = run(repo, "list", capsys=capsys)
    assert (code, out) == (0, "") and "skipping" in err and "0001-a.md" in err


def test_index_writes_a_table_of_all_records(repo, capsys):
    write(repo, "0001-a.md", record("A | B"), index=False)
    code, out, err = run(repo, "index", capsys=capsys)
    assert (code, out) == (0, f"{repo / 'adr' / 'README.md'}\n")
    table = (repo / "adr" / "README.md").read_text().splitlines()
    assert table[-3:] == ["| Number | Title | Status | Date |", "|--------|-------|--------|------|",
                          "| [0001](0001-a.md) | A \\| B | Accepted | 2026-11-23 |"]


def test_graph_prints_dot_of_supersedes_and_relates_to_links(repo, capsys):
    write(repo, "0001-a.md", record("A", status="Superseded by 0002"))
    write(repo, "0002-b.md", record("B", relates="0001, 0003, 0042"))
    write(repo, "0003-c.md", record('C "quoted"'))
    graph = link_graph(AdrFolder(repo / "adr"))
    assert sorted(graph.edges(data="kind")) == [(2, 1, "supersedes"), (2, 3, "relates to")]
    code, out, err = run(repo, "graph", capsys=capsys)
    assert code == 0 and out.startswith("digraph adr {") and out.endswith("}\n")
    assert '"0002" -> "0001" [label="supersedes"];' in out
    assert '"0002" -> "0003" [label="relates to", style=dotted];' in out
    assert '"0003" [label="0003 C \\"quoted\\"\\nAccepted"];' in out
    assert '"0001" [label="0001 A\\nSuperseded by 0002", style=dashed];' in out


# --- the command line ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("argv, message", [
    ([], "the following arguments are required: COMMAND"),
    (["bogus"], "invalid choice: 'bogus'"),
    (["new"], "the following arguments are required: title"),
    (["list", "--dir", "no/such/dir"], "--dir no/such/dir: no such directory"),
])
def test_usage_errors_exit_2_with_one_line(tmp_path, argv, message):
    done = subprocess.run([sys.executable, "-m", "graphview.adr", *argv], cwd=tmp_path, capture_output=True,
                          text=True)
    assert done.returncode == 2 and done.stdout == ""
    assert len(done.stderr.splitlines()) == 1 and message in done.stderr


def test_module_runs_with_the_default_dir(repo):
    write(repo, "0001-a.md", record())
    done = subprocess.run([sys.executable, "-m", "graphview.adr", "check"], cwd=repo, capture_output=True, text=True)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == "adr check: 1 record in adr, no problems\n"


def test_register_adds_the_adr_subcommand(repo, capsys):
    write(repo, "0001-a.md", record())
    parser = argparse.ArgumentParser(prog="graphview")
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["adr", "list", "--dir", str(repo / "adr")])
    assert args.func(args) == 0
    assert capsys.readouterr().out.startswith("0001  Graph representation  Accepted")


@given(st.dates(min_value=datetime.date(1900, 1, 1), max_value=datetime.date(2999, 12, 31)))
def test_dates_written_by_new_read_back(date):
    assert find_date(f"graphview team ({long_form(date)})") == date
    assert find_date(date.isoformat()) == date


def test_lenient_forms_written_by_hand(repo):
    text = (record(governs="graphview/graph.py,\n  `graphview/`,\n  adr/", relates="0002")
            .replace("## Context", "## **Context:**").replace("Governs:", "**Governs:**"))
    write(repo, "0001-a.md", text)
    write(repo, "0002-b.md", record("B", relates="ADR-0001 (the first)").replace("## Status\nAccepted",
                                                                               "## Status\n\n*Accepted.*"))
    assert problems(repo) == []
    assert AdrFolder(repo / "adr").records()[0][1].governs == ["graphview/graph.py", "graphview/", "adr/"]


def test_wrapped_governs_line_is_checked_in_full(repo):
    write(repo, "0001-a.md", record(governs="graphview/graph.py,\n  graphview/gone.py"))
    assert only_problem(repo)[1:] == (8, "Governs path 'graphview/gone.py' does not exist in the repository")
