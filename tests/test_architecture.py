"""The architecture ratchet (ADR 0017, step 1): what the redesign removes may not grow back.

Each ceiling is today's figure from benchmarks/architecture_counts.py; every step of the
redesign lowers its ceiling in the same commit, until the final checks hold (no cycles,
function-level imports only for optional dependencies, no private reads, one shape-rule caller).
"""
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]

CEILINGS = {
    "import cycles": 0,
    "function-level imports of required modules": 0,
    "underscore imports": 0,
    "reads of Graph's private members outside graph.py": 0,
    "places calling a shape rule": 1,
    "kernels modules importing graphview": 0,
    "files over 500 lines": 0,
    "test, example and benchmark files over 500 lines": 0,
}


@pytest.fixture(scope="module")
def figures(counts):
    return counts.summary(ROOT)


@pytest.mark.parametrize("figure", sorted(CEILINGS))
def test_no_figure_grows_past_its_ceiling(figures, figure):
    value = figures[figure]
    assert value <= CEILINGS[figure], (
        f"{figure}: {value}, over its ceiling {CEILINGS[figure]} (run python benchmarks/architecture_counts.py "
        "to see where; ADR 0017)")


def test_the_counts_see_a_new_cycle_and_a_function_level_import(counts, tmp_path):
    package = tmp_path / "graphview"
    package.mkdir()
    (tmp_path / "kernels").mkdir()
    (package / "__init__.py").write_text("")
    (package / "graph.py").write_text("class Graph:\n    def _add_node(self):\n        pass\n")
    (package / "a.py").write_text("from graphview import b\n")
    (package / "b.py").write_text("def late():\n    from graphview import a\n")
    (package / "c.py").write_text("from graphview.b import _hidden\n\ndef f(g):\n    return g._add_node()\n")
    found = counts.summary(tmp_path)
    assert found["import cycles"] == 1
    assert found["function-level imports of required modules"] == 1
    assert found["underscore imports"] == 1
    assert found["reads of Graph's private members outside graph.py"] == 1
