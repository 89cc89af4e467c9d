"""Weight initializers: Glorot, He (Kaiming), orthogonal, constants and plain distributions, as PyTorch's torch.nn.init.

Each public function returns an ``Initializer``; calling it as ``init(shape, dtype="float64", rng=None, fans=None)``
gives a new C-contiguous array. Draws are the Generator's float64 ones, cast to ``dtype`` afterwards, so float32 and
float64 arrays from one seed agree to float32 rounding. ``fans`` is ``(fan_in, fan_out)``; without it the fans come
from the shape as PyTorch computes them for a (out, in, *kernel) weight.
"""
import math
import numbers

import numpy as np

from graphview.dtypes import FLOATS
from graphview.errors import DTypeError, GraphviewError, ShapeError, did_you_mean

MODES = ("fan_in", "fan_out")
NONLINEARITIES = ("linear", "sigmoid", "tanh", "relu", "leaky_relu", "selu")


class Initializer:
    """A named way to fill a new array; ``config()`` is its name and parameters, ``from_config`` rebuilds it."""

    def __init__(self, name, params, draw, needs=None):
        """``draw(shape, rng, fans)`` gives the float64 values; ``needs`` is "fans" (fan-based: fans given or
        computed from a shape of rank >= 2), "matrix" (rank >= 2, fans unused) or None."""
        self.name, self.params = name, dict(params)
        self._draw, self._needs = draw, needs

    def __call__(self, shape, dtype="float64", rng=None, fans=None):
        dtype = _float_dtype(self.name, dtype)
        shape, generator = _shape(self.name, shape), _generator(self.name, rng)
        if self._needs == "fans":
            fans = _fans(self.name, shape, fans)
        elif self._needs == "matrix" and len(shape) < 2:
            raise ShapeError(f"{self.name}: shape {shape} has rank {len(shape)}; it needs rank >= 2 (as PyTorch)")
        if math.prod(shape) == 0:  # nothing to draw (PyTorch's init functions leave an empty tensor as it is)
            return np.zeros(shape, dtype=dtype)
        values = np.asarray(self._draw(shape, generator, fans), dtype=np.float64)
        return values.astype(dtype, order="C")

    def config(self):
        return {"name": self.name, **self.params}

    def __repr__(self):
        return f"{self.name}(" + ", ".join(f"{key}={value!r}" for key, value in self.params.items()) + ")"

    def __eq__(self, other):
        return isinstance(other, Initializer) and self.config() == other.config()

    def __hash__(self):
        return hash(repr(self))


def glorot_uniform(gain=1.0):
    """U(-b, b) with b = gain * sqrt(6 / (fan_in + fan_out)) (torch.nn.init.xavier_uniform_)."""
    gain = _number("glorot_uniform", "gain", gain, nonnegative=True)
    return _fan_based("glorot_uniform", {"gain": gain}, "uniform", gain * math.sqrt(6.0), "fan_in + fan_out")


def glorot_normal(gain=1.0):
    """N(0, std^2) with std = gain * sqrt(2 / (fan_in + fan_out)) (torch.nn.init.xavier_normal_; not truncated)."""
    gain = _number("glorot_normal", "gain", gain, nonnegative=True)
    return _fan_based("glorot_normal", {"gain": gain}, "normal", gain * math.sqrt(2.0), "fan_in + fan_out")


def he_uniform(mode="fan_in", nonlinearity="relu", a=0.0):
    """U(-b, b) with b = gain * sqrt(3 / fan), fan chosen by ``mode`` (torch.nn.init.kaiming_uniform_)."""
    params, gain = _he_params("he_uniform", mode, nonlinearity, a)
    return _fan_based("he_uniform", params, "uniform", gain * math.sqrt(3.0), mode)


def he_normal(mode="fan_in", nonlinearity="relu", a=0.0):
    """N(0, std^2) with std = gain / sqrt(fan), fan chosen by ``mode`` (torch.nn.init.kaiming_normal_; not truncated)."""
    params, gain = _he_params("he_normal", mode, nonlinearity, a)
    return _fan_based("he_normal", params, "normal", gain, mode)


