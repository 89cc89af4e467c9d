"""Kernel-level checks: the vectorized exp, strided outputs, operands the flat path repeats, box zeroing."""
import numba
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

from graphview_kernels import activations, caching, elementwise, indexing, inplace, recurrent, vector_math
from graphview_kernels import reduce as reduce_kernels
from graphview_kernels.launch import STAGED_BELOW, Swapped


def ulps(result, reference):
    finite = np.isfinite(reference) & (reference != 0)
    return np.max(np.abs(result[finite] - reference[finite]) / np.spacing(reference[finite]), initial=0.0)


@pytest.mark.parametrize("low, high", [(-1, 1), (-30, 30), (-745.2, -700), (700, 709.78), (-700, 700)])
def test_exp_is_within_one_ulp_of_numpy(low, high):
    x = np.random.default_rng(0).uniform(low, high, 200_000)
    out = np.empty_like(x)
    elementwise.exp(x, out)
    assert ulps(out, np.exp(x)) <= 1.0


def test_exp_special_values_match_numpy():
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 709.782712893384, np.nextafter(709.782712893384, np.inf),
                  -745.1332191019412, -745.14, 1e-300, -1e-300, -708.5, -740.0])
    out = np.empty_like(x)
    elementwise.exp(x, out)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(out, np.exp(x))


def test_exp_in_float32_is_at_least_as_close_as_numpy():
    x = np.random.default_rng(1).uniform(-80, 80, 100_000).astype(np.float32)
    out = np.empty_like(x)
    elementwise.exp(x, out)
    exact = np.exp(x.astype(np.float64))
    assert np.max(np.abs(out - exact) / exact) <= np.max(np.abs(np.exp(x) - exact) / exact)


def test_a_strided_output_receives_each_value_at_its_own_place():
    # Numba's vectorize ufuncs fill a non-contiguous out as if it were contiguous.
    source = np.arange(6.0).reshape(2, 3)
    out = np.zeros((2, 3, 2))
    elementwise.copy(source, out[..., 1])
    np.testing.assert_array_equal(out[..., 1], source)
    np.testing.assert_array_equal(out[..., 0], 0.0)


@given(hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=5), st.integers(0, 3), st.booleans())
def test_trailing_axes_and_single_elements_repeat_like_numpy(shape, keep, left):
    r = np.random.default_rng(2)
    big = r.normal(size=shape)
    small = r.normal(size=shape[len(shape) - min(keep, len(shape)):])
    out = np.empty(shape)
    operands = (small, big) if left else (big, small)
    elementwise.sub(*operands, out)
    np.testing.assert_allclose(out, np.subtract(*operands), rtol=0, atol=0)
    elementwise.where(big > 0, *operands, out)
    np.testing.assert_array_equal(out, np.where(big > 0, *operands))


def test_large_outputs_split_on_rows_of_a_repeating_operand():
    big = np.random.default_rng(3).normal(size=(3001, 1000))
    row = np.arange(1000.0)
    out = np.empty_like(big)
    elementwise.add(big, row, out)
    np.testing.assert_array_equal(out, big + row)
    elementwise.exp(row[:7], out[:1, :7].reshape(7))
    np.testing.assert_allclose(out[0, :7], np.exp(row[:7]), rtol=1e-15)


def test_lt_and_le_are_gt_and_ge_with_the_operands_exchanged():
    x = np.array([1.0, np.nan, 2.0, -0.0, np.inf, 3.0, -np.inf, np.nan])
    y = np.array([2.0, 1.0, np.nan, 0.0, np.inf, 3.0, 5.0, np.nan])
    for kernel, reference in ((elementwise.lt, np.less), (elementwise.le, np.less_equal)):
        for a, b in ((x, y), (y, x), (x, y[:1]), (x[2:3], y), (x.reshape(2, 4), y[:4]), (x[:4], y.reshape(2, 4))):
            out = np.empty(np.broadcast_shapes(a.shape, b.shape), bool)
            kernel(a, b, out)
            np.testing.assert_array_equal(out, reference(a, b))
            kernel.contiguous(a, b, out, 0, out.size)   # the executor's call
            np.testing.assert_array_equal(out, reference(a, b))
    # One compiled kernel for both: the forms are gt's and ge's.
    assert elementwise.lt.flat_form is elementwise.gt.flat_form and elementwise.le.flat_form is elementwise.ge.flat_form
    assert elementwise.lt.name == "lt_scalar"   # fused groups generate code from the op's own scalar


