"""The import layers and the private names of ADR 0017, checked on the source (nothing is imported).

Each check fails on any violation it finds, with where it is. The analysis is benchmarks/architecture_counts.py's (``import_records``, ``private_reads``).
"""
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]

# ADR 0017's layer table: a module imports only from its own layer or below. "x.*" is a package and
# everything in it. Placed here, not named by the table: layouts/ops (view ops) and ops/masked_* in
# layer 2, layouts/dimfile (the dims table in graph files) in layer 4 with serialization, the
# package __init__s with their modules, graphview/__main__ in layer 7.
LAYERS = {
    0: ["graphview_kernels.*"],
    1: ["graphview.errors", "graphview.shapes", "graphview.dtypes", "graphview.dims", "graphview.attributes",
        "graphview.registry", "graphview.variable", "graphview.indexing", "graphview.testing",
        "graphview.runstate", "graphview.version", "graphview.layouts.table", "graphview.masked_form",
        "graphview.init", "graphview.config", "graphview.allocation", "graphview.rule_context"],
    2: ["graphview.ops.*", "graphview.layouts", "graphview.layouts.dimrules", "graphview.layouts.ops"],
    3: ["graphview.core", "graphview.infer"],
    4: ["graphview.building", "graphview.masking", "graphview.listeners", "graphview.scheduling",
        "graphview.execution", "graphview.autodiff", "graphview.serialization", "graphview.graph_archive",
        "graphview.layouts.dimfile", "graphview.fusion", "graphview.fused_kernels", "graphview.compilation"],
    5: ["graphview.gradients.*"],
    6: ["graphview.graph", "graphview.training.*", "graphview.finite_differences", "graphview.localize",
        "graphview.gradcheck", "graphview.opsuite", "graphview.rearrange", "graphview.layouts.views",
        "graphview.data.*", "graphview.layers.*", "graphview.model_summary",
        "graphview.distributed.*"],
    7: ["graphview", "graphview.__main__", "graphview.cli", "graphview.cli_usage", "graphview.cli_report", "graphview.cli_progress", "graphview.cli_suite",
        "graphview.targets", "graphview.dot", "graphview.adr.*", "graphview.onnx.*"],
}

# What a function-level import may cut (with a comment saying so).
OPTIONAL = {"matplotlib", "tqdm", "sklearn", "threadpoolctl", "scipy", "mpi4py", "onnx", "torch", "jax"}

# Violations are reported as "importer -> imported" (an import from a higher layer, one inside an import
# cycle, or an import inside a function of something that is no optional dependency), "importer -> package
# (no comment)" (an optional one without a comment on or above its line), "reader -> module._name"
# (``from module import _name`` or ``module._name``) and "reader -> ._name" (``<expr>._name`` where only
# other modules' classes define ``_name``).


def short(module):
    return module[len("graphview."):] if module.startswith("graphview.") else module


def layer_of(module):
    """The layer LAYERS gives ``module``, or None."""
    for layer, names in LAYERS.items():
        for name in names:
            if module == name.removesuffix(".*") or (name.endswith(".*") and module.startswith(name[:-1])):
                return layer
    return None


def layering_violations(counts, root):
    """{"importer -> imported": [where, ...]} for imports between known modules that go up a layer or sit in
    a cycle, module- and function-level both."""
    records = counts.import_records(root)
    known = set(counts.modules(root))
    graph = {}
    for record in records:
        if record.target in known:
            graph.setdefault(record.importer, set()).add(record.target)
    in_cycle = {}
    for number, component in enumerate(counts.components(graph, known)):
        in_cycle.update({module: number for module in component})
    found = {}
    for record in records:
        if record.target not in known:
            continue
        upward = (layer_of(record.target) or 0) > (layer_of(record.importer) or 0)
        cyclic = record.importer in in_cycle and in_cycle[record.importer] == in_cycle.get(record.target)
        if upward or cyclic:
            why = " and ".join(w for w, holds in (("up a layer", upward), ("in a cycle", cyclic)) if holds)
            found.setdefault(f"{short(record.importer)} -> {short(record.target)}", []).append(
                f"line {record.line} ({record.level}-level, {why})")
    return found


