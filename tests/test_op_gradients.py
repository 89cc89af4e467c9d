"""Op validation: every differentiable op's samples pass a gradient check, with the validation listener on."""
import numpy as np
import pytest

import graphview as gv
from graphview import registry
from graphview.gradcheck import check_op
from optable import all_samples, build, case_id

# Taken when the module is collected, so ops that other tests register for a while do not count.
DEFINITIONS = registry.definitions()
CASES = [c for c in all_samples() if registry.get(c[0]).differentiable]


def test_every_op_has_a_gradient_rule_or_is_marked_non_differentiable():
    unmarked = [d.name for d in DEFINITIONS if d.vjp is None and d.differentiable is not False]
    assert not unmarked, f"ops with no vjp rule that are not marked differentiable=False: {unmarked}"


def test_every_differentiable_op_has_gradient_checked_samples():
    checked = {name for name, _, sample in CASES if sample.gradcheck}
    missing = [d.name for d in DEFINITIONS if d.differentiable and d.name not in checked]
    assert not missing, f"differentiable ops without a gradient-checked sample: {missing}"


@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
def test_op_gradient(case):
    name, _, sample = case
    if not sample.gradcheck:
        pytest.skip("the sample is marked gradcheck=False (derivative discontinuous near its inputs)")
    report = check_op(name, sample, build=build)
    if report is None:
        pytest.skip("no floating-point input to differentiate")
    assert report.passed, str(report)


def test_an_op_declared_differentiable_without_a_rule_fails_validation():
    broken = gv.defop("test_rule_missing", shape=lambda x: x, kernel=lambda x, out: np.copyto(out, x),
                      differentiable=True, reference=lambda x: x, samples=lambda: [gv.Sample((np.ones((2, 2)),))])
    try:
        assert broken.definition.differentiable and broken.definition.vjp is None
        with pytest.raises(gv.GraphviewError, match="test_rule_missing.*no gradient rule"):
            check_op("test_rule_missing", broken.definition.samples()[0], build=build)
        row = next(r for r in gv.op_coverage() if r.op == "test_rule_missing")
        assert row.differentiable and not row.has_gradient and not row.complete
    finally:
        registry._REGISTRY.pop("test_rule_missing", None)
        registry._CALLABLES.pop("test_rule_missing", None)


def test_an_op_with_neither_rule_nor_mark_is_undeclared_and_stops_autodiff_loudly():
    vague = gv.defop("test_rule_undeclared", shape=lambda x: x, kernel=lambda x, out: np.copyto(out, x),
                     reference=lambda x: x, samples=lambda: [gv.Sample((np.ones(2),))])
    try:
        assert vague.definition.differentiable is None
        g = gv.Graph()
        w = g.var("w", np.ones(2))
        g.set_loss(g.math.sum(vague(w)))
        with pytest.raises(gv.GraphviewError, match="test_rule_undeclared.*not marked differentiable=False"):
            g.calculate_gradients({}, ["w"])
        row = next(r for r in gv.op_coverage() if r.op == "test_rule_undeclared")
        assert not row.complete
    finally:
        registry._REGISTRY.pop("test_rule_undeclared", None)
        registry._CALLABLES.pop("test_rule_undeclared", None)


def test_stacking_scalars_gives_their_values_and_gradients():
    g = gv.Graph()
    p, q = g.var("p", 2.0), g.var("q", -3.0)
    stacked = g.shape.stack([p, q, p])
    np.testing.assert_array_equal(stacked.eval(), [2.0, -3.0, 2.0])
    g.set_loss(g.math.sum(stacked * np.array([1.0, 2.0, 3.0])))
    grads = g.calculate_gradients({}, ["p", "q"])
    np.testing.assert_array_equal(grads["p"], 4.0)
    np.testing.assert_array_equal(grads["q"], 2.0)
    assert gv.check_gradients(g, {}).passed


@pytest.mark.parametrize("values, expected", [([0.0, 2.0, 3.0], [6.0, 0.0, 0.0]), ([0.0, 2.0, 0.0], [0.0, 0.0, 0.0]),
                                              ([1.0, 2.0, 3.0], [6.0, 3.0, 2.0])])
def test_prod_gradient_at_zeros_is_the_product_of_the_others(values, expected):
    g = gv.Graph()
    x = g.var("x", np.array(values))
    g.set_loss(g.math.sum(g.math.prod(x)))
    np.testing.assert_array_equal(g.calculate_gradients({}, ["x"])["x"], expected)
    assert gv.check_gradients(g, {}).passed


def test_prod_gradient_over_an_axis_treats_each_row_by_its_own_zeros():
    g = gv.Graph()
    value = np.array([[0.0, 2.0, 3.0], [0.0, 0.0, 5.0], [1.0, 4.0, 2.0]])
    x = g.var("x", value)
    g.set_loss(g.math.sum(g.math.prod(x, axis=1)))
    expected = [[6.0, 0.0, 0.0], [0.0, 0.0, 0.0], [8.0, 2.0, 4.0]]
    np.testing.assert_array_equal(g.calculate_gradients({}, ["x"])["x"], expected)
