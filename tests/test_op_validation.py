"""Ops are checked when they are built: inputs and attributes against the shape rule, sizes, integer shapes."""
import numpy as np
import pytest

import graphview as gv
from graphview import registry


@pytest.fixture
def g():
    return gv.Graph()


@pytest.mark.parametrize("call, message", [
    (lambda g, a: g.math.exp(a, a), r"exp takes 1 input \(x\), got 2"),
    (lambda g, a: g.math.add(a, a, a), r"add takes 2 inputs \(x, y\), got 3"),
    (lambda g, a: g.math.neg(), r"neg takes 1 input \(x\), got 0"),
    (lambda g, a: g.math.where(a > 0, a), r"where takes 3 inputs \(condition, x, y\), got 2"),
    (lambda g, a: g.math.add(a, a, foo=1), "add got an unexpected attribute 'foo'"),
    (lambda g, a: registry.op("sum")(a, axes=0), "sum got an unexpected attribute 'axes'; it takes axis, keepdims"),
    (lambda g, a: registry.op("add")(a, x=1.0), "add got 'x' as an attribute, but it is an input"),
    (lambda g, a: registry.op("create_view")(a), "create_view needs the attribute 'descriptors'"),
])
def test_wrong_inputs_or_attributes_are_refused_when_the_op_is_built(g, call, message):
    a = g.placeholder("a", (3,))
    before = len(g.nodes())
    with pytest.raises(gv.OpArgumentError, match=message) as caught:
        call(g, a)
    assert isinstance(caught.value, gv.GraphviewError) and isinstance(caught.value, TypeError)
    assert not isinstance(caught.value, gv.DTypeError)
    assert len(g.nodes()) == before + (2 if "where" in message else 0)  # only a > 0 (a const and gt) was added


def test_a_type_error_in_a_shape_rule_is_a_shape_error_not_a_dtype_error(g):
    def rule(x, factor):
        return tuple(d * factor for d in x)
    op = gv.defop("test_scaled_shape", shape=rule, kernel=lambda x, out, factor: None, differentiable=False)
    try:
        with pytest.raises(gv.ShapeError, match="test_scaled_shape"):
            op(g.placeholder("a", (3,)), factor="x")
    finally:
        registry._REGISTRY.pop("test_scaled_shape", None)
        registry._CALLABLES.pop("test_scaled_shape", None)


def test_a_dtype_rule_failure_is_a_dtype_error(g):
    with pytest.raises(gv.DTypeError, match="int32 or int64"):
        g.shape.gather(g.placeholder("a", (3,)), np.array([0.5]))


def test_defop_refuses_inplace_positions_that_are_not_inputs():
    with pytest.raises(gv.GraphviewError, match=r"defop test_bad_inplace: inplace position 3 is not an input "
                                                r"position; it takes 1 input \(x\)"):
        gv.defop("test_bad_inplace", shape=lambda x: x, kernel=lambda x: x, inplace=(3,))
    with pytest.raises(gv.GraphviewError, match="inplace position -1"):
        gv.defop("test_bad_inplace", shape=lambda x: x, kernel=lambda x: x, inplace=(-1,))
    assert "test_bad_inplace" not in registry.ops()


@pytest.mark.parametrize("build, message", [
    (lambda g: g.placeholder("p", (2**63,)), r"placeholder 'p': shape \(9223372036854775808,\) of float64 needs"),
    (lambda g: g.placeholder("p", (2**62, None, 4), "bool"), "an array holds at most 2\\*\\*63 - 1"),
    (lambda g: g.placeholder("p", (0, 2**62, 4), "bool"), "needs 18446744073709551616 bytes"),
    (lambda g: g.random.normal((2**62, 4)), r"normal .*shape \(4611686018427387904, 4\) of float64 needs"),
    (lambda g: g.math.exp(g.placeholder("x", (3,)))[(None,) * 70], "rank 71 has more than NumPy's 64 dimensions"),
    (lambda g: g.shape.broadcast_to(g.placeholder("x", (1,)), (2**40, 2**30)), "broadcast_to .* needs"),
])
def test_shapes_numpy_could_never_allocate_are_refused_when_built(g, build, message):
    with pytest.raises(gv.ShapeError, match=message):
        build(g)


def test_the_largest_shapes_are_still_accepted_when_built(g):
    assert g.placeholder("p", (2**61, 3), "bool").shape == (2**61, 3)
    assert g.math.exp(g.placeholder("x", (3,)))[(None,) * 63].rank == 64


@pytest.mark.parametrize("build, message", [
    (lambda g, b, m: g.shape.reshape(b, (2.9, 3)), r"reshape: the new shape \(2.9, 3\) holds 2.9, which is not an int"),
    (lambda g, b, m: g.shape.reshape(b, (True, 6)), "holds True, which is not an int"),
    (lambda g, b, m: g.shape.reshape(b, np.array([2.0, 3.0])), "holds 2.0, which is not an int"),
    (lambda g, b, m: registry.op("reshape")(b, shape=(2.9, 3)), "holds 2.9"),
    (lambda g, b, m: g.random.normal((2.5,)), r"normal: attribute 'shape': \(2.5,\) holds 2.5"),
    (lambda g, b, m: g.random.uniform((2, 1.5)), "holds 1.5"),
    (lambda g, b, m: g.shape.broadcast_to(b, (2.5, 6)), r"broadcast_to: shape \(2.5, 6\) holds 2.5"),
    (lambda g, b, m: g.shape.permute(m, (1.0, 0.0)), r"permute: perm \(1.0, 0.0\) holds 1.0"),
    (lambda g, b, m: g.shape.permute(m, 1.0, 0), "permute: perm .* holds 1.0"),
])
def test_float_shape_entries_are_refused_not_truncated(g, build, message):
    b, m = g.placeholder("b", (6,)), g.placeholder("m", (2, 3))
    with pytest.raises(gv.ShapeError, match=message):
        build(g, b, m)


