"""Random ops: normal and uniform draws, seeded and reproducible.

Element i of a draw is a hash of (seed, i) (kernels.random), so a seed gives
the same array every run, whatever the threading. Without a seed, one is
derived from the graph's name and the op's position, so rebuilding the same
graph gives the same numbers.
"""
import math
import zlib

import numpy as np

from graphview import attributes, dtypes
from graphview.errors import ShapeError
from graphview.ops.shape import int_entries
from graphview.registry import defop, graph_of, public
from graphview.testing import Sample
from graphview_kernels import random as kernels

MASK = np.uint64(0xFFFFFFFFFFFFFFFF)


def default_seed(graph, name):
    return zlib.crc32(f"{graph.name}/{name}/{len(graph.nodes())}".encode())


def _splitmix64_reference(value):
    with np.errstate(over="ignore"):
        z = value + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def unit_reference(seed, count, start=0, step=1):
    """NumPy mirror of kernels.random.unit for indices start, start+step, ..."""
    indices = np.arange(count, dtype=np.uint64) * np.uint64(step) + np.uint64(start)
    key = _splitmix64_reference(np.array([seed], dtype=np.uint64))[0]
    bits = _splitmix64_reference(key ^ indices)
    return (bits >> np.uint64(11)).astype(np.float64) * (1.0 / 9007199254740992.0)


def _shape_rule(shape, dtype, seed, **parameters):
    shape = int_entries(shape, "random", "shape")
    if any(d < 0 for d in shape):
        raise ShapeError(f"random: shape {shape} has a negative size")
    return shape


def _uniform_kernel(out, shape, dtype, seed, low, high):
    kernels.uniform(out, np.uint64(seed), low, high)


def _normal_kernel(out, shape, dtype, seed, mean, std):
    kernels.normal(out, np.uint64(seed), mean, std)


def _uniform_reference(shape, dtype, seed, low, high):
    size = math.prod(shape)
    return (low + (high - low) * unit_reference(seed, size)).reshape(shape).astype(dtype)


def _normal_reference(shape, dtype, seed, mean, std):
    size = math.prod(shape)
    u1 = 1.0 - unit_reference(seed, size, 0, 2)
    u2 = unit_reference(seed, size, 1, 2)
    return (mean + std * np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * np.pi * u2)).reshape(shape).astype(dtype)


def _attributes(**parameters):
    """The attributes every draw takes, and its own (low/high, mean/std): finite real numbers, as
    NumPy and PyTorch refuse a negative scale (std) and PyTorch a range with low > high."""
    return {"shape": attributes.Shape(), "dtype": attributes.DType(allowed=tuple(dtypes.FLOATS)),
            "seed": attributes.Seed(), **parameters}


_uniform = defop("uniform", shape=_shape_rule, kernel=_uniform_kernel, dtype=lambda **a: dtypes.as_dtype(a["dtype"]),
                 differentiable=False, family="random", reference=_uniform_reference, doc="Uniform draws in [low, high).",
                 samples=lambda: [Sample((), {"shape": (3, 4), "dtype": "float64", "seed": 1, "low": -1.0, "high": 2.0}),
                                  Sample((), {"shape": (5,), "dtype": "float32", "seed": 2, "low": 0.0, "high": 1.0})],
                 attrs=_attributes(low=attributes.Float(finite=True, at_most="high"), high=attributes.Float(finite=True)))
_normal = defop("normal", shape=_shape_rule, kernel=_normal_kernel, dtype=lambda **a: dtypes.as_dtype(a["dtype"]),
                differentiable=False, family="random", reference=_normal_reference, doc="Normal draws (Box-Muller).",
                samples=lambda: [Sample((), {"shape": (3, 4), "dtype": "float64", "seed": 1, "mean": 0.0, "std": 1.0}),
                                 Sample((), {"shape": (0, 2), "dtype": "float32", "seed": 2, "mean": 1.0, "std": 2.0})],
                attrs=_attributes(mean=attributes.Float(finite=True), std=attributes.Float(minimum=0.0, finite=True)))


def _settings(shape, dtype, seed, name):
    """The attributes as given (the declarations check them), with a seed derived when none is."""
    if seed is None:
        seed = default_seed(graph_of((), "random"), name or "random")
    return dict(shape=shape, dtype=dtype, seed=seed)


@public("random")
def uniform(shape, low=0.0, high=1.0, dtype="float64", seed=None, *, name=None):
    """Uniform draws in [low, high), reproducible for a given seed."""
    return _uniform(name=name, low=low, high=high, **_settings(shape, dtype, seed, name))


@public("random")
def normal(shape, mean=0.0, std=1.0, dtype="float64", seed=None, *, name=None):
    """Normal draws with the given mean and standard deviation, reproducible for a given seed."""
    return _normal(name=name, mean=mean, std=std, **_settings(shape, dtype, seed, name))