def _no_strided_form(*args):
    raise AssertionError("a strided form was compiled or called")


def _contiguous_pow(a, b):
    """pow on C-contiguous copies of the operands at the output's shape (Numba's pow is not NumPy's to the ulp)."""
    shape = np.broadcast_shapes(a.shape, b.shape)
    out = np.empty(shape)
    elementwise.pow(*(np.ascontiguousarray(np.broadcast_to(v, shape)) for v in (a, b)), out)
    return out


@pytest.mark.parametrize("kernel, reference", [(elementwise.sub, np.subtract), (elementwise.lt, np.less),
                                               (elementwise.maximum, np.maximum), (elementwise.pow, _contiguous_pow)])
@pytest.mark.parametrize("n", [5, 200])
def test_operands_the_flat_form_cannot_read_give_numpy_values_small_ones_without_a_strided_form(
        kernel, reference, n, monkeypatch):
    # (n, n) outputs: 25 elements are staged through NumPy copies and the flat form (no strided form
    # compiled); 40,000 (above launch.STAGED_BELOW) go through the strided form.
    r = np.random.default_rng(4)
    column = r.uniform(0.5, 2.0, size=(n, 1))
    transposed = r.uniform(0.5, 2.0, size=(n, n)).T
    if n * n < STAGED_BELOW:
        target = kernel.kernel if isinstance(kernel, Swapped) else kernel
        monkeypatch.setattr(target, "strided_form", _no_strided_form)
    dtype = bool if kernel is elementwise.lt else np.float64
    for a, b in ((column, transposed), (transposed, column), (transposed, transposed.T)):
        out = np.empty((n, n), dtype)
        kernel(a, b, out)
        np.testing.assert_array_equal(out, reference(a, b))
        strided_out = np.zeros((n, 2 * n), dtype)[:, ::2]
        kernel(a, b, strided_out)
        np.testing.assert_array_equal(strided_out, reference(a, b))


def test_unary_ops_and_activations_on_views_give_the_contiguous_values():
    x = np.random.default_rng(5).normal(size=(300, 200)).T   # 60,000 elements: staged at any size
    for kernel, dtype in ((elementwise.exp, np.float64), (elementwise.tanh, np.float64),
                          (elementwise.CASTS[np.dtype(np.float32)], np.float32)):
        out, expected = np.empty((200, 300), dtype), np.empty((200, 300), dtype)
        kernel(np.ascontiguousarray(x), expected)
        kernel(x, out)
        np.testing.assert_array_equal(out, expected)
    out, expected = np.empty((300, 200)).T, np.empty((200, 300))
    activations.elu(np.ascontiguousarray(x), expected, (0.5,))
    activations.elu(x, out, (0.5,))
    np.testing.assert_array_equal(out, expected)
    small = np.empty((4, 3))
    activations.elu(x[:4, :1], small, (0.5,))   # a broadcast input, staged below STAGED_BELOW
    np.testing.assert_array_equal(small, np.broadcast_to(expected[:4, :1], (4, 3)))


