"""A record's life in `graphview adr`: proposals may govern paths they would create, `adr new` names files from
any title, and `adr status` / `adr supersede` change statuses with both records and the index kept in step."""
import os
import re
import subprocess
import sys

import pytest
from hypothesis import given, strategies as st

from graphview.adr import AdrFolder
from graphview.adr.graph import link_graph
from graphview.adr.names import record_number, slug
from test_adr import only_problem, problems, record, repo, write  # noqa: F401 (repo is a fixture)

GRAPHVIEW = os.path.join(os.path.dirname(sys.executable), "graphview")
README = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "README.md")


def cli(repo, *argv, env=None):
    """Run the installed `graphview adr` command in ``repo`` (so --dir is ./adr)."""
    done = subprocess.run([GRAPHVIEW, "adr", *argv], cwd=repo, capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})
    return done.returncode, done.stdout, done.stderr


def text(repo, name):
    return (repo / "adr" / name).read_text(encoding="utf-8")


def status_block(repo, name):
    return text(repo, name).split("## Context")[0]


# --- item 14: a proposal may govern paths it would create ----------------------------------------------------------

@pytest.mark.parametrize("status", ["Proposed", "**Discussion**", "Rejected"])
def test_a_proposal_may_govern_paths_that_do_not_exist_yet(repo, status):
    write(repo, "0001-a.md", record(status=status, governs="graphview/graph.py, graphview/new.py, docs/, kernels/*.py"))
    assert problems(repo) == []


@pytest.mark.parametrize("status", ["Accepted", "Implemented"])
def test_a_decision_taken_needs_the_paths_it_governs(repo, status):
    write(repo, "0001-a.md", record(status=status, governs="graphview/new.py"))
    assert only_problem(repo)[1:] == (8, "Governs path 'graphview/new.py' does not exist in the repository")


@pytest.mark.parametrize("governs, message", [
    ("../elsewhere.py", "Governs path '../elsewhere.py' is outside the repository"),
    ("graphview/graph.py/", "Governs path 'graphview/graph.py/' is not a directory in the repository"),
])
def test_a_proposal_still_names_paths_inside_the_repository_correctly(repo, governs, message):
    write(repo, "0001-a.md", record(status="Proposed", governs=governs))
    assert only_problem(repo)[2].startswith(message)


def test_check_passes_a_proposal_for_a_new_file_and_status_accepted_then_reports_it(repo):
    write(repo, "0001-a.md", record(status="Proposed", governs="graphview/new.py"))
    assert cli(repo, "check") == (0, "adr check: 1 record in adr, no problems\n", "")
    code, out, err = cli(repo, "status", "1", "Accepted")
    assert code == 1 and out.splitlines() == ["adr/0001-a.md", "adr/README.md"]
    assert err == ("graphview adr status: adr/0001-a.md:8: Governs path 'graphview/new.py' does not exist in the "
                   "repository\n")
    (repo / "graphview" / "new.py").write_text("")
    assert cli(repo, "check")[0] == 0


# --- item 15: file names from any title; --author ------------------------------------------------------------------

@pytest.mark.parametrize("title, name", [
    ("über fast kernels", "uber-fast-kernels"),
    ("C/CUDA über-fast kernels!", "c-cuda-uber-fast-kernels"),
    ("Ärger mit der Straße", "arger-mit-der-strasse"),
    ("Œuvre, Ærø, Łódź", "oeuvre-aero-lodz"),
    ("İstanbul café (v2)", "istanbul-cafe-v2"),
    ("ＧＰＵ kernels ²", "gpu-kernels-2"),
    ("Ядро для GPU", "ядро-для-gpu"),
    ("日本語のカーネル", "日本語のカーネル"),
    ("हिन्दी शीर्षक", "हिन्दी-शीर्षक"),
    ("🚀 fast € kernels", "fast-kernels"),
])
def test_slug_transliterates_accents_and_keeps_letters_without_an_ascii_form(title, name):
    assert slug(title) == name


@given(st.text())
def test_every_name_new_writes_is_one_check_accepts(title):
    name = slug(title)
    assert slug(name) == name
    assert record_number(f"0007-{name}.md") == (7 if name else None)


@pytest.mark.parametrize("name", ["0001-über.md", "0001-Ядро.md", "0001-a_b.md"])
def test_file_names_adr_new_would_not_write_are_reported(repo, name):
    write(repo, name, record())
    assert only_problem(repo)[2] == f"file name {name!r} is not NNNN-kebab-case-title.md"


