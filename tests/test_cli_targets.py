"""The graphview command on users' own code: file targets under their real module name, --import, progress
while kernels compile, clear input errors and bounded reports (issue 14). Each test runs the real command."""
import json
import os
import pathlib
import re
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET

import pytest

from graphview.gradcheck import Failure

ROOT = pathlib.Path(__file__).resolve().parent.parent
README = ROOT / "README.md"


def graphview(*argv, cwd, env=None, command=("-m", "graphview")):
    """``python -m graphview ARGV`` in a fresh interpreter: (exit status, stdout, stderr)."""
    done = subprocess.run([sys.executable, *command, *argv], capture_output=True, text=True, cwd=cwd,
                          env=env or dict(os.environ, PYTHONPATH=str(ROOT)), timeout=600)
    return done.returncode, done.stdout, done.stderr


def one_line_error(status, out, err):
    assert status == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err, (status, out, err)
    return err


# --- item 3: a file target is imported under its real module name --------------------------------

def readme_defop_example():
    """The README's gv.defop example (my_softplus, with @njit(cache=True)), as the user would save it."""
    section = README.read_text().split("## Adding an op with `gv.defop`", 1)[1]
    block = re.search(r"```python\n(.*?)```", section, flags=re.S).group(1)
    assert "@njit(cache=True)" in block
    return "import numpy as np\nimport graphview as gv\n\n" + block + textwrap.dedent('''

        def build():
            g = gv.Graph("softplus")
            w = g.var("w", np.linspace(-2.0, 2.0, 5))
            g.set_loss(g.math.sum(my_softplus(w), name="loss"))
            return g, {}
    ''')


def test_a_file_target_with_numba_cached_kernels_runs_twice_and_imports_as_python_would(tmp_path):
    (tmp_path / "sp.py").write_text(readme_defop_example())
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("NUMBA_CACHE_DIR", None)  # the cache lands beside sp.py, keyed by that file
    for run in ("first", "second (from Numba's cache)"):
        status, out, err = graphview("gradcheck", "sp.py:build", "--quiet", cwd=tmp_path, env=env)
        assert (status, err) == (0, ""), f"{run} run: {err}"
        assert out.splitlines()[-1].startswith("PASSED: gradient check of sp.py:build")
    assert list((tmp_path / "__pycache__").glob("sp.my_softplus_kernel-*.nbi")), "Numba cached the kernel by file"
    script = os.path.join(os.path.dirname(sys.executable), "graphview")
    if os.path.exists(script):  # the console script is the same command
        done = subprocess.run([script, "gradcheck", "sp.py:build", "--quiet"], capture_output=True, text=True,
                              cwd=tmp_path, env=env, timeout=600)
        assert (done.returncode, done.stderr) == (0, "")
    status, out, err = graphview(cwd=tmp_path, env=env, command=("-c", textwrap.dedent("""
        import numpy as np
        import sp
        from graphview.targets import load_target
        graph, _ = load_target("sp.py:build")          # the same module as `import sp`, not a second copy
        assert graph.output({}, ["loss"])["loss"] == np.logaddexp(0.0, np.linspace(-2.0, 2.0, 5)).sum()
        import sys
        assert sys.modules["sp"] is sp
        print("ok")
    """)))
    assert (status, out.strip().splitlines()[-1]) == (0, "ok"), err


def test_a_file_in_a_package_is_imported_with_its_package(tmp_path):
    package = tmp_path / "models"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "layers.py").write_text("def width():\n    return 3\n")
    (package / "net.py").write_text(textwrap.dedent("""
        import numpy as np
        import graphview as gv
        from .layers import width          # a relative import works only under the real name models.net

        def build():
            g = gv.Graph(__name__)
            g.set_loss(g.math.sum(g.var("w", np.ones(width())) * 2.0, name="loss"))
            return g, {}
    """))
    status, out, err = graphview("summary", "models/net.py:build", cwd=tmp_path)
    assert status == 0, err
    assert out.startswith("graph 'models.net'")