def test_copies_and_casts_write_their_flat_kernels_values_in_any_layout_and_broadcast():
    r = np.random.default_rng(6)
    values = r.uniform(-3e3, 3e3, size=(3, 4))
    for source in (np.float64, np.float32, np.int32, np.int64, np.bool_):
        x = values.astype(source)
        for target, kernel in elementwise.CASTS.items():
            expected = np.empty((3, 4), target)
            kernel.flat_form((x.dtype, expected.dtype))(x.reshape(-1), expected.reshape(-1), 0, 12)
            np.testing.assert_array_equal(expected, x.astype(target))
            for out, operand in ((np.empty((3, 4), target), x), (np.empty((4, 3), target).T, np.asfortranarray(x)),
                                 (np.empty((3, 4), target), x[:1])):
                kernel(operand, out)
                np.testing.assert_array_equal(out, np.broadcast_to(expected[:len(operand)], (3, 4)))


def test_a_unary_kernel_given_a_smaller_input_repeats_it_like_numpy():
    # Unary flat forms have one loop (the input has the output's size); the launcher and the executor's
    # contiguous call repeat one element or a row first. Copies and casts repeat them in their kernel.
    row = np.array([0.5, -1.0, 2.0])
    for kernel, reference in ((elementwise.abs, np.abs), (elementwise.neg, np.negative),
                              (elementwise.copy, np.asarray), (elementwise.CASTS[np.dtype(np.int64)], np.trunc)):
        dtype = np.int64 if kernel is elementwise.CASTS[np.dtype(np.int64)] else np.float64
        for value in (row, row[1:2], row.reshape(1, 3)):
            out = np.empty((4, 3), dtype)
            kernel(value, out)
            np.testing.assert_array_equal(out, np.broadcast_to(reference(value), (4, 3)))
            out = np.empty((4, 3), dtype)
            kernel.contiguous(value, out, 0, out.size)
            np.testing.assert_array_equal(out, np.broadcast_to(reference(value), (4, 3)))
    assert not elementwise.abs.broadcasts and elementwise.copy.broadcasts


@pytest.mark.parametrize("size", [10, 3_000_000])
def test_in_place_add_writes_only_its_view(size):
    base = np.zeros(size + 4)
    view = base[2:-2]
    inplace.add_(view, np.array(1.5))
    assert base[:2].tolist() == [0.0, 0.0] and base[-2:].tolist() == [0.0, 0.0]
    assert np.all(view == 1.5)


def test_scipy_is_an_install_dependency_because_numba_blas_comes_from_it():
    import configparser
    import pathlib
    config = configparser.ConfigParser()
    config.read(pathlib.Path(__file__).resolve().parent.parent / "setup.cfg")
    required = [line.split(">")[0].split("=")[0].strip() for line in
                config["options"]["install_requires"].split("\n") if line.strip()]
    source = (pathlib.Path(__file__).resolve().parent.parent / "kernels" / "linalg.py").read_text()
    assert "np.dot" in source and "scipy" in required   # Numba's np.dot needs scipy.linalg.cython_blas


# --- reduce3: the plain reductions' kernel, and the masked ones' (a mask of valid rows or entries) ---

REDUCE_MODES = {"sum": reduce_kernels.SUM, "mean": reduce_kernels.MEAN, "max": reduce_kernels.MAX,
                "min": reduce_kernels.MIN, "logsumexp": reduce_kernels.LOGSUMEXP, "count": reduce_kernels.COUNT}
EMPTY = {"sum": 0.0, "mean": np.nan, "max": -np.inf, "min": np.inf, "logsumexp": -np.inf, "count": 0.0}


def _masked_reference(name, x, valid, axes):
    """NumPy over the entries where ``valid``; the padding is NaN and never read."""
    with np.errstate(invalid="ignore", divide="ignore"):
        count = np.sum(valid, axis=axes)
        if name in ("sum", "mean", "count"):
            total = np.sum(np.where(valid, x, 0.0), axis=axes)
            return {"sum": total, "mean": total / count, "count": count.astype(np.float64)}[name]
        if name == "logsumexp":
            top = np.max(np.where(valid, x, -np.inf), axis=axes, keepdims=True)
            total = np.sum(np.where(valid, np.exp(np.where(valid, x, 0.0) - top), 0.0), axis=axes)
            return np.log(total) + np.squeeze(top, axis=axes)
        extreme = np.max if name == "max" else np.min
        return extreme(np.where(valid, x, EMPTY[name]), axis=axes)


