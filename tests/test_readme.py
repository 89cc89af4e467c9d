"""The README's Python blocks run, in order, and every op its op table names exists in its namespace."""
import pathlib
import re
import runpy

import graphview as gv
from graphview.registry import NAMESPACES

README = pathlib.Path(__file__).resolve().parent.parent / "README.md"


def python_blocks():
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_readme_python_blocks_run(tmp_path, monkeypatch):
    # A real file, so that Numba can cache the kernels a README example compiles.
    script = tmp_path / "readme_blocks.py"
    script.write_text("\n".join(python_blocks()))
    monkeypatch.chdir(tmp_path)
    runpy.run_path(str(script), run_name="readme")


def table_ops(text):
    """{namespace: [op names]} from the README's op table (the one headed "| namespace | ops |"): each
    comma-separated entry of a ``g.<space>`` row, without its parenthesised notes ("reshape (one dim may
    be -1)", "softmax_cross_entropy(logits, integer_labels)")."""
    lines = text.splitlines()
    start = lines.index("| namespace | ops |") + 2
    found = {}
    for row in lines[start:]:
        if not row.startswith("|"):
            break
        space, ops = re.match(r"\| `g\.([a-z_]+)` \|(.*)\|$", row).groups()
        depth, entries, entry = 0, [], ""
        for character in ops:
            depth += {"(": 1, ")": -1}.get(character, 0)
            if character == "," and depth == 0:
                entries.append(entry)
                entry = ""
            else:
                entry += character
        entries.append(entry)
        found[space] = [re.match(r"\s*([a-z_0-9]+)", e).group(1) for e in entries]
    return found


def test_readme_op_table_names_only_ops_of_their_namespace():
    """One way (ADR 0017): every op the table names exists in its namespace; ``graphview ops`` is the
    complete list, so a new op needs no README edit."""
    table = table_ops(README.read_text())
    assert {"math", "nn", "linalg", "shape", "loss", "random"} <= set(table)
    for space, names in table.items():
        unknown = sorted(name for name in names if name not in NAMESPACES.get(space, {}))
        assert not unknown, f"README's g.{space} row names {unknown}, which g.{space} does not have"
    assert table["math"][:3] == ["add", "sub", "mul"] and table["shape"][0] == "reshape"
    assert gv.ops()


def headings(text):
    """The Markdown heading lines outside fenced code blocks, with their line numbers."""
    found, fenced = [], False
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(r"#{1,6} ", line):
            found.append((number, line))
    return found


def test_no_heading_is_a_pasted_edit_instruction():
    # Once a reviewer's "replace from ... up to "..." by:" was pasted in and rendered as a top-level section.
    pasted = [(number, line) for number, line in headings(README.read_text())
              if '" by:' in line or re.match(r"#+ (up to|replace|from) ", line, re.I) or line.rstrip().endswith(" by:")]
    assert pasted == [], pasted
    for number, line in headings(README.read_text()):
        assert "..." not in line, f"README.md:{number}: a heading with an elision is a pasted fragment: {line}"