def function_level_violations(counts, root):
    found = {}
    for record in counts.import_records(root):
        if record.level != "function":
            continue
        if record.target.split(".")[0] not in OPTIONAL:
            entry = f"{short(record.importer)} -> {short(record.target)}"
        elif not record.commented:
            entry = f"{short(record.importer)} -> {record.target} (no comment)"
        else:
            continue
        found.setdefault(entry, []).append(f"line {record.line}")
    return found


def private_violations(counts, root):
    found = {}
    for read in counts.private_reads(root):
        owner = "" if read.kind == "member" else short(read.owner)
        found.setdefault(f"{short(read.reader)} -> {owner}.{read.name}", []).append(
            f"line {read.line}: {read.text}" + (f" (defined by {read.owner})" if read.kind == "member" else ""))
    return found


def assert_none(found):
    assert not found, "ADR 0017 forbids:\n" + "\n".join(
        f"  {entry}: {'; '.join(where)}" for entry, where in sorted(found.items()))


def test_every_module_has_a_layer(counts):
    unplaced = sorted(m for m in counts.modules(ROOT) if layer_of(m) is None)
    assert not unplaced, f"modules with no layer in LAYERS (ADR 0017's table): {unplaced}"


def test_imports_go_down_the_layers_and_form_no_cycle(counts):
    assert_none(layering_violations(counts, ROOT))


def test_kernels_import_no_graphview(counts):
    found = kernels_importing_graphview(counts, ROOT)
    assert not found, found


def kernels_importing_graphview(counts, root):
    return [f"{record.importer} line {record.line} imports {record.target}" for record in counts.import_records(root)
            if record.importer.startswith("graphview_kernels") and record.target.split(".")[0] == "graphview"]


def test_function_level_imports_cut_only_optional_dependencies_and_say_so(counts):
    assert_none(function_level_violations(counts, ROOT))


def test_no_module_reads_another_modules_private_names(counts):
    assert_none(private_violations(counts, ROOT))


def test_the_checks_see_what_they_forbid(counts, tmp_path):
    """The checks on a small tree with one of each violation (and what they must let through)."""
    package = tmp_path / "graphview"
    (package / "ops").mkdir(parents=True)
    (tmp_path / "kernels").mkdir()
    files = {
        "__init__.py": "",
        "ops/__init__.py": "",
        "errors.py": "def fail():\n    # plotting is optional\n    import matplotlib\n    import tqdm\n",
        "registry.py": "from graphview.ops import math\n",                      # layer 1 -> 2
        "ops/math.py": "from graphview.ops.view import _hidden\n\n\ndef rule(g):\n    return g._store\n",
        "ops/view.py": "def late():\n    from graphview.ops import math\n\n\ndef _hidden():\n    pass\n",
        "graph.py": "class Graph:\n    def __init__(self):\n        self._store = {}\n\n    def own(self, other):\n"
                    "        return other._store\n",
        "dims.py": "import graphview.errors as errors\n\n\ndef f(x):\n    return errors._private, x._unknown\n",
        "../kernels/__init__.py": "",
        "../kernels/reduce.py": "from graphview.errors import fail\n",
    }
    for name, text in files.items():
        (package / name).write_text(text)
    layering = layering_violations(counts, tmp_path)
    assert set(layering) == {"registry -> ops.math", "ops.math -> ops.view", "ops.view -> ops.math",
                             "graphview_kernels.reduce -> errors"}
    assert kernels_importing_graphview(counts, tmp_path) == ["graphview_kernels.reduce line 1 imports graphview.errors"]
    assert "up a layer" in layering["registry -> ops.math"][0] and "in a cycle" in layering["ops.view -> ops.math"][0]
    assert set(function_level_violations(counts, tmp_path)) == {"ops.view -> ops.math", "errors -> tqdm (no comment)"}
    assert set(private_violations(counts, tmp_path)) == {"ops.math -> ops.view._hidden", "ops.math -> ._store",
                                                         "dims -> errors._private"}
