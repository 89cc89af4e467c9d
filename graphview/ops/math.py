"""Element-wise math: arithmetic, transcendental functions, comparisons, where and cast.

Each op is one declaration: kernel, promotion, samples and NumPy reference; its gradient
rule is in graphview/gradients/math.py. Shapes broadcast as in NumPy (graphview.shapes.broadcast_shapes).
"""

import numpy as np

from graphview import attributes, dtypes
from graphview.registry import defop, public
from graphview.shapes import broadcast_shapes
from graphview.testing import Sample, elementwise_samples, transposed
from graphview_kernels import elementwise as kernels


# One shape rule per arity, with named inputs, so that building an op checks the
# number of inputs against the rule ("exp takes 1 input (x), got 2").
def _broadcast_unary(x):
    return broadcast_shapes(x)


def _broadcast_binary(x, y):
    return broadcast_shapes(x, y)


def _broadcast_ternary(condition, x, y):
    return broadcast_shapes(condition, x, y)


BROADCAST_RULES = {1: _broadcast_unary, 2: _broadcast_binary, 3: _broadcast_ternary}


def _arity(kernel):
    """The number of inputs of an element-wise kernel."""
    return kernel.arity


def elementwise(name, kernel, *, reference, promote="same", accepts=dtypes.NUMERIC,
                result=None, samples=None, namespace="math", doc="", differentiable=None):
    return defop(
        name, shape=BROADCAST_RULES[_arity(kernel)], kernel=kernel, promote=promote, accepts=accepts,
        dtype=(lambda *kinds, **attrs: result) if result is not None else None,
        samples=samples, reference=reference, family="elementwise", namespace=namespace, doc=doc,
        differentiable=differentiable)


def unary_samples(**options):
    return lambda: elementwise_samples(1, **options)


def binary_samples(**options):
    return lambda: elementwise_samples(2, **options)


def integer_samples(arity):
    r = np.random.default_rng(7)
    return [Sample(tuple(r.integers(-5, 6, size=(3, 4)).astype(d) for _ in range(arity)), label=f"{np.dtype(d).name}")
            for d in (np.int32, np.int64)]


def with_integers(samples, arity):
    return lambda: samples() + integer_samples(arity)


add = elementwise("add", kernels.add, reference=np.add, samples=with_integers(binary_samples(), 2),
                  doc="x + y, broadcasting.")
sub = elementwise("sub", kernels.sub, reference=np.subtract, samples=with_integers(binary_samples(), 2),
                  doc="x - y, broadcasting.")
mul = elementwise("mul", kernels.mul, reference=np.multiply, samples=with_integers(binary_samples(), 2),
                  doc="x * y, broadcasting.")
div = elementwise("div", kernels.div, reference=np.true_divide, promote="float",
                  samples=binary_samples(positive=True), doc="x / y (true division; integers give float64).")
pow = elementwise("pow", kernels.pow, reference=np.power, promote="float",
                  samples=binary_samples(positive=True), doc="x ** y, in floating point.")
maximum = elementwise("maximum", kernels.maximum, reference=np.maximum,
                      samples=with_integers(binary_samples(), 2), doc="Element-wise maximum; NaN propagates.")
minimum = elementwise("minimum", kernels.minimum, reference=np.minimum,
                      samples=with_integers(binary_samples(), 2), doc="Element-wise minimum; NaN propagates.")

neg = elementwise("neg", kernels.neg, reference=np.negative, samples=with_integers(unary_samples(), 1), doc="-x.")
abs = elementwise("abs", kernels.abs, reference=np.abs, samples=with_integers(unary_samples(), 1), doc="|x|.")
square = elementwise("square", kernels.square, reference=np.square, samples=with_integers(unary_samples(), 1),
                     doc="x * x.")
sign = elementwise("sign", kernels.sign, reference=np.sign, samples=with_integers(unary_samples(), 1),
                   doc="-1, 0 or 1 by the sign of x; its gradient is zero.")
reciprocal = elementwise("reciprocal", kernels.reciprocal, reference=np.reciprocal, promote="float",
                         samples=unary_samples(positive=True), doc="1 / x, in floating point.")
