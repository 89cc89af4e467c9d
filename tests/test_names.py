"""Names in messages (issue 14, item 12): unknown names get a "did you mean", a gradient's missing placeholder
is named against the user's variables, and two dims of one name are told apart."""
import numpy as np
import pytest

import graphview as gv


def _model():
    g = gv.Graph("names")
    x = g.placeholder("features", (2, 3))
    weight = g.var("weight", np.ones((3, 4)))
    g.set_loss(g.math.sum(g.math.tanh(x @ weight)))
    return g


def test_an_unknown_variable_or_output_name_suggests_the_closest_names():
    g = _model()
    with pytest.raises(gv.UnknownNameError, match=r"no variable named 'wieght' \(did you mean 'weight'\?\)"):
        g["wieght"]
    with pytest.raises(gv.UnknownNameError, match=r"did you mean 'weight'\?"):
        g.output({"features": np.ones((2, 3))}, ["wieght"])
    with pytest.raises(gv.UnknownNameError, match=r"did you mean 'weight'\?"):
        g.calculate_gradients({"features": np.ones((2, 3))}, ["weihgt"])
    with pytest.raises(gv.UnknownNameError) as nothing_close:
        g["zzzzzz"]
    assert "did you mean" not in str(nothing_close.value)


def test_an_unknown_feed_name_suggests_the_closest_placeholder():
    g = _model()
    with pytest.raises(gv.PlaceholderError, match=r"unknown placeholder 'feature' \(did you mean 'features'\?\)"):
        g.output({"feature": np.ones((2, 3))}, g.losses)
    with pytest.raises(gv.PlaceholderError, match=r"unknown placeholder 'featurs' \(did you mean 'features'\?\)"):
        g.calculate_gradients({"featurs": np.ones((2, 3))}, ["weight"])


def test_a_gradient_checks_missing_placeholder_is_named_against_the_users_variables():
    g = _model()
    with pytest.raises(gv.PlaceholderError) as missing:
        gv.check_gradients(g, {})
    message = str(missing.value)
    assert "missing placeholder 'features' ((2, 3) float64)" in message
    assert "the gradient of 'sum' with respect to 'weight'" in message
    assert "grad/" not in message           # no internal gradient node


def test_two_dims_with_one_name_are_told_apart_in_messages():
    first, second = gv.Dim("pixels_test_names", 3), gv.Dim("pixels_test_names", 3)
    assert repr(first) == "Dim('pixels_test_names', 3)" and str(first) == "pixels_test_names"
    assert repr(second) == "Dim('pixels_test_names'#2, 3)" and str(second) == "pixels_test_names#2"
    assert repr(second) == repr(second) and repr(first) != repr(second)     # stable, and distinct
    with pytest.raises(gv.DimError, match=r"Dim\('pixels_test_names', 3\) has size 3 but "
                                          r"Dim\('pixels_test_names'#3, 4\) has size 4"):
        first.declare_same_as(gv.Dim("pixels_test_names", 4))