def _start(name):
    return np.float64(np.inf if name == "min" else -np.inf)


@pytest.mark.parametrize("name", list(REDUCE_MODES))
@pytest.mark.parametrize("inner", [1, 3])
def test_reduce3_with_rows_of_reduces_each_outer_rows_first_rows_only(name, inner):
    r = np.random.default_rng(30)
    rows_of = np.array([0, 2, 5, 4], np.int64)
    x = r.normal(size=(4, 5, inner))
    valid = np.arange(5)[None, :, None] < rows_of[:, None, None]
    x[~np.broadcast_to(valid, x.shape)] = np.nan   # padding must never be read
    out = np.empty((4, inner))
    reduce_kernels.reduce3(x, out, REDUCE_MODES[name], np.float64(0), np.float64(1), _start(name),
                           mask=(rows_of, reduce_kernels.NO_LENGTHS, False))
    np.testing.assert_allclose(out, _masked_reference(name, x, np.broadcast_to(valid, x.shape), 1), rtol=1e-12)


@pytest.mark.parametrize("name", list(REDUCE_MODES))
def test_reduce3_with_cols_of_and_fold_reduces_over_the_outer_axis_too(name):
    r = np.random.default_rng(31)
    cols_of = np.array([6, 0, 4], np.int64)
    x = r.normal(size=(3, 2, 6))
    valid = np.broadcast_to(np.arange(6)[None, None, :] < cols_of[:, None, None], x.shape)
    x[~valid] = np.nan
    out = np.empty((1, 6))
    reduce_kernels.reduce3(x, out, REDUCE_MODES[name], np.float64(0), np.float64(1), _start(name),
                           mask=(reduce_kernels.NO_LENGTHS, cols_of, True))
    np.testing.assert_allclose(out[0], _masked_reference(name, x, valid, (0, 1)), rtol=1e-12)


@pytest.mark.parametrize("name", list(REDUCE_MODES))
def test_reduce3_folded_over_no_outer_row_gives_each_reductions_empty_value(name):
    out = np.full((1, 2), 7.0)
    reduce_kernels.reduce3(np.zeros((0, 3, 2)), out, REDUCE_MODES[name], np.float64(0), np.float64(1), _start(name),
                           mask=(np.zeros(0, np.int64), reduce_kernels.NO_LENGTHS, True))
    np.testing.assert_array_equal(out, np.full((1, 2), EMPTY[name]))


def test_reduce3_integer_extremes_compare_without_overflow():
    x = np.array([[-(2 ** 62), 2 ** 62, 5], [2 ** 62, -(2 ** 62), -5]], np.int64).reshape(2, 3, 1)
    for mode, start, expected in ((reduce_kernels.MAX, np.iinfo(np.int64).min, [2 ** 62, 2 ** 62]),
                                  (reduce_kernels.MIN, np.iinfo(np.int64).max, [-(2 ** 62), -(2 ** 62)])):
        out = np.empty((2, 1), np.int64)
        reduce_kernels.reduce3(x, out, mode, np.float64(0), np.float64(1), np.int64(start))
        assert out[:, 0].tolist() == expected


def test_reduce3_unmasked_sum_of_a_row_is_pairwise_and_a_masked_one_sequential():
    x = np.full((1, 4096, 1), 0.1)
    out = np.empty((1, 1))
    reduce_kernels.reduce3(x, out, reduce_kernels.SUM, np.float64(0), np.float64(1), np.float64(-np.inf))
    assert out[0, 0] == reduce_kernels.pairwise_sum(x.ravel(), 0, 4096, 0.0)
    reduce_kernels.reduce3(x, out, reduce_kernels.SUM, np.float64(0), np.float64(1), np.float64(-np.inf),
                           mask=(np.array([4096]), reduce_kernels.NO_LENGTHS, False))
    sequential = 0.0
    for value in x.ravel():
        sequential += value
    assert out[0, 0] == sequential != reduce_kernels.pairwise_sum(x.ravel(), 0, 4096, 0.0)


