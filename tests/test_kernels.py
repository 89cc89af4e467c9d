"""Kernel-level checks: the vectorized exp, strided outputs, and operands the flat path repeats."""
import numpy as np
import pytest
from hypothesis import given, strategies as st
from hypothesis.extra import numpy as hnp

from graphview_kernels import elementwise, inplace


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