def test_a_file_named_like_a_loaded_module_loads_under_a_private_name_and_runs_twice(tmp_path):
    # random.py is taken by the standard library (loaded before the target); the file still loads,
    # under a name of its own that is the same in every run, so its cached kernel works the second time.
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "random.py").write_text(readme_defop_example())
    for _ in range(2):
        status, out, err = graphview("gradcheck", "models/random.py:build", "--quiet", cwd=tmp_path)
        assert status == 0, err
        assert "PASSED" in out


# --- item 4: --import registers the ops a graph file or --ops needs -------------------------------

SWISH = textwrap.dedent('''
    import numpy as np
    import graphview as gv

    def _swish(x, out):
        out[...] = x / (1.0 + np.exp(-x))

    def _samples():
        return [gv.Sample((np.linspace(-2.0, 2.0, 5),), label="vector")]

    swish = gv.defop("swish", shape=lambda x: x, kernel=_swish, reference=lambda x: x / (1 + np.exp(-x)),
                     samples=_samples,
                     vjp=lambda grad, out, x: (grad * (out + x.graph.nn.sigmoid(x) * (1.0 - out)),))
    # d(x * x)/dx is 2x; this rule forgets the 2.
    swish_bad = gv.defop("swish_bad", shape=lambda x: x, kernel=lambda x, out: np.multiply(x, x, out=out),
                         vjp=lambda grad, out, x: (grad * x,), samples=_samples, reference=lambda x: x * x)

    def build():
        g = gv.Graph("swishnet")
        w = g.var("w", np.linspace(-1.0, 1.0, 4))
        g.set_loss(g.math.sum(swish(w), name="loss"))
        return g, {}

    if __name__ == "__main__":
        build()[0].save("model.gvz")
''')


@pytest.fixture(scope="module")
def swish_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("swish")
    (folder / "swish_ops.py").write_text(SWISH)
    subprocess.run([sys.executable, "swish_ops.py"], cwd=folder, check=True, timeout=600,
                   env=dict(os.environ, PYTHONPATH=str(ROOT)))
    return folder


def test_a_graph_file_with_defop_ops_needs_and_takes_import(swish_folder):
    err = one_line_error(*graphview("summary", "model.gvz", cwd=swish_folder))
    assert "unknown op 'swish'" in err and "--import MODULE" in err
    for module in ("swish_ops", "swish_ops.py", str(swish_folder / "swish_ops.py")):
        status, out, err = graphview("summary", "model.gvz", "--import", module, cwd=swish_folder)
        assert status == 0, err
        assert "swish" in out and "losses: loss" in out
    status, out, err = graphview("gradcheck", "model.gvz", "--import", "swish_ops.py", "--quiet", cwd=swish_folder)
    assert (status, err) == (0, ""), err
    status, out, err = graphview("dot", "model.gvz", "--import", "swish_ops", cwd=swish_folder)
    assert status == 0 and "swish" in out, err


def test_the_op_suite_and_the_op_list_take_import(swish_folder):
    err = one_line_error(*graphview("gradcheck", "--ops", "swish_bad", cwd=swish_folder))
    assert "no registered op named 'swish_bad'" in err and "--import MODULE" in err
    status, out, err = graphview("gradcheck", "--ops", "swish,swish_bad", "--import", "swish_ops.py",
                                 cwd=swish_folder)
    assert status == 1, err
    assert "FAILED: swish_bad" in out and re.search(r"^swish +custom .* ok$", out, flags=re.M), out
    status, out, err = graphview("ops", "--import", "swish_ops", "--import", "swish_ops.py", cwd=swish_folder)
    assert status == 0, err
    assert re.search(r"^swish_bad +custom", out, flags=re.M)