# The activations' branch-free forms (exp, expm1 and log1p without libm, selects instead of branches).
SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 5e-324, -5e-324, 1e-300, -1e-300, 1e-8, -1e-8, 0.3466, -0.3466,
                    20.0, -20.0, 30.0, -30.0, 709.0, -709.0, 745.5, -745.5, 800.0, -800.0])
ACTIVATION_REFERENCES = {
    "sigmoid": lambda x: np.where(x >= 0, 1 / (1 + np.exp(-np.abs(x))), np.exp(-np.abs(x)) / (1 + np.exp(-np.abs(x)))),
    "tanh": np.tanh,
    "softplus": lambda x: np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x))),
    "log_sigmoid": lambda x: np.minimum(x, 0) - np.log1p(np.exp(-np.abs(x))),
    "silu": lambda x: x * np.where(x >= 0, 1 / (1 + np.exp(-np.abs(x))), np.exp(-np.abs(x)) / (1 + np.exp(-np.abs(x)))),
    "elu": lambda x: np.where(x > 0, x, np.expm1(np.where(x > 0, 0.0, x))),
    "selu": lambda x: activations.SELU_SCALE * np.where(x > 0, x, activations.SELU_ALPHA * np.expm1(
        np.where(x > 0, 0.0, x))),
}


def _activation(name, x):
    out = np.empty_like(x)
    if name in ("sigmoid", "tanh"):
        getattr(elementwise, name)(x, out)
    else:
        getattr(activations, name)(x, out, (1.0,))
    return out


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", sorted(ACTIVATION_REFERENCES))
def test_branch_free_activations_keep_nan_inf_and_signed_zeros(name, dtype):
    x = SPECIAL.astype(dtype)
    with np.errstate(all="ignore"):
        expected = ACTIVATION_REFERENCES[name](x.astype(np.float64)).astype(dtype)
    result = _activation(name, x)
    np.testing.assert_allclose(result, expected, rtol=4e-16 if dtype == np.float64 else 3e-7, atol=0)
    np.testing.assert_array_equal(np.isnan(result), np.isnan(expected))
    zeros = expected == 0
    if name != "log_sigmoid":   # -log1p(e^-x) far out is -0.0, NumPy's formula gives 0.0 - 0.0
        np.testing.assert_array_equal(np.signbit(result[zeros]), np.signbit(expected[zeros]))


@pytest.mark.parametrize("name", sorted(ACTIVATION_REFERENCES))
@pytest.mark.parametrize("scale", [1e-6, 1.0, 10.0, 300.0])
def test_branch_free_activations_are_within_a_few_ulps_in_float64_and_float32(name, scale):
    x = np.random.default_rng(4).normal(scale=scale, size=100_000)
    with np.errstate(all="ignore"):
        expected = ACTIVATION_REFERENCES[name](x)
    assert ulps(_activation(name, x), expected) <= 4.0
    # sigmoid and tanh compute float32 in float64 and round once (the reference may differ by an ulp);
    # the activations of kernels/activations.py compute it in float32.
    single = x.astype(np.float32)
    with np.errstate(all="ignore"):
        expected = ACTIVATION_REFERENCES[name](single.astype(np.float64)).astype(np.float32)
    assert ulps(_activation(name, single), expected) <= (1.0 if name in ("sigmoid", "tanh") else 3.0)


def test_argmax_and_argmin_of_int64_values_far_apart_do_not_wrap():
    import graphview as gv
    g = gv.Graph()
    x = g.placeholder("x", (3,), "int64")
    top, bottom = g.math.argmax(x), g.math.argmin(x)
    for values in ([-2**63, 5, 0], [2**63 - 1, -2**63, 0]):
        got = g.output({"x": np.array(values)}, [top, bottom])
        assert (got[top.name], got[bottom.name]) == (np.argmax(values), np.argmin(values))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(1, 5), min_size=1, max_size=5).flatmap(
    lambda shape: st.tuples(st.just(tuple(shape)), st.tuples(*[st.tuples(st.integers(0, n - 1), st.integers(1, n))
                                                              for n in shape]), st.booleans())))
