"""The README's Python blocks run, in order, and its op table names every public op."""
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


def test_readme_lists_every_public_op_of_each_namespace():
    text = README.read_text()
    table = {row.split("|")[1].strip(" `"): row.split("|")[2] for row in text.splitlines()
             if row.startswith("| `g.")}
    for space, functions in NAMESPACES.items():
        if f"g.{space}" not in table:
            continue
        listed = set(re.findall(r"[a-z_]+", table[f"g.{space}"]))
        missing = sorted(name for name in functions if name not in listed)
        assert not missing, f"README's g.{space} row does not list {missing}"
    assert {"math", "nn", "linalg", "shape", "loss", "random"} <= {key[2:] for key in table}
    assert gv.ops()