@pytest.mark.parametrize("module, message", [
    ("no_such_module_xyz", "--import no_such_module_xyz: cannot import no_such_module_xyz"),
    ("missing.py", "--import missing.py: no such file 'missing.py'"),
    ("not a module", "--import not a module: 'not a module' is neither a module name"),
])
def test_an_import_that_fails_is_an_input_error(swish_folder, module, message):
    err = one_line_error(*graphview("ops", "--import", module, cwd=swish_folder))
    assert message in err, err


# --- item 6: progress on stderr while kernels compile ----------------------------------------------

SLOW_FIRST_USE = textwrap.dedent('''
    import sys
    import numpy as np
    from numba import njit
    import graphview as gv
    import graphview.cli

    @njit                   # no cache: compiled in this process, on first use
    def _cube(x, out):
        flat_x, flat_out = x.ravel(), out.reshape(out.size)
        for i in range(flat_x.size):
            flat_out[i] = flat_x[i] ** 3

    gv.defop("cube_fresh", shape=lambda x: x, kernel=_cube, vjp=lambda grad, out, x: (grad * 3.0 * x * x,),
             samples=lambda: [gv.Sample((np.linspace(-1.0, 1.0, 4),))], reference=lambda x: x ** 3)
    graphview.cli.PROGRESS_DELAY = 0.0      # draw at once: this check is quicker than a real first run
    sys.exit(graphview.cli.main(sys.argv[1:]))
''')


