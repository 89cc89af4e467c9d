"""`make run` leaves pictures behind: the digits example's loss curve (PNG) and model graph (DOT, and SVG when
Graphviz' dot is installed), in a folder that git ignores."""
import importlib.util
import os
import re
import shlex
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

FAKE_DOT = """#!{python}
# A stand-in for Graphviz' dot: "dot -Tsvg IN -o OUT" writes an SVG that names the graph it read.
import sys
args = sys.argv[1:]
assert args[0] == "-Tsvg" and args[2] == "-o", args
name = open(args[1]).read().split('"')[1]
open(args[3], "w").write('<svg xmlns="http://www.w3.org/2000/svg"><title>' + name + '</title></svg>\\n')
"""


def make_run_line(script):
    """The `run` target's command for ``script``, with $(BIN)/python made this interpreter."""
    with open(os.path.join(ROOT, "Makefile"), encoding="utf-8") as file:
        recipe = file.read().split("\nrun:", 1)[1].split("\n\n", 1)[0]
    line = next(line.strip() for line in recipe.splitlines() if script in line)
    words = shlex.split(line)
    assert words[0] == "$(BIN)/python", line
    return [sys.executable, os.path.join(ROOT, words[1]), *words[2:]]


def load_example(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, "examples", f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_make_run_leaves_the_loss_curve_and_the_graph_as_dot_and_svg(tmp_path):
    pytest.importorskip("sklearn")
    pytest.importorskip("matplotlib")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "dot").write_text(FAKE_DOT.format(python=sys.executable))
    (bin_dir / "dot").chmod(0o755)
    environment = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    work = tmp_path / "work"
    work.mkdir()
    done = subprocess.run(make_run_line("examples/train_digits.py"), cwd=work, env=environment,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    folders = [path for path in work.iterdir()]
    assert len(folders) == 1 and folders[0].is_dir(), folders
    out = folders[0]
    assert sorted(os.listdir(out)) == ["digits-mlp.dot", "digits-mlp.svg", "loss.png"]
    assert (out / "loss.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    dot = (out / "digits-mlp.dot").read_text()
    assert dot.startswith('digraph "digits-mlp" {') and '"logits" -> "loss"' in dot
    assert "<title>digits-mlp</title>" in (out / "digits-mlp.svg").read_text()
    printed = done.stdout.splitlines()
    for name in ("loss.png", "digits-mlp.dot", "digits-mlp.svg"):
        relative = os.path.join(out.name, name)
        assert any(line.endswith(f": {relative}") for line in printed), (relative, printed)
    # The folder is one that git ignores, so the pictures never show up as changes.
    ignored = subprocess.run(["git", "check-ignore", "-q", os.path.join(out.name, "loss.png")], cwd=ROOT)
    assert ignored.returncode == 0, f"{out.name}/ is not in .gitignore"


def test_pictures_without_matplotlib_or_graphviz_say_so_and_go_on(tmp_path, monkeypatch, capsys):
    pytest.importorskip("sklearn")
    example = load_example("train_digits")
    monkeypatch.setitem(sys.modules, "matplotlib", None)        # import matplotlib raises ImportError
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))          # no dot on PATH
    example.main(["--epochs", "1", "--out", str(tmp_path / "out")])
    printed = capsys.readouterr().out
    assert re.search(r"loss curves: skipped, .*needs matplotlib: pip install 'graphview\[plot\]'", printed)
    assert "graph (SVG): skipped, Graphviz' dot is not installed" in printed
    assert f"graph (DOT): {tmp_path / 'out' / 'digits-mlp.dot'}" in printed
    assert sorted(os.listdir(tmp_path / "out")) == ["digits-mlp.dot"]


@pytest.mark.parametrize("out", ["a-file", "a-file/pictures"])
def test_an_out_that_cannot_be_a_folder_is_refused_before_training(tmp_path, out):
    (tmp_path / "a-file").write_text("not a folder\n")
    done = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "train_digits.py"), "--out", out],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stdout == "", done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr  # and stdout is empty: no epoch ran
    assert re.search(rf"train_digits.py: error: --out {out}: (is a file, not a folder|cannot create the folder)",
                     done.stderr), done.stderr
