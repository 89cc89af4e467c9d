"""Counter-based random numbers: element i of a draw depends only on (seed, i).

The same seed always gives the same array, on any thread and in any order,
which makes random ops reproducible and dropout's mask recomputable in its
gradient.
"""
import numpy as np
from numba import njit

JIT = dict(cache=True, nogil=True, error_model="numpy")


@njit(**JIT)
def splitmix64(value):
    z = value + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@njit(**JIT)
def unit(seed, index):
    """A float in [0, 1) from 53 random bits of hash(seed, index)."""
    bits = splitmix64(splitmix64(np.uint64(seed)) ^ np.uint64(index))
    return np.float64(bits >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@njit(**JIT)
def uniform(out, seed, low, high):
    flat = out.reshape(out.size)
    for i in range(flat.shape[0]):
        flat[i] = low + (high - low) * unit(seed, i)


@njit(**JIT)
def normal(out, seed, mean, std):
    """Box-Muller on two counter draws per element."""
    flat = out.reshape(out.size)
    for i in range(flat.shape[0]):
        u1 = 1.0 - unit(seed, 2 * i)
        u2 = unit(seed, 2 * i + 1)
        flat[i] = mean + std * np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * np.pi * u2)


@njit(**JIT)
def dropout(x, out, seed, rate):
    """out = x / (1 - rate) where the draw keeps the element, else 0 (x, out C-contiguous)."""
    flat = x.reshape(x.size)
    result = out.reshape(out.size)
    scale = 1.0 / (1.0 - rate)
    for i in range(flat.shape[0]):
        result[i] = flat[i] * scale if unit(seed, i) >= rate else 0.0