@pytest.mark.parametrize("env", [{}, {"LC_ALL": "C", "PYTHONCOERCECLOCALE": "0", "PYTHONUTF8": "0"}],
                         ids=["utf8-locale", "ascii-locale"])
def test_new_names_the_file_from_a_title_with_umlauts(repo, env):
    code, out, err = cli(repo, "new", "über fast kernels", "--author", "Jürgen Groß", "--governs", "graphview/", env=env)
    assert (code, out, err) == (0, "adr/0001-uber-fast-kernels.md\nadr/README.md\n", "")
    written = text(repo, "0001-uber-fast-kernels.md")
    assert written.startswith("# über fast kernels\n") and "\nProposed by: Jürgen Groß (" in written


def test_new_with_a_cyrillic_title_passes_check(repo):
    code, out, _ = cli(repo, "new", "Ядро для GPU", "--governs", "graphview/")
    assert (code, out) == (0, "adr/0001-ядро-для-gpu.md\nadr/README.md\n")
    assert cli(repo, "check") == (0, "adr check: 1 record in adr, no problems\n", "")


def test_new_with_a_very_long_title_writes_a_short_name_that_check_accepts(repo):
    title = " ".join(["decision"] * 40)                      # 359 letters: too long for a file name
    code, out, err = cli(repo, "new", title, "--governs", "graphview/")
    assert (code, err) == (0, ""), err
    name = os.path.basename(out.splitlines()[0])
    assert name == "0001-" + "-".join(["decision"] * 6) + ".md" and len(slug(title)) <= 60, name
    assert text(repo, name).startswith(f"# {title}\n"), "the title itself is kept whole"
    assert cli(repo, "check") == (0, "adr check: 1 record in adr, no problems\n", "")


@pytest.mark.parametrize("title, name", [
    ("x" * 300, "x" * 60),                                   # one long word is cut between letters
    ("a" * 58 + " bb cc", "a" * 58),                         # at a word boundary
    ("日本" * 100, "日本" * 30),
])
def test_long_titles_are_cut_to_at_most_60_characters(title, name):
    assert slug(title) == name
    assert record_number(f"0003-{name}.md") == 3
    assert record_number("0003-" + "-".join(["word"] * 20) + ".md") == 3, "longer names made by hand still pass"


def test_author_option_is_documented():
    assert "the name on the 'Proposed by:' line" in cli(".", "new", "--help", env={"COLUMNS": "200"})[1]
    with open(README, encoding="utf-8") as file:
        section = file.read().split("## Decision records (`graphview adr`)")[1].split("\n## Benchmarks")[0]
    assert '`graphview adr new "Title" --author NAME --governs PATH`' in section


# --- item 16: status and supersede ---------------------------------------------------------------------------------

def two_records(repo, new_status="Proposed"):
    write(repo, "0001-old.md", record("Old", status="**Accepted**"))
    write(repo, "0002-new.md", record("New", status=new_status, relates="0001"))


def index_row(repo, number):
    return next(line for line in text(repo, "README.md").splitlines() if line.startswith(f"| [{number:04d}]"))


def test_supersede_needs_an_accepted_record_and_writes_nothing_until_then(repo):
    two_records(repo)
    before = text(repo, "0001-old.md"), text(repo, "0002-new.md")
    code, out, err = cli(repo, "supersede", "1", "2")
    assert (code, out) == (2, "")
    assert err == ("graphview adr supersede: error: 0002 is 'Proposed'; only an Accepted or Implemented record "
                   "supersedes another (first: graphview adr status 0002 Accepted)\n")
    assert (text(repo, "0001-old.md"), text(repo, "0002-new.md")) == before


def test_status_then_supersede_update_both_records_and_the_index(repo):
    two_records(repo)
    assert cli(repo, "status", "0002", "accepted") == (0, "adr/0002-new.md\nadr/README.md\n", "")
    assert "\n## Status\nAccepted\n" in text(repo, "0002-new.md")
    assert index_row(repo, 2) == "| [0002](0002-new.md) | New | Accepted | 2026-11-23 |"
    code, out, err = cli(repo, "supersede", "1", "ADR-0002")
    assert (code, out, err) == (0, "adr/0001-old.md\nadr/0002-new.md\nadr/README.md\n", "")
    assert status_block(repo, "0001-old.md").startswith("# Old\n\n## Status\n**Superseded by 0002**\n")
    assert status_block(repo, "0002-new.md").endswith("Governs: graphview/graph.py\nRelates to: 0001\n"
                                                      "Supersedes: 0001\n\n")
    assert index_row(repo, 1) == "| [0001](0001-old.md) | Old | Superseded by 0002 | 2026-11-23 |"
    assert sorted(link_graph(AdrFolder(repo / "adr")).edges(data="kind")) == [(2, 1, "supersedes")]
    assert cli(repo, "check")[0] == 0