def test_integer_shape_entries_of_any_integer_type_are_accepted(g):
    b = g.placeholder("b", (6,))
    assert g.shape.reshape(b, (np.int64(2), 3)).shape == (2, 3)
    assert g.shape.reshape(b, np.array([3, 2])).shape == (3, 2)
    assert g.shape.reshape(b, np.int32(6)).shape == (6,)
    assert g.random.normal((np.int64(2), 2)).shape == (2, 2)
    assert g.shape.permute(g.placeholder("m", (2, 3)), np.int64(1), 0).shape == (3, 2)


def test_a_shape_rule_may_be_any_callable_even_an_unhashable_one():
    from dataclasses import dataclass

    @dataclass
    class Tile:
        reps: int

        def __call__(self, x):
            return (x[0] * self.reps,) + tuple(x[1:])

    def tile_kernel(x, out):
        for r in range(out.shape[0] // x.shape[0]):
            out[r * x.shape[0]:(r + 1) * x.shape[0]] = x

    name = "test_tile3"
    try:
        tile = gv.defop(name, shape=Tile(3), kernel=tile_kernel, differentiable=False)
        g = gv.Graph()
        y = tile(g.constant("a", np.array([1.0, 2.0])))
        np.testing.assert_array_equal(g.output({}, [y])[y.name], [1, 2, 1, 2, 1, 2])
        with pytest.raises(gv.OpArgumentError, match="test_tile3 takes 1 input"):
            tile(g.constant("b", np.ones(2)), g.constant("c", np.ones(2)))
    finally:
        registry._REGISTRY.pop(name, None)
        registry._CALLABLES.pop(name, None)


# --- whatever a rule raises is the rule's error kind, the original kept as its cause (review item 7) --

@pytest.fixture
def failing_rules():
    def shape(x, k=1):
        return tuple(d // k for d in x) if k != 7 else 1 / 0

    def dtype(x, k=1):
        return {"a": x}[k] if k == 5 else x

    op = gv.defop("test_failing_rules", shape=shape, dtype=dtype, kernel=lambda x, out, k=1: None,
                  differentiable=False)
    yield op
    registry._REGISTRY.pop("test_failing_rules", None)
    registry._CALLABLES.pop("test_failing_rules", None)


@pytest.mark.parametrize("k, kind, cause, message", [
    (7, gv.ShapeError, ZeroDivisionError, "ZeroDivisionError: division by zero"),
    (5, gv.DTypeError, KeyError, "KeyError: 5"),
    (0, gv.ShapeError, ZeroDivisionError, "integer division or modulo by zero"),
])
def test_any_exception_a_rule_raises_is_reported_as_the_rule_s_kind_naming_the_op(g, failing_rules, k, kind, cause,
                                                                                    message):
    x = g.placeholder("x", (4,))
    with pytest.raises(kind, match=rf"test_failing_rules 'y' \(x \(4,\) float64\) with k={k}: .*{message}") as caught:
        failing_rules(x, k=k, name="y")
    assert isinstance(caught.value.__cause__, cause)
    assert [n.name for n in g.nodes()] == ["x"]


@pytest.mark.parametrize("k, message", [(7, "ZeroDivisionError: division by zero"), (5, "KeyError: 5")])
def test_any_exception_a_rule_raises_at_load_is_a_graph_file_error_naming_the_node(g, failing_rules, tmp_path, k,
                                                                                     message):
    import json
    import zipfile
    failing_rules(g.placeholder("x", (4,)), k=2, name="y")
    g.save(tmp_path / "good.gvz")
    with zipfile.ZipFile(tmp_path / "good.gvz") as archive:
        members = {member: archive.read(member) for member in archive.namelist()}
    document = json.loads(members["graph.json"])
    document["nodes"][1]["attrs"] = [["k", k]]
    with zipfile.ZipFile(tmp_path / "bad.gvz", "w") as archive:
        for member, data in {**members, "graph.json": json.dumps(document)}.items():
            archive.writestr(member, data)
    with pytest.raises(gv.GraphFileError, match=rf"node 1 \('y'\): op test_failing_rules .*{message}"):
        gv.load(tmp_path / "bad.gvz")


# --- a MemoryError from a kernel is not turned into an ExecutionError (review item 12) --------------

@pytest.mark.parametrize("listened", [False, True])
def test_a_memory_error_from_a_kernel_passes_through_unchanged(g, listened):
    raised = MemoryError("no room")

    def kernel(x, out):
        raise raised

    op = gv.defop("test_out_of_memory", shape=lambda x: x, kernel=kernel, differentiable=False)
    try:
        y = op(g.placeholder("x", (3,)))
        listeners = [gv.Listener()] if listened else None
        with pytest.raises(MemoryError) as caught:
            g.output({"x": np.ones(3)}, [y], listeners=listeners)
        assert caught.value is raised and not isinstance(caught.value, gv.GraphviewError)
    finally:
        registry._REGISTRY.pop("test_out_of_memory", None)
        registry._CALLABLES.pop("test_out_of_memory", None)
