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