def orthogonal(gain=1.0):
    """A (semi-)orthogonal matrix times ``gain``, trailing dims flattened (torch.nn.init.orthogonal_)."""
    gain = _number("orthogonal", "gain", gain, nonnegative=True)

    def draw(shape, rng, fans):
        rows = shape[0]
        cols = math.prod(shape) // rows
        flat = rng.normal(0.0, 1.0, (rows, cols))
        if rows < cols:
            flat = flat.T
        q, r = np.linalg.qr(flat)
        # Sign-fix by diag(R) makes Q Haar-distributed (Mezzadri 2007); a zero diagonal entry (probability 0) keeps
        # its column rather than zeroing it as PyTorch's sign() would.
        q = q * np.where(np.diag(r) < 0, -1.0, 1.0)
        if rows < cols:
            q = q.T
        return gain * q.reshape(shape)
    return Initializer("orthogonal", {"gain": gain}, draw, needs="matrix")


def zeros():
    """All 0 (torch.nn.init.zeros_)."""
    return Initializer("zeros", {}, lambda shape, rng, fans: np.zeros(shape))


def ones():
    """All 1 (torch.nn.init.ones_)."""
    return Initializer("ones", {}, lambda shape, rng, fans: np.ones(shape))


def constant(value):
    """All ``value`` (torch.nn.init.constant_)."""
    value = _number("constant", "value", value)
    return Initializer("constant", {"value": value}, lambda shape, rng, fans: np.full(shape, value))


def uniform(low=-0.05, high=0.05):
    """U(low, high) (torch.nn.init.uniform_)."""
    low, high = _number("uniform", "low", low), _number("uniform", "high", high)
    if low >= high:
        raise GraphviewError(f"uniform: low={low!r} must be below high={high!r}")
    return Initializer("uniform", {"low": low, "high": high},
                       lambda shape, rng, fans: rng.uniform(low, high, shape))


def normal(mean=0.0, std=0.05):
    """N(mean, std^2) (torch.nn.init.normal_)."""
    mean, std = _number("normal", "mean", mean), _number("normal", "std", std, nonnegative=True)
    return Initializer("normal", {"mean": mean, "std": std},
                       lambda shape, rng, fans: rng.normal(mean, std, shape))


def fan_in_uniform(scale=1.0):
    """U(-b, b) with b = scale / sqrt(fan_in): PyTorch's default for nn.Linear/Conv weights and biases
    (kaiming_uniform_ with a=sqrt(5)), and for nn.LSTM/GRU with fan_in = hidden_size."""
    scale = _number("fan_in_uniform", "scale", scale, nonnegative=True)
    return _fan_based("fan_in_uniform", {"scale": scale}, "uniform", scale, "fan_in")


BUILDERS = {builder.__name__: builder for builder in (
    glorot_uniform, glorot_normal, he_uniform, he_normal, orthogonal, zeros, ones, constant, uniform, normal,
    fan_in_uniform)}


def get(spec):
    """``spec`` as an Initializer: an Initializer passes through, a name gives that one with default parameters."""
    if isinstance(spec, Initializer):
        return spec
    if isinstance(spec, str) and spec in BUILDERS and spec != "constant":
        return BUILDERS[spec]()
    names = [name for name in BUILDERS if name != "constant"]
    raise GraphviewError(f"initializer {spec!r} is not an Initializer or the name of one"
                         + (did_you_mean(spec, names) if isinstance(spec, str) else "") + "; names: "
                         + ", ".join(names)
                         + " (constant needs a value: gv.init.constant(value))")


def from_config(config):
    """The Initializer that ``config()`` gave ``config``."""
    if not isinstance(config, dict) or not isinstance(config.get("name"), str):
        raise GraphviewError(f"initializer config {config!r} is not a dict with a 'name'")
    params = {key: value for key, value in config.items() if key != "name"}
    builder = BUILDERS.get(config["name"])
    if builder is None:
        raise GraphviewError(f"initializer config: unknown name {config['name']!r}"
                             + did_you_mean(config["name"], BUILDERS) + "; names: " + ", ".join(BUILDERS))
    try:
        return builder(**params)
    except TypeError as error:
        raise GraphviewError(f"initializer config {config!r}: {error}") from error


