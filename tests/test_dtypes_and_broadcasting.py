"""Promotion rules, weak scalars, dtype errors, and broadcasting as a property against NumPy."""
import numpy as np
import pytest
from hypothesis import given, strategies as st
from hypothesis.extra import numpy as hnp

import graphview as gv
from graphview import registry
from graphview.shapes import broadcast_shapes

DTYPES = ["float32", "float64", "int32", "int64", "bool"]


@pytest.mark.parametrize("left", DTYPES)
@pytest.mark.parametrize("right", DTYPES)
def test_binary_promotion_follows_numpy(left, right):
    g = gv.Graph()
    x, y = g.placeholder("x", (2,), left), g.placeholder("y", (2,), right)
    if left == right == "bool":
        with pytest.raises(gv.DTypeError, match="add: input 0 .* bool"):
            x + y
        return
    assert (x + y).dtype == np.result_type(left, right)
    assert (x / y).dtype == np.result_type(np.true_divide(np.ones(1, left), np.ones(1, right)))


@pytest.mark.parametrize("dtype, scalar, expected", [
    ("float32", 1.5, "float32"), ("float32", 2, "float32"), ("int32", 2, "int32"), ("int32", 2.5, "float64"),
    ("int64", True, "int64"), ("float64", 3, "float64")])
def test_python_scalars_are_weak(dtype, scalar, expected):
    g = gv.Graph()
    x = g.placeholder("x", (2,), dtype)
    assert (x + scalar).dtype == np.dtype(expected)
    assert (scalar * x).dtype == np.dtype(expected)


def test_implicit_casts_are_visible_nodes():
    g = gv.Graph()
    x, y = g.placeholder("x", (2,), "float32"), g.placeholder("y", (2,), "float64")
    z = x + y
    assert g.node(z.node.inputs[0]).op == "cast"
    assert z.eval({"x": np.ones(2, np.float32), "y": np.ones(2)}).dtype == np.float64


@pytest.mark.parametrize("op", ["exp", "log", "sqrt", "sin", "tanh"])
def test_floating_ops_on_integers_compute_in_float64(op):
    g = gv.Graph()
    x = g.placeholder("x", (3,), "int32")
    y = getattr(g.math, op)(x)
    assert y.dtype == np.float64
    np.testing.assert_allclose(y.eval({"x": np.array([1, 2, 3], np.int32)}),
                               getattr(np, op)(np.array([1, 2, 3], np.float64)), rtol=1e-14)


def test_unsupported_combinations_raise_dtype_errors_naming_the_op():
    g = gv.Graph()
    b = g.placeholder("b", (2,), "bool")
    i = g.placeholder("i", (2,), "int64")
    f = g.placeholder("f", (2, 3))
    with pytest.raises(gv.DTypeError, match="exp: input 0 \\('b'\\) has dtype bool"):
        g.math.exp(b)
    with pytest.raises(gv.DTypeError, match="softmax_cross_entropy.*labels.*float64"):
        g.loss.softmax_cross_entropy(f, g.placeholder("labels", (2,), "float64"))
    with pytest.raises(gv.DTypeError, match="dropout.*int64"):
        g.nn.dropout(i, 0.5, seed=1)
    with pytest.raises(gv.DTypeError, match="condition has dtype int64"):
        g.math.where(g.placeholder("k", (2, 3), "int64"), f, f)


@pytest.mark.parametrize("label, dtype", [(2, "int64"), (np.int32(2), "int32"), (np.int64(2), "int64"),
                                          (np.array(2), "int64")])
def test_integer_scalars_for_inputs_that_are_not_promoted_keep_their_own_dtype(label, dtype):
    """nll's labels (not in its promote_inputs) are not weak: the scalar does not take log_probs' float dtype."""
    g = gv.Graph()
    log_probs = g.placeholder("lp", (5,), "float32")
    loss = g.loss.nll(log_probs, label)
    assert g.node(loss.node.inputs[1]).dtype == np.dtype(dtype)
    assert loss.dtype == np.float32
    values = np.log(np.arange(1.0, 6.0) / 15).astype(np.float32)
    assert loss.eval({"lp": values}) == -values[2]


def test_an_op_declaring_no_promotion_keeps_weak_scalars_as_before():
    """A user's op (no promote=) gets its scalars in its variables' dtype, as it always did."""
    g = gv.Graph()
    x = g.placeholder("x", (2,), "float32")
    op = gv.defop("test_weak_pair", shape=lambda a, b: a, kernel=lambda a, b, out: None, differentiable=False)
    try:
        y = op(x, 2)
        assert g.node(y.node.inputs[1]).dtype == np.float32
    finally:
        registry._REGISTRY.pop("test_weak_pair", None)
        registry._CALLABLES.pop("test_weak_pair", None)


