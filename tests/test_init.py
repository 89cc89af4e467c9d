"""graphview.init: the initializers' distributions against their formulas and PyTorch's gains, orthogonality,
seeds, fans, dtypes, configs and errors."""
import json
import math

import numpy as np
import pytest

import graphview as gv
from graphview import init as gvinit

SHAPE = (400, 300)  # PyTorch's convention: (out, in), so fan_in 300, fan_out 400
FAN_IN, FAN_OUT = 300, 400


def bounded(values, bound):
    """All of ``values`` within [-bound, bound], and both ends reached to within 3%."""
    assert np.abs(values).max() <= bound
    assert values.max() > 0.97 * bound and values.min() < -0.97 * bound


@pytest.mark.parametrize("initializer, bound", [
    (gvinit.glorot_uniform(), math.sqrt(6 / (FAN_IN + FAN_OUT))),
    (gvinit.glorot_uniform(gain=2.0), 2 * math.sqrt(6 / (FAN_IN + FAN_OUT))),
    (gvinit.he_uniform(), math.sqrt(2) * math.sqrt(3 / FAN_IN)),
    (gvinit.he_uniform(mode="fan_out"), math.sqrt(2) * math.sqrt(3 / FAN_OUT)),
    (gvinit.fan_in_uniform(), 1 / math.sqrt(FAN_IN)),
    (gvinit.fan_in_uniform(scale=0.5), 0.5 / math.sqrt(FAN_IN)),
    (gvinit.uniform(), 0.05),
])
def test_uniform_bounds_are_the_formulas(initializer, bound):
    values = initializer(SHAPE, rng=0)
    bounded(values, bound)
    assert abs(values.std() - bound / math.sqrt(3)) < 0.03 * bound / math.sqrt(3)


@pytest.mark.parametrize("initializer, std", [
    (gvinit.glorot_normal(), math.sqrt(2 / (FAN_IN + FAN_OUT))),
    (gvinit.glorot_normal(gain=3.0), 3 * math.sqrt(2 / (FAN_IN + FAN_OUT))),
    (gvinit.he_normal(), math.sqrt(2 / FAN_IN)),
    (gvinit.he_normal(mode="fan_out", nonlinearity="tanh"), 5 / 3 / math.sqrt(FAN_OUT)),
    (gvinit.normal(), 0.05),
])
def test_normal_std_is_the_formula(initializer, std):
    values = initializer(SHAPE, rng=1)
    assert abs(values.std() - std) < 0.03 * std
    assert abs(values.mean()) < 0.03 * std
    # Not truncated (as xavier_normal_ and kaiming_normal_): a sample this size has values beyond 3.5 std.
    assert np.abs(values).max() > 3.5 * std


def test_normal_and_uniform_take_their_parameters():
    values = gvinit.normal(mean=3.0, std=0.5)(SHAPE, rng=2)
    assert abs(values.mean() - 3.0) < 0.01 and abs(values.std() - 0.5) < 0.015
    values = gvinit.uniform(low=2.0, high=5.0)(SHAPE, rng=2)
    assert values.min() >= 2.0 and values.max() < 5.0 and values.min() < 2.01 and values.max() > 4.99


@pytest.mark.parametrize("nonlinearity, a", [
    ("relu", 0.0), ("leaky_relu", 0.2), ("leaky_relu", 0.0), ("linear", 0.0), ("tanh", 0.0), ("sigmoid", 0.0),
    ("selu", 0.0), ("relu", 0.7),  # a is leaky_relu's slope only, as in PyTorch
])
def test_he_gains_are_pytorchs(nonlinearity, a):
    torch = pytest.importorskip("torch")
    gain = torch.nn.init.calculate_gain(nonlinearity, a)
    bound, std = gain * math.sqrt(3 / FAN_IN), gain / math.sqrt(FAN_IN)
    # The draws are the Generator's float64 ones, so the same seed gives them (to the rounding of the bound).
    expected = np.random.default_rng(5).uniform(-bound, bound, SHAPE)
    np.testing.assert_allclose(gvinit.he_uniform(nonlinearity=nonlinearity, a=a)(SHAPE, rng=5), expected,
                               rtol=0, atol=1e-14 * bound)
    expected = np.random.default_rng(5).normal(0.0, std, SHAPE)
    np.testing.assert_allclose(gvinit.he_normal(nonlinearity=nonlinearity, a=a)(SHAPE, rng=5), expected,
                               rtol=0, atol=1e-14 * std)