def _he_params(name, mode, nonlinearity, a):
    if mode not in MODES:
        raise GraphviewError(f"{name}: mode {mode!r} is not one of " + ", ".join(MODES))
    if nonlinearity not in NONLINEARITIES:
        raise GraphviewError(f"{name}: nonlinearity {nonlinearity!r} is not one of " + ", ".join(NONLINEARITIES))
    a = _number(name, "a", a)
    return {"mode": mode, "nonlinearity": nonlinearity, "a": a}, _gain(nonlinearity, a)


def _gain(nonlinearity, a):
    """torch.nn.init.calculate_gain(nonlinearity, a); ``a`` is leaky_relu's negative slope."""
    gains = {"linear": 1.0, "sigmoid": 1.0, "tanh": 5.0 / 3, "relu": math.sqrt(2.0), "selu": 3.0 / 4}
    return math.sqrt(2.0 / (1 + a ** 2)) if nonlinearity == "leaky_relu" else gains[nonlinearity]


def _fan_based(name, params, distribution, factor, fan):
    """An Initializer drawing U(-s, s) or N(0, s^2) with s = factor / sqrt(fan); ``fan`` is "fan_in", "fan_out"
    or "fan_in + fan_out"."""
    def draw(shape, rng, fans):
        value = {"fan_in": fans[0], "fan_out": fans[1], "fan_in + fan_out": fans[0] + fans[1]}[fan]
        if value <= 0:
            raise ShapeError(f"{name}: {fan} is {value} for shape {shape}; it must be positive")
        scale = factor / math.sqrt(value)
        return rng.uniform(-scale, scale, shape) if distribution == "uniform" else rng.normal(0.0, scale, shape)
    return Initializer(name, params, draw, needs="fans")


def _fans(name, shape, fans):
    """(fan_in, fan_out): ``fans`` checked, or PyTorch's for a (out, in, *kernel) shape."""
    if fans is None:
        if len(shape) < 2:
            raise ShapeError(f"{name}: fan_in and fan_out cannot be computed for shape {shape} of rank {len(shape)} "
                             "(PyTorch needs rank >= 2 too); pass fans=(fan_in, fan_out)")
        receptive = math.prod(shape[2:])
        return shape[1] * receptive, shape[0] * receptive
    if (not isinstance(fans, (tuple, list)) or len(fans) != 2
            or not all(isinstance(f, numbers.Integral) and not isinstance(f, bool) and f >= 0 for f in fans)):
        raise ShapeError(f"{name}: fans {fans!r} is not a pair (fan_in, fan_out) of non-negative ints")
    return int(fans[0]), int(fans[1])


def _shape(name, shape):
    if isinstance(shape, numbers.Integral) and not isinstance(shape, bool):
        shape = (shape,)
    if (not isinstance(shape, (tuple, list))
            or not all(isinstance(d, numbers.Integral) and not isinstance(d, bool) and d >= 0 for d in shape)):
        raise ShapeError(f"{name}: shape {shape!r} is not a tuple of non-negative ints")
    return tuple(int(d) for d in shape)


def _float_dtype(name, dtype):
    try:
        resolved = np.dtype(dtype)
    except TypeError as error:
        raise DTypeError(f"{name}: {dtype!r} is not a dtype") from error
    if resolved not in FLOATS:
        raise DTypeError(f"{name}: dtype {resolved.name} is not supported; use float32 or float64")
    return resolved


def _generator(name, rng):
    if rng is None or (isinstance(rng, numbers.Integral) and not isinstance(rng, bool)):
        return np.random.default_rng(rng)
    if isinstance(rng, np.random.Generator):
        return rng
    raise GraphviewError(f"{name}: rng {rng!r} is not a numpy.random.Generator, an int seed or None")


def _number(name, what, value, nonnegative=False):
    """``value`` as a finite float (JSON-able), checked."""
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise GraphviewError(f"{name}: {what}={value!r} is not a number")
    value = float(value)
    if not math.isfinite(value):
        raise GraphviewError(f"{name}: {what}={value!r} is not finite")
    if nonnegative and value < 0:
        raise GraphviewError(f"{name}: {what}={value!r} is negative; it must be >= 0")
    return value
