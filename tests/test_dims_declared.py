"""Dims and masking are declared per op (ADR 0017): an op's ``dims=`` rule (``gv.defop`` or
``registry.defdims``) or its family's default carries dims to its output, its ``masked=`` spec
says how it is built over a dim with lengths, and no module switches on op names for either."""
import ast
import pathlib

import numpy as np
import pytest
from numba import njit

import graphview as gv
from graphview import registry
from graphview.layouts import dimrules
from graphview.ops.masked import REDUCTION_PASSES, Masked

ROOT = pathlib.Path(__file__).resolve().parents[1]


@njit(cache=True)
def _copy_kernel(x, out):
    for i in range(x.size):
        out.flat[i] = x.flat[i]


def _reversed_dims(in_dims, in_shapes, attrs, out_shape):
    return tuple(reversed(in_dims[0]))


def _batch_only(in_dims, in_shapes, attrs, out_shape):
    return (in_dims[0][0],) + (None,) * (len(out_shape) - 1)


@pytest.fixture
def declare():
    """gv.defop for the test, the op removed from the registry afterwards."""
    names = []

    def define(name, **options):
        names.append(name)
        options.setdefault("differentiable", False)
        return gv.defop(name, shape=options.pop("shape", lambda x: x), kernel=_copy_kernel, **options)
    yield define
    for name in names:
        registry._REGISTRY.pop(name, None)
        registry._CALLABLES.pop(name, None)


def _sequence():
    g = gv.Graph()
    time, feature = gv.Dim("time"), gv.Dim("feature", 3)
    x = g.placeholder("x", (2, 4, 3), dims=(gv.batch_dim, time, feature))
    return g, x, time, feature


def test_an_op_declared_with_dims_gets_its_dims_from_the_declaration(declare):
    flip = declare("test_dims_declared_flip", shape=lambda x: tuple(reversed(x)), dims=_reversed_dims)
    g, x, time, feature = _sequence()
    assert gv.dims_of(flip(x)) == (feature, time, gv.batch_dim)


def test_a_rule_registered_with_defdims_replaces_the_family_default(declare):
    same = declare("test_dims_declared_same", family="elementwise")
    g, x, time, feature = _sequence()
    assert gv.dims_of(same(x)) == (gv.batch_dim, time, feature)      # the element-wise default
    registry.defdims(same, _batch_only)
    assert registry.get("test_dims_declared_same").dims is _batch_only
    assert gv.dims_of(same(x)) == (gv.batch_dim, None, None)


def test_an_op_without_a_rule_gets_its_family_default(declare):
    g, x, time, feature = _sequence()
    assert gv.dims_of(declare("test_dims_declared_elementwise", family="elementwise")(x)) == gv.dims_of(x)
    assert gv.dims_of(declare("test_dims_declared_nn", family="nn")(x)) == gv.dims_of(x)
    row_sum = declare("test_dims_declared_reduce", family="reduce", shape=lambda x, axis=None, keepdims=False:
                      tuple(d for i, d in enumerate(x) if i != axis))
    assert gv.dims_of(row_sum(x, axis=2)) == (gv.batch_dim, time)
    # a family with no default (and no rule): the output's dims are unknown
    assert gv.dims_of(declare("test_dims_declared_custom")(x)) == (None, None, None)
    assert dimrules.rule_of(registry.get("test_dims_declared_custom")) is None


def test_the_built_in_rules_are_declarations_on_their_ops():
    for name in ("permute", "transpose", "squeeze", "expand_dims", "reshape", "reshape_like", "broadcast_to",
                 "broadcast_like", "concat", "gather", "matmul", "masked_sum", "masked_softmax"):
        assert registry.get(name).dims is not None, name
    for name in ("add", "sum", "softmax"):   # family defaults
        assert registry.get(name).dims is None and dimrules.rule_of(registry.get(name)) is not None, name


def test_a_user_reduction_declared_with_a_masked_form_is_built_masked(declare):
    total = declare("test_dims_declared_total", family="reduce", shape=lambda x, axis=None, keepdims=False: (),
                    masked=Masked("masked_sum", where_neutral=0.0, passes=REDUCTION_PASSES))
    g = gv.Graph()
    time = gv.Dim("time")
    x = g.placeholder("x", (2, 3), dims=(gv.batch_dim, time), lengths={time: "n"})
    built = total(x)
    assert built.node.op == "masked_sum"
    values = np.array([[1.0, 2.0, np.nan], [4.0, np.nan, np.nan]])
    assert g.output({"x": values, "n": np.array([2, 1])}, [built])[built.name] == 7.0
    with gv.unmasked():
        assert total(x).node.op == "test_dims_declared_total"


def test_a_masked_form_without_passes_gets_the_plain_ops_attributes(declare):
    """A spec as the README shows it (no passes=): the masked op takes the axis the plain op was given."""
    row_sum = declare("test_dims_declared_row_sum", family="reduce", masked=gv.Masked("masked_sum"),
                      shape=lambda x, axis=0: x[:axis] + x[axis + 1:])
    g = gv.Graph()
    time = gv.Dim("time")
    x = g.placeholder("x", (None, None, 4), dims=(gv.batch_dim, time, gv.Dim("f", 4)), lengths={time: "n"})
    y = row_sum(x, axis=1)
    assert y.node.op == "masked_sum" and y.shape == (None, 4)
    result = g.output({"x": np.ones((2, 3, 4)), "n": np.array([3, 1])}, [y])[y.name]
    np.testing.assert_array_equal(result, [[3.0] * 4, [1.0] * 4])