def test_fan_in_uniform_is_pytorchs_linear_and_conv_default():
    torch = pytest.importorskip("torch")
    for weight in (torch.nn.Linear(300, 400).weight, torch.nn.Conv2d(16, 64, 3).weight):
        fan_in = math.prod(weight.shape[1:])
        torch_bound = torch.nn.init.calculate_gain("leaky_relu", math.sqrt(5)) * math.sqrt(3 / fan_in)
        assert torch_bound == pytest.approx(1 / math.sqrt(fan_in), rel=1e-12)
        assert np.abs(weight.detach().numpy()).max() <= torch_bound
        bounded(gvinit.fan_in_uniform()(tuple(weight.shape), rng=3), torch_bound)


def test_fans_of_conv_shapes_are_pytorchs():
    # (out, in, kh, kw) = (64, 16, 3, 3): fan_in 144, fan_out 576.
    bounded(gvinit.he_uniform()((64, 16, 3, 3), rng=4), math.sqrt(2) * math.sqrt(3 / 144))
    bounded(gvinit.he_uniform(mode="fan_out")((64, 16, 3, 3), rng=4), math.sqrt(2) * math.sqrt(3 / 576))
    bounded(gvinit.glorot_uniform()((64, 16, 3, 3), rng=4), math.sqrt(6 / (144 + 576)))


def test_fans_override_the_shape():
    # A graphview Dense weight is (in, out): the layer passes fans=(in, out).
    values = gvinit.he_uniform()((300, 400), rng=6, fans=(300, 400))
    bounded(values, math.sqrt(2) * math.sqrt(3 / 300))
    bias = gvinit.fan_in_uniform()((400,), rng=6, fans=(300, 400))
    bounded(bias, 1 / math.sqrt(300))
    assert bias.shape == (400,)


@pytest.mark.parametrize("shape, gain", [((30, 50), 1.0), ((50, 30), 1.0), ((40, 40), 2.0), ((8, 3, 3, 3), 0.5),
                                         ((64, 3, 3, 3), 1.0)])
def test_orthogonal(shape, gain):
    values = gvinit.orthogonal(gain=gain)(shape, rng=7)
    assert values.shape == shape
    flat = values.reshape(shape[0], -1)
    rows, cols = flat.shape
    product = flat @ flat.T if rows <= cols else flat.T @ flat
    np.testing.assert_allclose(product, gain ** 2 * np.eye(min(rows, cols)), atol=1e-12)


def test_orthogonal_sign_fix_makes_the_diagonal_of_r_positive():
    # PyTorch's algorithm: Q of the QR of a normal matrix, times sign(diag(R)); so Q's R-factor has a positive diagonal.
    values = gvinit.orthogonal()((6, 6), rng=8)
    expected_q, r = np.linalg.qr(np.random.default_rng(8).normal(0.0, 1.0, (6, 6)))
    np.testing.assert_allclose(values, expected_q * np.sign(np.diag(r)), atol=1e-14)


def test_constants():
    assert np.array_equal(gvinit.zeros()((3, 2)), np.zeros((3, 2)))
    assert np.array_equal(gvinit.ones()((4,), dtype="float32"), np.ones(4, dtype=np.float32))
    assert np.array_equal(gvinit.constant(2.5)((2, 2)), np.full((2, 2), 2.5))
    assert gvinit.zeros()(()).shape == ()


@pytest.mark.parametrize("name", sorted(set(gvinit.BUILDERS) - {"constant"}))
def test_seeds_dtypes_and_fresh_arrays(name):
    initializer = gvinit.get(name)
    shape = (20, 30)
    first, second = initializer(shape, rng=11), initializer(shape, rng=11)
    assert first.dtype == np.float64 and first.shape == shape and first.flags.c_contiguous
    assert np.array_equal(first, second) and first is not second and not np.shares_memory(first, second)
    single = initializer(shape, dtype="float32", rng=11)
    assert single.dtype == np.float32 and single.flags.c_contiguous
    assert np.array_equal(single, first.astype(np.float32))
    generator = np.random.default_rng(11)
    np.testing.assert_array_equal(initializer(shape, rng=generator), first)
    if name not in ("zeros", "ones"):
        assert not np.array_equal(initializer(shape, rng=12), first)
        assert not np.array_equal(initializer(shape, rng=generator), first)  # the Generator moved on
        assert not np.array_equal(initializer(shape), initializer(shape))  # fresh entropy
    assert initializer((0, 5)).shape == (0, 5)


