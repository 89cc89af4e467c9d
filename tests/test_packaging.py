"""How graphview installs: its kernels under a name it owns, every subpackage shipped (ADR 0015)."""
import ast
import configparser
import pathlib
import subprocess
import sys

import graphview_kernels

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_the_kernels_folder_installs_as_graphview_kernels():
    assert pathlib.Path(graphview_kernels.__file__).resolve().parent == ROOT / "kernels"


def test_kernels_never_import_graphview():
    for path in sorted((ROOT / "kernels").glob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""] if node.level == 0 else []
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                assert top not in {"graphview", "graphview_kernels", "kernels"}, \
                    f"{path.name} imports {name}: kernels import each other relatively and never graphview"


def test_setup_cfg_ships_every_graphview_subpackage():
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    listed = set(config["options"]["packages"].split())
    on_disk = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "graphview").rglob("__init__.py")}
    assert on_disk - listed == set(), "add these packages to setup.cfg's packages list"
    assert "graphview_kernels" in listed


def test_a_users_kernels_module_does_not_shadow_graphview(tmp_path):
    (tmp_path / "kernels.py").write_text("raise ImportError('the user kernels.py was imported')\n")
    (tmp_path / "script.py").write_text(
        "import graphview as gv, numpy as np\n"
        "g = gv.Graph(); x = g.placeholder('x', (2,))\n"
        "y = g.math.exp(x)\n"
        "print(g.output({'x': np.array([1.0, 2.0])}, [y])[y.name].sum() > 10)\n")
    done = subprocess.run([sys.executable, "script.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True"


def _build_editable_in_copy(tmp_path, backend):
    """Run a PEP 660 editable build of a copy of the project with setuptools' warnings as errors."""
    import shutil
    for name in ("setup.cfg", "pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, tmp_path / name)
    for folder in ("graphview", "kernels", "build_backend"):
        shutil.copytree(ROOT / folder, tmp_path / folder, ignore=shutil.ignore_patterns("__pycache__", "*.nbi", "*.nbc"))
    script = (
        "import sys, warnings\n"
        "sys.path.insert(0, 'build_backend')\n"
        "from setuptools.warnings import SetuptoolsWarning\n"
        "warnings.simplefilter('error', SetuptoolsWarning)\n"
        f"import {backend} as backend\n"
        "import os; os.makedirs('wheel-out')\n"
        "backend.build_editable('wheel-out')\n")
    return subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=300)


def test_the_editable_install_prints_no_setuptools_notice(tmp_path):
    (tmp_path / "ours").mkdir()
    (tmp_path / "plain").mkdir()
    ours = _build_editable_in_copy(tmp_path / "ours", "graphview_build")
    assert ours.returncode == 0, ours.stderr[-3000:]
    assert list((tmp_path / "ours" / "wheel-out").glob("graphview-*.whl"))
    # The same build through setuptools' backend unwrapped raises the notice: the test can fail.
    plain = _build_editable_in_copy(tmp_path / "plain", "setuptools.build_meta")
    assert plain.returncode != 0 and "Editable installation" in plain.stderr