exp = elementwise("exp", kernels.exp, reference=np.exp, promote="float", samples=unary_samples(), doc="e ** x.")
log = elementwise("log", kernels.log, reference=np.log, promote="float", samples=unary_samples(positive=True),
                  doc="Natural logarithm.")
sqrt = elementwise("sqrt", kernels.sqrt, reference=np.sqrt, promote="float", samples=unary_samples(positive=True),
                   doc="Square root.")
sin = elementwise("sin", kernels.sin, reference=np.sin, promote="float", samples=unary_samples(), doc="Sine.")
cos = elementwise("cos", kernels.cos, reference=np.cos, promote="float", samples=unary_samples(), doc="Cosine.")
tanh = elementwise("tanh", kernels.tanh, reference=np.tanh, promote="float", namespace=("math", "nn"),
                   samples=unary_samples(), doc="Hyperbolic tangent.")


def _compare(name, kernel, reference, doc):
    return elementwise(name, kernel, reference=reference, accepts=dtypes.ALL, result=dtypes.BOOL,
                       samples=with_integers(binary_samples(), 2), doc=doc, differentiable=False)


eq = _compare("eq", kernels.eq, np.equal, "x == y, as bool.")
ne = _compare("ne", kernels.ne, np.not_equal, "x != y, as bool.")
lt = _compare("lt", kernels.lt, np.less, "x < y, as bool.")
le = _compare("le", kernels.le, np.less_equal, "x <= y, as bool.")
gt = _compare("gt", kernels.gt, np.greater, "x > y, as bool.")
ge = _compare("ge", kernels.ge, np.greater_equal, "x >= y, as bool.")


def _where_samples():
    r = np.random.default_rng(3)
    samples = []
    for dtype in (np.float64, np.float32):
        condition = r.random((3, 4)) > 0.5
        samples.append(Sample((condition, r.random((3, 4)).astype(dtype), r.random((4,)).astype(dtype)),
                              label=f"broadcast {np.dtype(dtype).name}", constant_inputs=(0,)))
        samples.append(Sample((condition.T, transposed(r.random((4, 3)).astype(dtype)), 0.5),
                              label=f"transposed, scalar {np.dtype(dtype).name}", constant_inputs=(0,)))
    samples.append(Sample((np.zeros((0, 2), bool), np.zeros((0, 2)), np.zeros((0, 2))), label="empty", constant_inputs=(0,)))
    return samples


def _where_dtype(condition, x, y):
    if condition != dtypes.BOOL:
        raise dtypes.DTypeError(f"the condition has dtype {condition.name}; it must be bool")
    return x


where = defop("where", shape=_broadcast_ternary, kernel=kernels.where, dtype=_where_dtype,
              promote="same", promote_inputs=(1, 2), accepts=dtypes.ALL,
              samples=_where_samples, reference=np.where, family="elementwise", namespace="math",
              doc="x where condition is true, else y, broadcasting.")


def _cast_kernel(x, out, dtype):
    kernels.CASTS[out.dtype](x, out)


def _cast_samples():
    r = np.random.default_rng(5)
    values = r.uniform(-3, 3, size=(3, 4))
    samples = [Sample((values.astype(source),), {"dtype": target}, label=f"{np.dtype(source).name}->{target}")
               for source in (np.float64, np.float32, np.int32, np.int64, np.bool_)
               for target in ("float64", "float32", "int32", "int64", "bool")]
    samples.append(Sample((values.T,), {"dtype": "float32"}, label="transposed"))
    return samples


_cast = defop("cast", shape=lambda x, dtype: x, dtype=lambda x, dtype: dtypes.as_dtype(dtype, "cast"),
              kernel=_cast_kernel, accepts=dtypes.ALL, samples=_cast_samples,
              reference=lambda x, dtype: x.astype(dtype), family="elementwise", attrs={"dtype": attributes.DType()},
              doc="x converted to dtype (floats to integers truncate toward zero).")


@public("math")
def cast(x, dtype, *, name=None):
    """x converted to ``dtype``."""
    return _cast(x, name=name, dtype=dtype)   # the DType declaration checks and names it
