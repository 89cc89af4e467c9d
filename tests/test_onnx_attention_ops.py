"""gv.onnx.load of the op types and size arithmetic attention exports need (graphview/onnx/load_sizes.py), each
against onnxruntime on an onnx.helper model: Mod, Trilu, Mul and Div of run-time sizes, a Reshape to several
run-time sizes (and a -1 beside them), Where of constants, a bool ConstantOfShape of run-time sizes; and the
errors: what cannot be laid out is refused by node, a wrong element count fails at run time as in onnxruntime.
"""
import functools

import numpy as np
import pytest

import graphview as gv
from graphview.onnx.load import load

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper as oh, numpy_helper  # noqa: E402
import onnx_helpers  # noqa: E402  (tests/ is on the path)
from onnx_helpers import helper_model  # noqa: E402

F32, I64 = np.float32, np.int64
check = functools.partial(onnx_helpers.check, rtol=1e-6)
R = np.random.default_rng(19)


def node(op, ins, outs, **attrs):
    return oh.make_node(op, ins, outs, **attrs)


# --- Mod -------------------------------------------------------------------------------------------------------

A = np.array([[7, -7, 5, -5, 0, 9]], I64)
M = np.array([[3, 3, -3, -3, 4, 9]], I64)


@pytest.mark.parametrize("fmod", [0, 1])
def test_mod_of_integer_tensors_matches_onnxruntime(fmod):
    proto = helper_model([node("Mod", ["a", "m"], ["y"], fmod=fmod)], {"a": (I64, ["n", 6])}, ["y"], [("m", M)])
    check(proto, {"a": np.concatenate([A, A * 3 + 1])})


@pytest.mark.parametrize("fmod", [0, 1])
def test_mod_of_constants_is_folded_as_onnxruntime_computes_it(fmod):
    nodes = [node("Mod", ["c", "m"], ["r"], fmod=fmod), node("Cast", ["r"], ["rf"], to=TensorProto.FLOAT),
             node("Add", ["x", "rf"], ["y"])]
    proto = helper_model(nodes, {"x": (F32, ["n", 6])}, ["y"], [("c", A), ("m", M)])
    check(proto, {"x": R.normal(size=(2, 6)).astype(F32)})
    floats = [node("Constant", [], ["cf"], value=numpy_helper.from_array((A * 1.5).astype(F32))),
              node("Constant", [], ["mf"], value=numpy_helper.from_array(M.astype(F32))),
              node("Mod", ["cf", "mf"], ["r"], fmod=1), node("Add", ["x", "r"], ["y"])]
    proto = helper_model(floats, {"x": (F32, ["n", 6])}, ["y"])
    check(proto, {"x": R.normal(size=(2, 6)).astype(F32)})


def test_mod_of_float_tensors_computed_at_run_time_is_refused():
    proto = helper_model([node("Mod", ["x", "m"], ["y"], fmod=1)], {"x": (F32, ["n", 6])}, ["y"],
                         [("m", M.astype(F32))])
    with pytest.raises(gv.GraphFileError, match=r"node #0 \(Mod\): Mod of float32 tensors computed at run time"):
        load(proto)


# --- Trilu -----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("upper", [0, 1])
@pytest.mark.parametrize("k", [-1, 0, 1, 3])
@pytest.mark.parametrize("dims", [["b", 4, 5], ["b", "r", "c"]], ids=["known", "run-time"])
def test_trilu_matches_onnxruntime(upper, k, dims):
    proto = helper_model([node("Trilu", ["x", "k"], ["y"], upper=upper)], {"x": (F32, dims)}, ["y"],
                         [("k", np.array(k, I64))])
    for shape in [(2, 4, 5), (1, 4, 5)] if dims[1] == 4 else [(2, 4, 5), (3, 6, 2), (1, 3, 3)]:
        check(proto, {"x": R.normal(size=shape).astype(F32)})


def test_trilu_keeps_minus_infinity_out_of_the_triangle_as_zeros():
    """A causal float mask: -inf above the diagonal (a product with a 0/1 mask would give NaN below it)."""
    nodes = [node("Shape", ["x"], ["s"]), node("Gather", ["s", "one"], ["t"]), node("Unsqueeze", ["t", "zero"], ["t1"]),
             node("Concat", ["t1", "t1"], ["tt"], axis=0),
             node("ConstantOfShape", ["tt"], ["full"], value=numpy_helper.from_array(np.array([-np.inf], F32))),
             node("Trilu", ["full", "one"], ["mask"], upper=1), node("Add", ["x", "mask"], ["y"])]
    proto = helper_model(nodes, {"x": (F32, ["b", "t", "t"])}, ["y"], [("one", np.array(1, I64)),
                                                                      ("zero", np.array([0], I64))])
    for t in (3, 6):
        check(proto, {"x": R.normal(size=(2, t, t)).astype(F32)})
    y = load(proto).output({"x": np.zeros((1, 3, 3), F32)}, ["y"])["y"][0]
    assert not np.isnan(y).any() and np.isneginf(y[0, 1]) and y[1, 0] == 0