def test_a_masked_form_that_gives_another_shape_is_an_error(declare):
    every = declare("test_dims_declared_every", family="reduce", shape=lambda x, axis=0: x[:axis] + x[axis + 1:],
                    masked=gv.Masked("masked_sum", passes=(("keepdims", False),)))
    g = gv.Graph()
    time = gv.Dim("time")
    x = g.placeholder("x", (None, None, 4), dims=(gv.batch_dim, time, gv.Dim("f", 4)), lengths={time: "n"})
    with pytest.raises(gv.GraphviewError, match=r"test_dims_declared_every: its masked form 'masked_sum' gives shape "
                                                r"\(\), but the op's shape rule gives \(\?, 4\)"):
        every(x, axis=1)


def test_a_masked_spec_is_checked(declare):
    with pytest.raises(gv.GraphviewError, match="axes='last' is not one of attribute, attribute or last"):
        Masked("masked_sum", axes="last")
    with pytest.raises(gv.GraphviewError, match="without a masked op, where_neutral must say"):
        Masked(None)
    with pytest.raises(gv.GraphviewError, match=r"defop test_dims_declared_vague: the masked form must be a "
                                                r"gv.Masked\(...\) declaration, not 'masked_sum'"):
        declare("test_dims_declared_vague", masked="masked_sum")
    assert "test_dims_declared_vague" not in registry.ops()
    with pytest.raises(gv.GraphviewError, match=r"defmasked exp: the masked form must be a gv.Masked"):
        registry.defmasked("exp", "masked_sum")
    assert registry.get("exp").masked is None


# --- nothing switches on op names ----------------------------------------------------------------

# Where dims and masking used to be switched on op names (layouts/table._rule, ops/masked_redirect).
DECLARATION_READERS = sorted((ROOT / "graphview" / "layouts").glob("*.py")) + [
    ROOT / "graphview" / "masking.py", ROOT / "graphview" / "building.py"]


def _names_an_op(node):
    """``definition.name``, ``<x>.definition.name``, ``<node>.op`` or a variable called ``op``."""
    if isinstance(node, ast.Name):
        return node.id in ("op", "op_name")
    if isinstance(node, ast.Attribute):
        if node.attr == "op":
            return True
        owner = node.value
        return node.attr == "name" and (
            (isinstance(owner, ast.Name) and owner.id == "definition")
            or (isinstance(owner, ast.Attribute) and owner.attr == "definition"))
    return False


def _switches_on_op_names(tree):
    """Lines comparing an op's name with anything but None, looking a name up in a table, or testing
    its prefix (``op.startswith("masked_")``)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            against_none = all(isinstance(o, (ast.Is, ast.IsNot)) for o in node.ops) and any(
                isinstance(s, ast.Constant) and s.value is None for s in sides)
            if any(_names_an_op(s) for s in sides) and not against_none:
                found.append(node.lineno)
        elif isinstance(node, ast.Subscript) and _names_an_op(node.slice):
            found.append(node.lineno)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in ("startswith", "endswith") and _names_an_op(node.func.value)):
            found.append(node.lineno)
    return found


def test_no_module_reading_the_declarations_switches_on_op_names():
    for path in DECLARATION_READERS:
        lines = _switches_on_op_names(ast.parse(path.read_text(), str(path)))
        assert not lines, f"{path.relative_to(ROOT)} switches on op names at lines {lines}; declare it on the op"


@pytest.mark.parametrize("source", [
    'if definition.name == "permute":\n    pass\n',
    'if op in ("reshape", "reshape_like"):\n    pass\n',
    'rule = RULES[definition.name]\n',
    'masked = op.startswith("masked_")\n',
    'if x.node.op != "gather":\n    pass\n',
])
def test_the_check_sees_each_kind_of_switch(source):
    assert _switches_on_op_names(ast.parse(source)) == [1]


def test_the_check_lets_a_none_test_and_a_message_pass():
    source = 'if spec.op is None:\n    raise DimError(f"{op}: no input")\n'
    assert _switches_on_op_names(ast.parse(source)) == []


def test_a_dims_rule_that_fails_or_miscounts_is_an_error_naming_the_op(declare):
    def broken(in_dims, in_shapes, attrs, out_shape):
        return {}["missing"]

    def short(in_dims, in_shapes, attrs, out_shape):
        return in_dims[0][:1]
    g, x, time, feature = _sequence()
    with pytest.raises(gv.DimError, match=r"test_dims_declared_broken '.*': its dims rule raised KeyError: 'missing'"):
        declare("test_dims_declared_broken", dims=broken)(x)
    with pytest.raises(gv.DimError, match=r"test_dims_declared_short '.*': its dims rule gave 1 dims for an output "
                                          r"of rank 3"):
        declare("test_dims_declared_short", dims=short)(x)