def test_scatter_box_writes_the_values_in_the_box_and_zeros_around_it(case):
    """scatter_view's kernel for a box region: every element written once, the box's runs (trailing whole axes
    joined) from the values in C order, or from one value repeated."""
    shape, bounds, repeated = case
    starts = [start for start, _ in bounds]
    sizes = [min(size, n - start) for (start, size), n in zip(bounds, shape)]
    values = np.array([2.5]) if repeated else np.arange(1.0, 1.0 + np.prod(sizes))
    out = np.full(shape, 7.0)
    indexing.scatter_box(values, out.reshape(-1), np.array(shape, np.int64), np.array(starts, np.int64),
                         np.array(sizes, np.int64), 0.0)
    expected = np.zeros(shape)
    expected[tuple(slice(start, start + size) for start, size in zip(starts, sizes))] = values.reshape(
        () if repeated else sizes)
    np.testing.assert_array_equal(out, expected)


def test_wide_vectors_puts_the_vector_width_attribute_on_the_function_that_calls_it():
    @numba.njit(cache=False)
    def doubled(a):
        vector_math.wide_vectors()
        for i in range(a.size):
            a[i] *= 2.0
    values = np.arange(40.0)
    doubled(values)
    np.testing.assert_array_equal(values, 2 * np.arange(40.0))
    assert '"prefer-vector-width"="512"' in doubled.inspect_llvm(doubled.signatures[0])


def test_every_kernel_cache_is_stamped_with_all_kernel_files(tmp_path):
    """A kernel calling a helper from another kernel file recompiles after that file changes: the cache
    stamp of every function in the package holds a digest of all its files (ADR 0003)."""
    locator = recurrent.lstm_forward._cache._impl._locator
    assert type(locator).__name__.startswith("Kernels")
    assert locator.get_source_stamp()[1] == caching.package_stamp()
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "notes.txt").write_text("ignored\n")
    first = caching.package_stamp(str(tmp_path))
    (tmp_path / "notes.txt").write_text("still ignored\n")
    assert caching.package_stamp(str(tmp_path)) == first
    (tmp_path / "a.py").write_text("x = 2\n")
    assert caching.package_stamp(str(tmp_path)) != first
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "b.py").write_text("")
    assert caching.package_stamp(str(tmp_path)) != first


def test_functions_outside_the_kernels_keep_numbas_own_cache_locator(tmp_path):
    source = tmp_path / "elsewhere.py"
    source.write_text("def f(a):\n    return a + 1\n")
    namespace = {}
    exec(compile(source.read_text(), str(source), "exec"), namespace)
    impl = getattr(numba.core.caching, "CacheImpl", None) or numba.core.caching._CacheImpl
    stamped = [cls for cls in impl._locator_classes if cls.__module__ == caching.__name__]
    assert stamped and all(cls.from_function(namespace["f"], str(source)) is None for cls in stamped)


def test_the_recurrent_kernels_skip_the_first_product_only_when_it_adds_exactly_nothing():
    h0, w_hh = np.zeros((2, 3)), np.ones((12, 3))
    assert recurrent.adds_nothing(h0, w_hh)
    assert not recurrent.adds_nothing(np.array([[0.0, 1e-300, 0.0], [0.0, 0.0, 0.0]]), w_hh)
    assert recurrent.adds_nothing(np.array([[-0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]), w_hh)
    for bad in (np.inf, -np.inf, np.nan):
        poisoned = w_hh.copy()
        poisoned[5, 1] = bad
        assert not recurrent.adds_nothing(h0, poisoned)           # 0 * inf and 0 * NaN are NaN
        assert not recurrent.adds_nothing(np.where(np.eye(2, 3) > 0, bad, 0.0), w_hh)
