"""Every differentiable built-in op whose gradient rule is made wrong is named by a failed gradient check, inside a
smooth model whose curvature makes its one-sided differences disagree (issue 27, item 1; ADR 0007, amendment of
5th December 2026): never a kink verdict, never another op.

Each float input of the op's first gradient-checked sample becomes ``sample * (1 + 0.1 tanh(x * w))`` (its
non-finite entries kept as they are), so the input stays in the op's domain and ties stay apart, and the loss is
``mean(op(...) * c)`` with a random ``c``. The variables ``w`` are checked."""
import contextlib
import dataclasses

import numpy as np
import pytest

import graphview as gv
from graphview import dtypes, registry

WRONG = {"scaled by 1.1 plus 1e-2": lambda gradient: gradient * 1.1 + 0.01,
         "halved": lambda gradient: gradient * 0.5}
SEEDS = (0, 1, 2)


def _cases():
    cases = []
    for definition in registry.definitions():
        if definition.vjp is None or definition.differentiable is False or not definition.samples:
            continue
        sample = next((s for s in definition.samples() if s.gradcheck), None)
        if sample is not None:
            cases.append((definition.name, sample))
    return cases


CASES = _cases()


def smooth_model(name, sample, seed):
    """``(graph, feeds, wrt)``: op ``name`` on its sample's inputs made smooth functions of variables."""
    rng = np.random.default_rng(seed)
    g = gv.Graph(f"{name}-smooth")
    inputs, feeds, wrt = [], {}, []
    for position, value in enumerate(sample.inputs):
        if not isinstance(value, np.ndarray):
            inputs.append(value)
        elif position in sample.constant_inputs or not dtypes.is_float(value.dtype):
            inputs.append(g.placeholder(f"input{position}", value.shape, value.dtype))
            feeds[f"input{position}"] = value
        else:
            x = g.placeholder(f"x{position}", value.shape, value.dtype)
            feeds[x.name] = rng.normal(size=value.shape).astype(value.dtype)
            w = g.var(f"w{position}", rng.normal(size=value.shape).astype(value.dtype))
            finite = np.isfinite(value)
            smooth = g.constant(f"s{position}", np.where(finite, value, 0)) * (1.0 + 0.1 * g.math.tanh(x * w))
            if not finite.all():    # masked ops' samples hold NaN and infinities where the mask is off
                smooth = smooth + g.constant(f"rest{position}", np.where(finite, 0, value))
            inputs.append(smooth)
            wrt.append(w.name)
    token = registry.default_graph.set(g)
    try:
        output = registry.op(name)(*inputs, **sample.attrs)
    finally:
        registry.default_graph.reset(token)
    output = output[0] if isinstance(output, (tuple, list)) else output
    if not wrt or not dtypes.is_float(output.dtype):
        return None
    shape = g.output(feeds, [output])[output.name].shape
    g.set_loss(g.math.mean(output * g.constant("c", rng.uniform(0.5, 1.5, shape).astype(output.dtype))))
    return g, feeds, wrt


@contextlib.contextmanager
def wrong_rule(op, change):
    """Op ``op``'s registered rule with ``change`` applied to every gradient it gives, for the ``with`` block;
    yields a list that holds True once the rule has given a gradient."""
    definition, gave = registry.get(op), []

    def rule(grad, out, *inputs, **attrs):
        gradients = definition.vjp(grad, out, *inputs, **attrs)
        single = not isinstance(gradients, (tuple, list))
        changed = tuple(None if g is None else change(g) for g in ((gradients,) if single else gradients))
        gave.append(any(g is not None for g in changed))
        return changed[0] if single else changed
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(registry._REGISTRY, op, dataclasses.replace(definition, vjp=rule))
        yield gave


@pytest.mark.slow
@pytest.mark.parametrize("op, sample", CASES, ids=[name for name, _ in CASES])
def test_a_wrong_rule_of_every_op_is_named_in_a_smooth_model(op, sample):
    for seed in SEEDS:
        built = smooth_model(op, sample, seed)
        if built is None:
            pytest.skip("no floating-point input or output to differentiate")
        g, feeds, wrt = built
        right = gv.check_gradients(g, feeds, wrt=wrt)
        assert right.passed, f"seed {seed}: the right rule fails: {right}"
        for what, change in WRONG.items():
            with wrong_rule(op, change) as gave:
                report = gv.check_gradients(g, feeds, wrt=wrt)
            if not any(gave):
                pytest.skip(f"{op}'s rule gives no gradient (its derivative is zero wherever it is defined)")
            assert not report.passed, f"seed {seed}, rule {what}: the check passed"
            for failure in report.failures:
                culprit = failure.culprit
                assert culprit is not None and culprit.op == op and culprit.kink is None, (
                    f"seed {seed}, rule {what}: {failure.variable}{failure.index} blames {culprit}")
