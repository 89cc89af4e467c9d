"""The gradient each op takes where its derivative is undefined (README, "Subgradients"): one test per
documented convention, on the values where it applies."""
import numpy as np
import pytest

import graphview as gv

nan, inf = np.nan, np.inf


def gradients(build, **values):
    """d sum(build(g, **variables)) / d each variable, with the variables set to ``values``."""
    g = gv.Graph()
    variables = {name: g.var(name, np.asarray(value, dtype=np.float64)) for name, value in values.items()}
    g.set_loss(g.math.sum(build(g, **variables)))
    return g.calculate_gradients({}, list(values))


@pytest.mark.parametrize("op", ["maximum", "minimum"])
def test_maximum_and_minimum_give_a_tie_wholly_to_their_first_argument(op):
    result = gradients(lambda g, x, y: getattr(g.math, op)(x, y), x=[1.0, -0.0, 5.0], y=[1.0, 0.0, 5.0])
    np.testing.assert_array_equal(result["x"], [1.0, 1.0, 1.0])
    np.testing.assert_array_equal(result["y"], [0.0, 0.0, 0.0])


@pytest.mark.parametrize("op", ["maximum", "minimum"])
def test_maximum_and_minimum_give_the_gradient_to_the_second_argument_where_either_is_nan(op):
    result = gradients(lambda g, x, y: getattr(g.math, op)(x, y), x=[nan, 1.0, nan], y=[1.0, nan, nan])
    np.testing.assert_array_equal(result["x"], [0.0, 0.0, 0.0])
    np.testing.assert_array_equal(result["y"], [1.0, 1.0, 1.0])


def test_maximum_and_minimum_away_from_ties_follow_the_larger_and_smaller():
    x, y = [2.0, 3.0], [1.0, 4.0]
    high = gradients(lambda g, x, y: g.math.maximum(x, y), x=x, y=y)
    low = gradients(lambda g, x, y: g.math.minimum(x, y), x=x, y=y)
    np.testing.assert_array_equal(high["x"], [1.0, 0.0])
    np.testing.assert_array_equal(low["x"], [0.0, 1.0])


def test_relu_has_gradient_zero_at_zero_and_at_nan():
    result = gradients(lambda g, x: g.nn.relu(x), x=[-1.0, 0.0, -0.0, 2.0, nan])
    np.testing.assert_array_equal(result["x"], [0.0, 0.0, 0.0, 1.0, 0.0])


def test_abs_has_gradient_sign_x_so_zero_at_zero_and_nan_at_nan():
    result = gradients(lambda g, x: g.math.abs(x), x=[-1.0, 0.0, -0.0, 2.0, nan])
    np.testing.assert_array_equal(result["x"], [-1.0, 0.0, 0.0, 1.0, nan])


def test_pow_gradient_for_the_exponent_is_zero_where_the_base_is_not_positive():
    x, y = [0.0, 0.0, -2.0, -2.0, 2.0], [2.0, 0.5, 2.0, 3.0, 0.5]
    result = gradients(lambda g, x, y: g.math.pow(x, y), x=x, y=y)
    np.testing.assert_array_equal(result["y"][:4], [0.0, 0.0, 0.0, 0.0])
    np.testing.assert_allclose(result["y"][4], 2.0 ** 0.5 * np.log(2.0))


def test_pow_gradient_for_the_base_is_y_x_to_the_y_minus_1_and_zero_for_a_zero_exponent():
    x, y = [0.0, 0.0, 0.0, 0.0, -2.0, -2.0, 5.0], [2.0, 1.0, 0.5, 0.0, 3.0, 0.5, 0.0]
    with np.errstate(divide="ignore", invalid="ignore"):
        expected = np.where(np.asarray(y) == 0.0, 0.0, np.asarray(y) * np.power(x, np.asarray(y) - 1.0))
    # x**0 is constant: its gradient is 0 even at x == 0, where y * x**(y-1) would be 0 * inf (as PyTorch).
    np.testing.assert_array_equal(expected, [0.0, 1.0, inf, 0.0, 12.0, nan, 0.0])
    result = gradients(lambda g, x, y: g.math.pow(x, y), x=x, y=y)
    np.testing.assert_array_equal(result["x"], expected)


def test_pow_of_a_negative_base_to_a_fractional_power_is_nan_in_value_and_both_gradients():
    g = gv.Graph()
    x, y = g.var("x", np.array([-2.0])), g.var("y", np.array([0.5]))
    out = g.math.pow(x, y)
    g.set_loss(g.math.sum(out))
    assert np.isnan(g.output({}, [out])[out.name]).all()
    result = g.calculate_gradients({}, ["x", "y"])
    assert np.isnan(result["x"]).all() and np.isnan(result["y"]).all()


def test_the_readme_documents_each_convention_pinned_here():
    import pathlib
    text = (pathlib.Path(__file__).resolve().parent.parent / "README.md").read_text()
    section = text[text.index("**Subgradients.**"):text.index("### Listeners")]
    for documented in ["a tie, `x == y`", "all to `x`, none to `y`", "`x` or `y` is NaN", "`nn.relu(x)` | `x == 0`",
                       "`nn.relu(x)` | `x` is NaN", "`abs(x)` | `x == 0`", "`abs(x)` | `x` is NaN",
                       "`pow(x, y)`, for `y` | `x <= 0`", "`pow(x, y)`, for `x`", "0 where `y == 0`"]:
        assert documented in section, documented