def test_trilu_of_a_constant_is_folded_and_bad_inputs_are_refused():
    nodes = [node("Trilu", ["c"], ["tri"], upper=0), node("Cast", ["tri"], ["trf"], to=TensorProto.FLOAT),
             node("Add", ["x", "trf"], ["y"])]
    check(helper_model(nodes, {"x": (F32, ["n", 3, 3])}, ["y"], [("c", np.arange(9, dtype=I64).reshape(3, 3) + 1)]),
          {"x": R.normal(size=(2, 3, 3)).astype(F32)})
    computed = [node("Shape", ["x"], ["s"]), node("Gather", ["s", "zero"], ["k"]), node("Trilu", ["x", "k"], ["y"])]
    with pytest.raises(gv.GraphFileError, match=r"\(Trilu\): k must be a constant"):
        load(helper_model(computed, {"x": (F32, ["n", 3])}, ["y"], [("zero", np.array(0, I64))]))


# --- run-time sizes: Mul, Div, Reshape --------------------------------------------------------------------------

def sizes_of(source, axes, prefix):
    """Nodes giving ``prefix``_<axis>: the size of each of ``source``'s ``axes`` as a 1-D tensor of one entry."""
    nodes = [node("Shape", [source], [f"{prefix}_shape"])]
    for axis in axes:
        nodes += [node("Gather", [f"{prefix}_shape", f"i{axis}"], [f"{prefix}_{axis}"], axis=0)]
    return nodes


INDICES = [(f"i{a}", np.array(a, I64)) for a in range(4)] + [("zero", np.array([0], I64))]


def one(name, out):
    return node("Unsqueeze", [name, "zero"], [out])


def test_attention_head_split_and_merge_through_run_time_sizes_matches_onnxruntime():
    """PyTorch's MultiheadAttention: x (B, T, 8) as xt (T, B, 8) reshaped to (T, B * heads, 4) with the sizes
    taken from x (not xt), then (B, heads, T, 4), back to (T * B, 8) and to (T, B, 8) (a split of a product)."""
    heads = np.array(2, I64)
    nodes = sizes_of("x", [0, 1], "s") + [
        node("Transpose", ["x"], ["xt"], perm=[1, 0, 2]),
        node("Mul", ["s_0", "heads"], ["bh"]), one("s_1", "t1"), one("bh", "bh1"), one("s_0", "b1"),
        node("Concat", ["t1", "bh1", "four"], ["shape1"], axis=0), node("Reshape", ["xt", "shape1"], ["split"]),
        node("Transpose", ["split"], ["st"], perm=[1, 0, 2]),
        node("Concat", ["b1", "heads1", "t1", "four"], ["shape2"], axis=0), node("Reshape", ["st", "shape2"], ["bhtd"]),
        node("Transpose", ["bhtd"], ["tbhd"], perm=[2, 0, 1, 3]), node("Mul", ["s_1", "s_0"], ["tb"]), one("tb", "tb1"),
        node("Concat", ["tb1", "eight"], ["shape3"], axis=0), node("Reshape", ["tbhd", "shape3"], ["merged"]),
        node("Div", ["bh", "heads"], ["b_again"]), one("b_again", "b2"),
        node("Concat", ["t1", "b2", "eight"], ["shape4"], axis=0), node("Reshape", ["merged", "shape4"], ["y"])]
    inits = INDICES + [("heads", heads), ("heads1", heads.reshape(1)), ("four", np.array([4], I64)),
                       ("eight", np.array([8], I64))]
    proto = helper_model(nodes, {"x": (F32, ["b", "t", 8])}, ["y", "bhtd"], inits)
    for shape in [(2, 3, 8), (5, 1, 8), (1, 7, 8)]:
        check(proto, {"x": R.normal(size=shape).astype(F32)})


def test_a_minus_one_beside_run_time_sizes_is_told_from_the_input():
    """A key padding mask (B * heads, 1, T) as (B, heads, -1, T), B and T taken from x: the -1 is the mask's 1."""
    nodes = sizes_of("x", [0, 1], "s") + [
        one("s_0", "b1"), one("s_1", "t1"),
        node("Concat", ["b1", "heads1", "minus", "t1"], ["shape"], axis=0), node("Reshape", ["m", "shape"], ["y"])]
    inits = INDICES + [("heads1", np.array([4], I64)), ("minus", np.array([-1], I64))]
    proto = helper_model(nodes, {"m": (F32, ["bh", 1, "t"]), "x": (F32, ["b", "t"])}, ["y"], inits)
    for b, t in [(2, 5), (1, 2)]:
        check(proto, {"m": R.normal(size=(4 * b, 1, t)).astype(F32), "x": np.zeros((b, t), F32)})


