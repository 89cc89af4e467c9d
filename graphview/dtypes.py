"""The dtypes graphview supports and its promotion rules, in one place.

Promotion follows NumPy's ``np.result_type`` over the five supported dtypes
(so int32 with float32 gives float64, as in NumPy). Python scalars are *weak*:
they take the dtype of the variable they meet when its kind allows it
(``x_float32 + 1.5`` stays float32, ``x_int32 + 2`` stays int32), as in
NumPy 2 (NEP 50), JAX and PyTorch. A scalar given for an input the op does not
promote with the others (labels, ids, lengths: not in its ``promote_inputs``)
keeps its own dtype instead (``own_scalar_dtype``: int64 for a Python int).
Ops that need floating point (exp, div, ...) promote integer and bool inputs to float64, as NumPy does. Nothing else is
cast implicitly, and every implicit cast is an explicit ``cast`` node in the
graph, visible in ``g.summary()``.
"""
import numpy as np

from graphview.errors import DTypeError

FLOAT32 = np.dtype(np.float32)
FLOAT64 = np.dtype(np.float64)
INT32 = np.dtype(np.int32)
INT64 = np.dtype(np.int64)
BOOL = np.dtype(np.bool_)

FLOATS = (FLOAT32, FLOAT64)
INTS = (INT32, INT64)
NUMERIC = INTS + FLOATS
ALL = (BOOL,) + NUMERIC

CATEGORY_NAMES = {FLOATS: "floating point", INTS: "integer", NUMERIC: "numeric", ALL: "supported"}


def as_dtype(value, what="dtype"):
    """Normalize ``value`` to one of the supported NumPy dtypes."""
    try:
        dtype = np.dtype(value)
    except TypeError as error:
        raise DTypeError(f"{what}: {value!r} is not a dtype") from error
    if dtype not in ALL:
        names = ", ".join(d.name for d in ALL)
        raise DTypeError(f"{what}: dtype {dtype.name} is not supported; use one of {names}")
    return dtype


def is_float(dtype):
    return np.dtype(dtype) in FLOATS


def is_integer(dtype):
    return np.dtype(dtype) in INTS


def result_type(*dtypes):
    """The common dtype of ``dtypes`` under NumPy's promotion rules."""
    return np.result_type(*dtypes)


def float_result(dtype):
    """The dtype a floating-point op computes in for an input of ``dtype``."""
    return dtype if dtype in FLOATS else FLOAT64


def weak_scalar_dtype(value, partner):
    """The dtype a Python scalar takes next to a variable of dtype ``partner``."""
    if isinstance(value, (bool, np.bool_)):
        return BOOL
    if isinstance(value, (int, np.integer)):
        return partner if partner in NUMERIC else INT64
    if isinstance(value, (float, np.floating)):
        return partner if partner in FLOATS else FLOAT64
    raise DTypeError(f"{type(value).__name__} {value!r} is not a number")


def own_scalar_dtype(value):
    """The dtype a scalar keeps where it is not promoted with other inputs (an op's labels, ids or lengths):
    a NumPy scalar its own (when supported), a Python bool, int or float bool, int64 or float64."""
    if isinstance(value, np.generic) and value.dtype in ALL:
        return value.dtype
    return weak_scalar_dtype(value, None)


def check_category(op, name, dtype, category):
    """Raise DTypeError unless ``dtype`` belongs to ``category``."""
    if dtype not in category:
        kind = CATEGORY_NAMES.get(category, "different")
        article = "an" if kind[0] in "aeiou" else "a"
        raise DTypeError(
            f"{op}: input {name} has dtype {dtype.name}, but {op} needs {article} {kind} dtype "
            f"({', '.join(d.name for d in category)})")