def test_scalars_for_promoted_inputs_stay_weak_next_to_integer_inputs():
    g = gv.Graph()
    x = g.placeholder("x", (2,), "float32")
    picked = g.math.where(g.placeholder("c", (2,), "bool"), x, 2)
    assert picked.dtype == np.float32 and g.node(picked.node.inputs[2]).dtype == np.float32


def test_a_float_scalar_where_integers_are_needed_names_the_category_with_its_article():
    g = gv.Graph()
    with pytest.raises(gv.DTypeError, match="nll: input labels has dtype float64, but nll needs an integer dtype "
                                            "\\(int32, int64\\)"):
        g.loss.nll(g.placeholder("lp", (5,)), 2.0)
    with pytest.raises(gv.DTypeError, match="exp: input 0 \\('b'\\) has dtype bool, but exp needs a numeric dtype"):
        g.math.exp(g.placeholder("b", (2,), "bool"))


def test_float32_sums_are_at_least_as_accurate_as_numpy():
    values = np.random.default_rng(0).uniform(0, 1, 10_000_000).astype(np.float32)
    exact = np.sum(values, dtype=np.float64)
    g = gv.Graph()
    x = g.placeholder("x", values.shape, "float32")
    ours = g.math.sum(x).eval({"x": values})
    assert ours.dtype == np.float32
    assert abs(float(ours) - exact) <= abs(float(np.sum(values)) - exact)


shapes = hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=4)


@given(hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=5, max_side=4))
def test_broadcast_shapes_match_numpy(case):
    assert broadcast_shapes(*case.input_shapes) == np.broadcast_shapes(*case.input_shapes)


@given(st.tuples(shapes, shapes))
def test_broadcast_errors_match_numpy(pair):
    try:
        expected = np.broadcast_shapes(*pair)
    except ValueError:
        with pytest.raises(gv.ShapeError, match="do not broadcast"):
            broadcast_shapes(*pair)
    else:
        assert broadcast_shapes(*pair) == expected


@given(hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4, max_side=3),
       st.sampled_from(["add", "sub", "mul", "maximum"]), st.booleans())
def test_binary_ops_broadcast_like_numpy_on_strided_inputs(case, op, flip):
    r = np.random.default_rng(1)
    arrays = []
    for shape in case.input_shapes:
        big = r.normal(size=tuple(2 * d for d in shape))
        view = big[tuple(slice(None, None, -2) if flip else slice(None, None, 2) for _ in shape)]
        arrays.append(view)
    g = gv.Graph()
    a = g.placeholder("a", arrays[0].shape)
    b = g.placeholder("b", arrays[1].shape)
    result = getattr(g.math, op)(a, b).eval({"a": arrays[0], "b": arrays[1]})
    expected = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "maximum": np.maximum}[op](*arrays)
    np.testing.assert_array_equal(result, expected)


LEFT_OPERATORS = {
    "add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul": lambda x, y: x * y,
    "truediv": lambda x, y: x / y, "pow": lambda x, y: x ** y, "matmul": lambda x, y: x @ y,
    "eq": lambda x, y: x == y, "ne": lambda x, y: x != y, "lt": lambda x, y: x < y,
    "le": lambda x, y: x <= y, "gt": lambda x, y: x > y, "ge": lambda x, y: x >= y,
}


@pytest.mark.parametrize("left", [np.linspace(0.5, 2.0, 3), np.full((2, 3), 1.25), np.float64(1.5),
                                  np.float32(2.0), np.int64(2)],
                         ids=["array row", "array 2-D", "float64 scalar", "float32 scalar", "int64 scalar"])
@pytest.mark.parametrize("operator", sorted(LEFT_OPERATORS))
def test_numpy_values_on_the_left_of_an_operator_use_the_reflected_op(left, operator):
    function = LEFT_OPERATORS[operator]
    g = gv.Graph()
    a_value = np.array([[0.5, 1.0, 1.5], [2.0, 1.25, 3.0]])
    a = g.placeholder("a", (2, 3))
    if operator == "matmul":
        if np.ndim(left) == 0:
            return
        left = np.ones((4, 2)) if np.ndim(left) == 2 else np.ones(2)
    result = function(left, a)
    assert isinstance(result, gv.Variable)
    np.testing.assert_allclose(result.eval({"a": a_value}), function(left, a_value))


def test_a_numpy_ufunc_called_on_a_variable_is_refused():
    a = gv.Graph().placeholder("a", (3,))
    with pytest.raises(TypeError):
        np.add(np.ones(3), a)


def test_a_scalar_gather_index_stays_an_integer():
    g = gv.Graph()
    x = g.placeholder("x", (4, 3), "float32")
    picked = g.shape.gather(x, 1)
    assert g.node(picked.node.inputs[1]).dtype == np.int64
    np.testing.assert_array_equal(picked.eval({"x": np.arange(12.0, dtype=np.float32).reshape(4, 3)}), [3, 4, 5])