@pytest.mark.parametrize("initializer", [
    gvinit.glorot_uniform(gain=0.5), gvinit.glorot_normal(), gvinit.he_uniform("fan_out", "leaky_relu", 0.1),
    gvinit.he_normal(nonlinearity="tanh"), gvinit.orthogonal(gain=2.0), gvinit.zeros(), gvinit.ones(),
    gvinit.constant(-1.5), gvinit.uniform(-1.0, 2.0), gvinit.normal(1.0, 0.2), gvinit.fan_in_uniform(scale=3.0),
])
def test_config_round_trip(initializer):
    config = json.loads(json.dumps(initializer.config()))
    rebuilt = gvinit.from_config(config)
    assert rebuilt == initializer and repr(rebuilt) == repr(initializer)
    assert np.array_equal(rebuilt((5, 6), rng=0), initializer((5, 6), rng=0))
    assert eval("gvinit." + repr(initializer)) == initializer


def test_repr_and_get():
    assert repr(gvinit.he_uniform(mode="fan_out")) == "he_uniform(mode='fan_out', nonlinearity='relu', a=0.0)"
    assert repr(gvinit.zeros()) == "zeros()"
    initializer = gvinit.normal(std=0.1)
    assert gvinit.get(initializer) is initializer
    assert gvinit.get("he_normal") == gvinit.he_normal()
    with pytest.raises(gv.GraphviewError, match=r"'he_norml'.*did you mean 'he_normal'.*names: glorot_uniform"):
        gvinit.get("he_norml")
    with pytest.raises(gv.GraphviewError, match=r"constant needs a value"):
        gvinit.get("constant")
    with pytest.raises(gv.GraphviewError, match=r"3 is not an Initializer"):
        gvinit.get(3)


@pytest.mark.parametrize("make, match", [
    (lambda: gvinit.he_uniform(mode="fan_avg"), r"he_uniform: mode 'fan_avg' is not one of fan_in, fan_out"),
    (lambda: gvinit.he_normal(nonlinearity="gelu"), r"he_normal: nonlinearity 'gelu' is not one of linear"),
    (lambda: gvinit.he_normal(a=float("nan")), r"he_normal: a=nan is not finite"),
    (lambda: gvinit.normal(std=-1.0), r"normal: std=-1.0 is negative"),
    (lambda: gvinit.normal(mean=float("inf")), r"normal: mean=inf is not finite"),
    (lambda: gvinit.glorot_uniform(gain=-2), r"glorot_uniform: gain=-2.0 is negative"),
    (lambda: gvinit.orthogonal(gain=float("nan")), r"orthogonal: gain=nan is not finite"),
    (lambda: gvinit.uniform(1.0, 1.0), r"uniform: low=1.0 must be below high=1.0"),
    (lambda: gvinit.uniform(0.0, float("inf")), r"uniform: high=inf is not finite"),
    (lambda: gvinit.constant("1"), r"constant: value='1' is not a number"),
    (lambda: gvinit.fan_in_uniform(scale=-1), r"fan_in_uniform: scale=-1.0 is negative"),
    (lambda: gvinit.from_config({"name": "he_uniform", "gain": 2.0}), r"config .*unexpected keyword argument 'gain'"),
    (lambda: gvinit.from_config({"name": "xavier"}), r"unknown name 'xavier'; names: glorot_uniform"),
    (lambda: gvinit.from_config("zeros"), r"not a dict with a 'name'"),
])
def test_bad_parameters(make, match):
    with pytest.raises(gv.GraphviewError, match=match):
        make()


@pytest.mark.parametrize("call, error, match", [
    (lambda: gvinit.glorot_uniform()((5,)), gv.ShapeError, r"glorot_uniform: .*shape \(5,\) of rank 1.*pass fans="),
    (lambda: gvinit.he_normal()(()), gv.ShapeError, r"he_normal: .*shape \(\) of rank 0"),
    (lambda: gvinit.orthogonal()((5,)), gv.ShapeError, r"orthogonal: shape \(5,\) has rank 1; it needs rank >= 2"),
    (lambda: gvinit.he_uniform()((2, 3), fans=(3,)), gv.ShapeError, r"he_uniform: fans \(3,\) is not a pair"),
    (lambda: gvinit.he_uniform(mode="fan_out")((2, 3), fans=(3, 0)), gv.ShapeError, r"he_uniform: fan_out is 0"),
    (lambda: gvinit.zeros()((2, -1)), gv.ShapeError, r"zeros: shape \(2, -1\) is not a tuple of non-negative"),
    (lambda: gvinit.he_uniform()((2, 3), dtype="int32"), gv.DTypeError,
     r"he_uniform: dtype int32 is not supported; use float32 or float64"),
    (lambda: gvinit.zeros()((2,), dtype="float16"), gv.DTypeError, r"zeros: dtype float16 is not supported"),
    (lambda: gvinit.normal()((2,), rng=np.random.RandomState(0)), gv.GraphviewError, r"normal: rng .* is not a"),
])
def test_bad_calls(call, error, match):
    with pytest.raises(error, match=match):
        call()