def run_on_a_terminal(argv, cwd, columns=150, script=SLOW_FIRST_USE):
    """The command with stderr on a pseudo-terminal (``columns`` wide) and stdout on a pipe: (status, out, terminal)."""
    import pty
    import fcntl
    import struct
    import termios
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    process = subprocess.Popen([sys.executable, "-c", script, *argv], cwd=cwd, stdout=subprocess.PIPE,
                               stderr=follower, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    os.close(follower)
    shown = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the command closed the terminal
            break
        if not chunk:
            break
        shown += chunk
    out = process.stdout.read().decode()
    status = process.wait(timeout=600)
    os.close(leader)
    return status, out, shown.decode(errors="replace")


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
def test_progress_names_the_op_and_the_kernel_compiling_on_a_terminal(tmp_path):
    status, out, terminal = run_on_a_terminal(["gradcheck", "--ops", "cube_fresh"], tmp_path)
    assert status == 0, terminal
    assert "gradcheck ops" in terminal and "cube_fresh[0]" in terminal, terminal
    assert "compiling kernel _cube (once; cached)" in terminal, terminal
    assert "gradcheck ops" not in out and "\r" not in out, "stdout (reports) stays clean"
    status, out, terminal = run_on_a_terminal(["gradcheck", "--ops", "cube_fresh", "--quiet"], tmp_path)
    assert status == 0 and terminal == "", terminal
    assert out.startswith("gradient checks: 1/1")


STATUS_LINES_AT_ONCE = SLOW_FIRST_USE.replace(
    "graphview.cli.PROGRESS_DELAY = 0.0",
    "graphview.cli.PROGRESS_DELAY = graphview.cli.STATUS_LINES_DELAY = 0.0\n"
    "import graphview.cli_progress; graphview.cli_progress.LINE_EVERY = 0.0")


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
def test_a_terminal_of_zero_columns_gets_status_lines(tmp_path):
    # `docker run -t` without a real terminal, `script` under CI: a terminal, but tqdm draws nothing in 0 columns.
    status, out, terminal = run_on_a_terminal(["gradcheck", "--ops", "cube_fresh"], tmp_path, columns=0,
                                              script=STATUS_LINES_AT_ONCE)
    assert status == 0, terminal
    lines = [line for line in terminal.replace("\r\n", "\n").split("\n") if line]
    # Which states the lines catch depends on timing (a line at most every tick); that there are lines does not.
    assert lines and all(re.fullmatch(r"gradcheck ops: .* \[\d+ s\]", line) for line in lines), terminal


def test_progress_is_written_as_status_lines_when_stderr_is_not_a_terminal(tmp_path):
    # A CI log or `make run | tee`: no bar to redraw, but never silent for long either.
    script = STATUS_LINES_AT_ONCE
    done = subprocess.run([sys.executable, "-c", script, "gradcheck", "--ops", "cube_fresh"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=600, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert lines and all(re.fullmatch(r"gradcheck ops: .* \[\d+ s\]", line) for line in lines), done.stderr
    assert "\r" not in done.stderr and "gradcheck ops" not in done.stdout
    quiet = subprocess.run([sys.executable, "-c", script, "gradcheck", "--ops", "cube_fresh", "--quiet"],
                           cwd=tmp_path, capture_output=True, text=True, timeout=600,
                           env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr


def test_make_run_checks_the_ops_with_progress_and_the_readme_says_how_long_the_first_run_takes():
    recipe = (ROOT / "Makefile").read_text().split("\nrun:", 1)[1].split("\n\n", 1)[0]
    assert re.search(r"graphview gradcheck\s*$", recipe, flags=re.M), recipe
    quickstart = README.read_text().split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    assert "first" in quickstart and "compil" in quickstart and "cached" in quickstart


# --- item 9: input errors say what was expected ------------------------------------------------------

def test_a_python_file_without_function_and_a_wrong_inputs_file_say_what_is_expected(tmp_path):
    (tmp_path / "models.py").write_text("def build():\n    pass\n")
    (tmp_path / "notes.txt").write_text("x = 1, 2, 3\n")
    for command in ("summary", "gradcheck", "dot"):
        err = one_line_error(*graphview(command, "models.py", cwd=tmp_path))
        assert "models.py: a Python file needs the function that builds the graph: models.py:FUNCTION" in err
    err = one_line_error(*graphview("gradcheck", str(ROOT / "examples" / "mlp.py") + ":build", "--inputs",
                                    "notes.txt", cwd=tmp_path))
    assert ("--inputs notes.txt: not an .npz file; --inputs expects an .npz file of placeholder values by name, "
            "as np.savez(path, x=..., y=...) writes") in err
    assert "pickle" not in err


# --- item 10: reports record the options, time each variable and bound the failures ----------------

MANY_FAILURES = textwrap.dedent('''
    import numpy as np
    import graphview as gv

    # d(x * x)/dx is 2x; this rule forgets the 2.
    square_wrong = gv.defop("square_wrong", shape=lambda x: x, kernel=lambda x, out: np.multiply(x, x, out=out),
                            vjp=lambda grad, out, x: (grad * x,))

    def build():
        g = gv.Graph("many")
        big = g.var("big", np.linspace(1.0, 2.0, 300))
        small = g.var("small", np.array([1.5]))
        g.set_loss(g.math.sum(square_wrong(big), name="loss") + g.math.sum(small * small))
        return g, {}
''')


def test_json_and_junit_list_at_most_max_failures_per_variable_and_time_each_variable(tmp_path):
    (tmp_path / "many.py").write_text(MANY_FAILURES)
    status, out, err = graphview("gradcheck", "many.py:build", "--json", "r.json", "--junit", "r.xml",
                                 "--quiet", cwd=tmp_path)
    assert status == 1, err
    document = json.loads((tmp_path / "r.json").read_text())
    assert document["options"]["eps"] == 1e-5 and document["options"]["max_rel_error"] == 1e-5
    assert document["options"]["min_abs_error"] == 1e-6
    assert [f["variable"] for f in document["failures"]] == ["big"] * 20
    assert document["failures_not_listed"] == 280
    rows = {row["variable"]: row for row in document["variables"]}
    assert (rows["big"]["failed"], rows["big"]["failures_not_listed"]) == (300, 280)
    assert (rows["small"]["failed"], rows["small"]["failures_not_listed"]) == (0, 0)
    assert rows["big"]["seconds"] > 0 and rows["small"]["seconds"] > 0   # timed apart (no ratio: the machine is shared)
    suite = ET.parse(tmp_path / "r.xml").getroot().find("testsuite")
    big, small = suite.find("testcase[@name='big']"), suite.find("testcase[@name='small']")
    assert float(big.get("time")) == pytest.approx(rows["big"]["seconds"], abs=1e-6)
    assert float(small.get("time")) == pytest.approx(rows["small"]["seconds"], abs=1e-6)
    details = big.find("failure").text.splitlines()
    assert len(details) == 21 and details[-1] == "... and 280 more failures (--max-failures)"
    status, out, err = graphview("gradcheck", "many.py:build", "--json", "r.json", "--max-failures", "3",
                                 "--quiet", cwd=tmp_path)
    document = json.loads((tmp_path / "r.json").read_text())
    assert status == 1 and len(document["failures"]) == 3 and document["failures_not_listed"] == 297
    assert (tmp_path / "r.json").stat().st_size < 10_000
    if "culprit" in Failure.__dataclass_fields__:  # failure localisation (graphview/localize.py)
        assert {f["culprit"]["op"] for f in document["failures"]} == {"square_wrong"}
        assert "square_wrong" in big.find("failure").get("message")


# --- review: the op suite's JUnit honours --max-failures ---------------------------------------------

BAD_OP = textwrap.dedent('''
    import numpy as np
    import graphview as gv

    # d(x * x)/dx is 2x; this rule forgets the 2.
    sq_bad = gv.defop("sq_bad", shape=lambda x: x, kernel=lambda x, out: np.multiply(x, x, out=out),
                      vjp=lambda grad, out, x: (grad * x,), reference=lambda x: x * x,
                      samples=lambda: [gv.Sample((np.linspace(1.0, 2.0, 500),))])
''')


@pytest.mark.parametrize("max_failures", [5, 0])
def test_the_op_suite_junit_lists_at_most_max_failures_as_the_json_does(tmp_path, max_failures):
    (tmp_path / "opsbad.py").write_text(BAD_OP)
    status, out, err = graphview("gradcheck", "--ops", "sq_bad", "--import", "opsbad.py", "--junit", "o.xml",
                                 "--json", "o.json", "--max-failures", str(max_failures), "--quiet", cwd=tmp_path)
    assert status == 1, err
    case = json.loads((tmp_path / "o.json").read_text())["cases"][0]
    assert (len(case["failures"]), case["failures_not_listed"]) == (max_failures, 500 - max_failures)
    failure = ET.parse(tmp_path / "o.xml").getroot().find("testsuite/testcase/failure")
    details = failure.text.splitlines()
    listed = [line for line in details if re.match(r"input0\[\d+\]: analytic=", line)]
    assert len(listed) == max_failures, failure.text
    assert details[-1].endswith(f"... and {500 - max_failures} more failures (--max-failures)"), failure.text
    assert "sq_bad" in failure.get("message")


# --- review: a file that is no Python module, and --import before the command --------------------------

@pytest.mark.parametrize("target, message", [
    ("sp.gvz:build", "sp.gvz:build: sp.gvz is a graph file, so it has no function 'build' to call"),
    ("notes.txt:build", "notes.txt:build: notes.txt is not a Python file, so it has no function 'build' to call"),
])
def test_a_graph_file_or_other_file_with_a_function_is_refused_without_importing_anything(tmp_path, target,
                                                                                         message):
    (tmp_path / "sp.py").write_text("raise SystemExit('sp.py was imported')\n")
    (tmp_path / "notes.txt").write_text("hello\n")
    err = one_line_error(*graphview("summary", target, cwd=tmp_path))
    assert message in err and "cannot import" not in err and "sp.py was imported" not in err, err


def test_import_may_come_before_the_command(swish_folder):
    status, out, err = graphview("--import", "swish_ops.py", "ops", cwd=swish_folder)
    assert status == 0, err
    assert re.search(r"^swish_bad +custom", out, flags=re.M)
    status, out, err = graphview("--import", "swish_ops", "gradcheck", "--ops", "swish", "--import",
                                 "swish_ops.py", "--quiet", cwd=swish_folder)
    assert (status, err) == (0, ""), err