def test_status_of_a_superseded_record_takes_it_off_the_superseding_record(repo):
    two_records(repo, new_status="Accepted")
    cli(repo, "supersede", "1", "2")
    code, out, _ = cli(repo, "status", "2", "Rejected")
    assert code == 2 and out == ""
    assert cli(repo, "status", "1", "Accepted")[0] == 0
    assert "**Accepted**" in text(repo, "0001-old.md") and "Supersedes" not in text(repo, "0002-new.md")
    assert cli(repo, "check")[0] == 0
    assert cli(repo, "status", "2", "Rejected")[0] == 0


def test_status_superseded_by_moves_the_record_to_its_new_successor(repo):
    two_records(repo, new_status="Accepted")
    write(repo, "0003-newest.md", record("Newest", status="Implemented"))
    cli(repo, "supersede", "1", "2")
    code, out, _ = cli(repo, "status", "1", "Superseded", "by", "3")
    assert (code, out) == (0, "adr/0001-old.md\nadr/0002-new.md\nadr/0003-newest.md\nadr/README.md\n")
    assert "**Superseded by 0003**" in text(repo, "0001-old.md")
    assert "Supersedes" not in text(repo, "0002-new.md") and "\nSupersedes: 0001\n" in text(repo, "0003-newest.md")
    assert cli(repo, "check")[0] == 0


def test_supersedes_lines_are_rewritten_whole_and_line_endings_kept(repo):
    write(repo, "0001-a.md", record("A", status="Superseded by 0003"))
    write(repo, "0002-b.md", record("B", status="Superseded by 0003"))
    write(repo, "0003-c.md", record("C").replace("Governs:", "- **Supersedes:** 0001,\n  0002\nGoverns:")
          .replace("\n", "\r\n"))
    assert problems(repo) == []
    assert cli(repo, "status", "1", "Implemented")[0] == 0
    with open(repo / "adr" / "0003-c.md", newline="", encoding="utf-8") as file:
        written = file.read()
    assert "\r\n- **Supersedes:** 0002\r\nGoverns:" in written and "\n" not in written.replace("\r\n", "")


def test_status_writes_a_missing_status_line(repo):
    write(repo, "0001-a.md", record().replace("## Status\nAccepted\n", "## Status\n"))
    assert cli(repo, "status", "1", "Proposed")[0] == 0
    assert "## Status\nProposed\n\nProposed by:" in text(repo, "0001-a.md")


@pytest.mark.parametrize("argv, message", [
    (["status", "9", "Accepted"], "there is no record 0009 in adr"),
    (["status", "1", "Done"], "unknown status 'Done'; expected Proposed, Discussion, Accepted, Implemented, "
                              "Rejected or 'Superseded by NNNN'"),
    (["status", "one", "Accepted"], "argument number: 'one' is not a record number like 0005"),
    (["supersede", "1", "1"], "a record cannot supersede itself (0001)"),
])
def test_status_and_supersede_usage_errors(repo, argv, message):
    two_records(repo)
    code, out, err = cli(repo, *argv)
    assert (code, out) == (2, "") and err == f"graphview adr {argv[0]}: error: {message}\n"


def test_check_flags_a_record_superseded_by_one_that_is_not_accepted(repo):
    write(repo, "0001-a.md", record("A", status="Superseded by 0002"))
    write(repo, "0002-b.md", record("B", status="Proposed"))
    assert only_problem(repo) == ("0001-a.md", 4, "superseded by 0002, whose status is 'Proposed'; only an Accepted "
                                  "or Implemented record supersedes another (run 'graphview adr status 0002 "
                                  "Accepted')")


@pytest.mark.parametrize("supersedes, message", [
    ("0001", "supersedes 0001, whose status is 'Accepted', not 'Superseded by 0002' "
             "(run 'graphview adr supersede 0001 0002')"),
    ("0009", "Supersedes 0009 points nowhere: there is no record 0009"),
    ("0002", "Supersedes 0002 points at this record itself"),
    ("the old one", "'Supersedes:' item 'the old one' is not a record number"),
])
def test_check_flags_a_supersedes_line_the_other_record_does_not_confirm(repo, supersedes, message):
    write(repo, "0001-a.md", record("A"))
    write(repo, "0002-b.md", record("B").replace("Governs:", f"Supersedes: {supersedes}\nGoverns:"))
    assert only_problem(repo) == ("0002-b.md", 8, message)