def test_a_wrong_element_count_fails_at_run_time_as_in_onnxruntime():
    """A size the exporter wrote as a constant (5) beside run-time ones: right at 5, an error elsewhere."""
    nodes = sizes_of("x", [0], "s") + [
        node("Mul", ["s_0", "heads"], ["bh"]), one("bh", "bh1"),
        node("Concat", ["five", "bh1", "four"], ["shape"], axis=0), node("Transpose", ["x"], ["xt"], perm=[1, 0, 2]),
        node("Reshape", ["xt", "shape"], ["y"])]
    inits = INDICES + [("heads", np.array(2, I64)), ("five", np.array([5], I64)), ("four", np.array([4], I64))]
    proto = helper_model(nodes, {"x": (F32, ["b", "t", 8])}, ["y"], inits)
    check(proto, {"x": R.normal(size=(3, 5, 8)).astype(F32)})
    feeds = {"x": R.normal(size=(3, 6, 8)).astype(F32)}
    with pytest.raises(Exception, match="Reshape"):
        ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"]).run(["y"], feeds)
    with pytest.raises(gv.GraphviewError, match=r"y_element_count_check.*do not broadcast"):
        load(proto).output(feeds, ["y"])


def test_reshape_of_several_run_time_sizes_checks_the_element_count_at_run_time():
    """(T, B, 4) reshaped to (B, T, 4) with B and T from another tensor: its counts equal, and a feed where the
    two tensors' sizes differ is an error (onnxruntime's too), never elements silently dropped."""
    nodes = sizes_of("other", [0, 1], "s") + [one("s_0", "b1"), one("s_1", "t1"),
                                               node("Concat", ["b1", "t1", "four"], ["shape"], axis=0),
                                               node("Reshape", ["x", "shape"], ["y"])]
    proto = helper_model(nodes, {"x": (F32, ["t", "b", 4]), "other": (F32, ["b2", "t2"])}, ["y"],
                         INDICES + [("four", np.array([4], I64))])
    check(proto, {"x": R.normal(size=(3, 2, 4)).astype(F32), "other": np.zeros((2, 3), F32)})
    check(proto, {"x": R.normal(size=(3, 2, 4)).astype(F32), "other": np.zeros((3, 2), F32)})
    bad = {"x": R.normal(size=(3, 2, 4)).astype(F32), "other": np.zeros((2, 2), F32)}
    with pytest.raises(gv.GraphviewError, match=r"y_element_count_check.*do not broadcast"):
        load(proto).output(bad, ["y"])


@pytest.mark.parametrize("op, match", [
    ("Add", r"node #3 \(Add\): Add of sizes known only at run time \(from Shape\) is not supported"),
    ("Sub", r"node #3 \(Sub\): Sub of sizes known only at run time"),
    ("Div", r"node #3 \(Div\): Div of a size known only at run time is supported only where the divisor"),
    ("Mod", r"node #3 \(Mod\): Mod of sizes known only at run time"),
])
def test_other_arithmetic_on_run_time_sizes_is_refused_by_node(op, match):
    nodes = sizes_of("x", [0, 1], "s") + [node(op, ["s_0", "s_1"], ["n"]), one("n", "n1"),
                                          node("Concat", ["n1", "minus"], ["shape"], axis=0),
                                          node("Reshape", ["x", "shape"], ["y"])]
    proto = helper_model(nodes, {"x": (F32, ["b", "t"])}, ["y"], INDICES + [("minus", np.array([-1], I64))])
    with pytest.raises(gv.GraphFileError, match=match):
        load(proto)


def test_where_of_constants_is_folded_for_an_expand_shape_and_bool_masks_of_run_time_sizes_build():
    """PyTorch's Expand shape (Where(Equal(shape, -1), 1, shape)) and a bool ConstantOfShape of (T, T)."""
    nodes = sizes_of("x", [1], "s") + [
        node("Equal", ["wanted", "minus4"], ["unset"]), node("Where", ["unset", "ones", "wanted"], ["shape"]),
        node("Expand", ["x", "shape"], ["e"]), one("s_1", "t1"), node("Concat", ["t1", "t1"], ["tt"], axis=0),
        node("ConstantOfShape", ["tt"], ["full"], value=numpy_helper.from_array(np.array([True]))),
        node("Trilu", ["full", "one"], ["future"], upper=1), node("Where", ["future", "minf", "e"], ["y"])]
    inits = INDICES + [("wanted", np.array([-1, 3, -1, -1], I64)), ("minus4", -np.ones(4, I64)),
                       ("ones", np.ones(4, I64)), ("one", np.array(1, I64)), ("minf", np.array(-1e9, F32))]
    proto = helper_model(nodes, {"x": (F32, ["b", 1, "t", "t"])}, ["y"], inits)
    for shape in [(2, 1, 4, 4), (1, 1, 2, 2)]:
        check(proto, {"x": R.normal(size=shape).astype(F32)})


