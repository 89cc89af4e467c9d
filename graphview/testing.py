"""Sample inputs every op declares, used by the generic op tests and by gradient checks."""
from dataclasses import dataclass, field

import numpy as np


@dataclass
class Sample:
    """One test case of an op: its inputs (arrays or Python scalars) and attributes."""
    inputs: tuple
    attrs: dict = field(default_factory=dict)
    label: str = ""
    # Inputs the gradient check must not perturb (integer labels, masks, ...).
    constant_inputs: tuple = ()
    # False where the op's derivative is discontinuous near these inputs.
    gradcheck: bool = True


def rng(seed=0):
    return np.random.default_rng(seed)


def transposed(array):
    """The same values laid out as a transpose (F-contiguous), to test strided inputs."""
    return np.ascontiguousarray(array.T).T


def strided(array):
    """The same values as a view with stride 2 on the first axis."""
    doubled = np.repeat(array, 2, axis=0)
    return doubled[::2]


def elementwise_samples(arity, low=-2.0, high=2.0, dtypes=(np.float64, np.float32), positive=False):
    """Same shape, broadcasting, Python scalars, 0-size, transposed and strided inputs."""
    r = rng(arity)

    def uniform(shape, dtype):
        values = r.uniform(low, high, size=shape)
        if positive:
            values = np.abs(values) + 0.5
        return values.astype(dtype)

    samples = []
    for dtype in dtypes:
        name = np.dtype(dtype).name
        samples.append(Sample(tuple(uniform((3, 4), dtype) for _ in range(arity)), label=f"same shape {name}"))
        if arity > 1:
            samples.append(Sample((uniform((3, 4), dtype),) + tuple(uniform((4,), dtype) for _ in range(arity - 1)),
                                  label=f"broadcast row {name}"))
            samples.append(Sample((uniform((2, 1, 3), dtype),) + tuple(uniform((4, 3), dtype) for _ in range(arity - 1)),
                                  label=f"broadcast both {name}"))
            scalar = float(uniform((), np.float64))
            samples.append(Sample((uniform((5,), dtype),) + (scalar,) * (arity - 1), label=f"python scalar {name}"))
        samples.append(Sample(tuple(uniform((0, 3), dtype) for _ in range(arity)), label=f"empty {name}"))
        samples.append(Sample(tuple(transposed(uniform((4, 3), dtype)) for _ in range(arity)), label=f"transposed {name}"))
        samples.append(Sample(tuple(strided(uniform((3, 2), dtype)) for _ in range(arity)), label=f"strided {name}"))
    samples.append(Sample(tuple(uniform((), np.float64) for _ in range(arity)), label="rank 0"))
    return samples