def test_a_reshape_of_a_run_time_size_to_one_entry_is_a_size_again():
    """The dynamo exporter's Reshape(B * heads, [-1]) before a Concat of the target shape."""
    nodes = [node("Shape", ["x"], ["b"], start=0, end=1), node("Squeeze", ["b"], ["b0"]),
             node("Shape", ["x"], ["t"], start=1, end=2), node("Mul", ["b0", "heads"], ["bh"]),
             node("Reshape", ["bh", "minus"], ["bh1"]), node("Transpose", ["x"], ["xt"], perm=[1, 0, 2]),
             node("Concat", ["t", "bh1", "four"], ["shape"], axis=0), node("Reshape", ["xt", "shape"], ["y"])]
    inits = [("heads", np.array(2, I64)), ("minus", np.array([-1], I64)), ("four", np.array([4], I64))]
    proto = helper_model(nodes, {"x": (F32, ["b", "t", 8])}, ["y"], inits)
    for shape in [(2, 3, 8), (1, 5, 8)]:
        check(proto, {"x": R.normal(size=shape).astype(F32)})
    whole = [node("Shape", ["x"], ["s"]), node("Reshape", ["s", "two"], ["y"])]
    with pytest.raises(gv.GraphFileError, match=r"node #1 \(Reshape\): a Reshape of a shape with unknown sizes"):
        load(helper_model(whole, {"x": (F32, ["b", "t", 8])}, ["y"], [("two", np.array([3, 1], I64))]))


def test_a_bool_mask_reshaped_to_several_run_time_sizes_matches_onnxruntime():
    nodes = sizes_of("other", [0, 1], "s") + [one("s_0", "b1"), one("s_1", "t1"),
                                               node("Concat", ["b1", "t1"], ["shape"], axis=0),
                                               node("Reshape", ["m", "shape"], ["y"])]
    proto = helper_model(nodes, {"m": (np.bool_, ["t", "b"]), "other": (F32, ["b2", "t2"])}, ["y"], INDICES)
    check(proto, {"m": R.random((3, 2)) > 0.5, "other": np.zeros((2, 3), F32)})


@pytest.mark.parametrize("target, dims", [([0, -1, 4], ["b", "t", 16]), ([0, 0, 2, -1], ["b", "t", 16]),
                                          ([-1, 0, 8], ["b", "t", 16]), ([0, 4, -1], ["b", "t", 16])])
def test_constant_shapes_copying_two_unknown_sizes_with_0_match_onnxruntime(target, dims):
    """x.view(0, -1, heads) of (B, T, C): the 0 copies an unknown size and the -1 is another (T * C / heads)."""
    proto = helper_model([node("Reshape", ["x", "shape"], ["y"])], {"x": (F32, dims)}, ["y"],
                         [("shape", np.array(target, I64))])
    for shape in [(2, 3, 16), (1, 5, 16), (4, 1, 16)]:
        check(proto, {"x": R.normal(size=shape).astype(F32)})


def test_one_run_time_size_from_another_tensor_is_checked_not_taken_as_minus_one():
    """Reshape(x, [z.shape[0] * 4, 4]): the size comes from z, so it is checked against x's element count (an
    error where onnxruntime gives one), not read as reshape's -1 (which would silently give x's rows)."""
    nodes = sizes_of("z", [0], "s") + [node("Mul", ["s_0", "four"], ["rows"]), one("rows", "rows1"),
                                        node("Concat", ["rows1", "four1"], ["shape"], axis=0),
                                        node("Reshape", ["x", "shape"], ["y"])]
    inits = INDICES + [("four", np.array(4, I64)), ("four1", np.array([4], I64))]
    proto = helper_model(nodes, {"x": (F32, ["n", 4, 4]), "z": (F32, ["m", 3])}, ["y"], inits)
    check(proto, {"x": R.normal(size=(3, 4, 4)).astype(F32), "z": np.ones((3, 3), F32)})
    feeds = {"x": R.normal(size=(3, 4, 4)).astype(F32), "z": np.ones((2, 3), F32)}
    unoptimized = ort.SessionOptions()      # onnxruntime's optimizer takes this size as a -1 too
    unoptimized.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    with pytest.raises(Exception, match="Reshape"):
        ort.InferenceSession(proto.SerializeToString(), unoptimized, providers=["CPUExecutionProvider"]).run(
            ["y"], feeds)
    with pytest.raises(gv.GraphviewError, match=r"y_element_count_check.*do not broadcast"):
        load(proto).output(feeds, ["y"])
