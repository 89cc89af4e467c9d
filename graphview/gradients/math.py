"""Gradient rules of the element-wise math ops (graphview/ops/math.py)."""
from graphview import dtypes
from graphview.gradients.unbroadcast import unbroadcast
from graphview.ops.math import (abs as absolute, add, cast, cos, div, eq, exp, ge, gt, le, log, maximum, minimum, mul,
                                neg, pow as power, reciprocal, sign, sin, sqrt, square, sub, tanh, where)
from graphview.registry import defvjp

defvjp(add, lambda g, out, x, y: (unbroadcast(g, x, out), unbroadcast(g, y, out)))
defvjp(sub, lambda g, out, x, y: (unbroadcast(g, x, out), unbroadcast(neg(g), y, out)))
defvjp(mul, lambda g, out, x, y: (unbroadcast(mul(g, y), x, out), unbroadcast(mul(g, x), y, out)))
defvjp(div, lambda g, out, x, y: (unbroadcast(div(g, y), x, out), unbroadcast(neg(div(mul(g, out), y)), y, out)))
defvjp(power, lambda g, out, x, y: (
    # y * x**(y-1), and 0 where y == 0 (x**0 is constant; PyTorch's convention), even at x == 0.
    unbroadcast(mul(g, where(eq(y, 0.0), 0.0, mul(y, power(x, sub(y, 1.0))))), x, out),
    unbroadcast(mul(g, mul(out, log(where(gt(x, 0.0), x, 1.0)))), y, out)))
defvjp(maximum, lambda g, out, x, y: (unbroadcast(where(ge(x, y), g, 0.0), x, out),
                                      unbroadcast(where(ge(x, y), 0.0, g), y, out)))
defvjp(minimum, lambda g, out, x, y: (unbroadcast(where(le(x, y), g, 0.0), x, out),
                                      unbroadcast(where(le(x, y), 0.0, g), y, out)))

defvjp(neg, lambda g, out, x: (neg(g),))
defvjp(absolute, lambda g, out, x: (mul(g, sign(x)),))
defvjp(square, lambda g, out, x: (mul(g, mul(x, 2.0)),))
defvjp(sign, lambda g, out, x: (None,))
defvjp(reciprocal, lambda g, out, x: (neg(mul(g, square(out))),))
defvjp(exp, lambda g, out, x: (mul(g, out),))
defvjp(log, lambda g, out, x: (div(g, x),))
defvjp(sqrt, lambda g, out, x: (div(g, mul(out, 2.0)),))
defvjp(sin, lambda g, out, x: (mul(g, cos(x)),))
defvjp(cos, lambda g, out, x: (neg(mul(g, sin(x))),))
defvjp(tanh, lambda g, out, x: (mul(g, sub(1.0, square(out))),))

defvjp(where, lambda g, out, c, x, y: (None, unbroadcast(where(c, g, 0.0), x, out),
                                        unbroadcast(where(c, 0.0, g), y, out)))


def _cast(g, out, x, dtype):
    return (cast(g, x.dtype) if dtypes.is_float(x.dtype) and dtypes.is_float(out.dtype) else None,)


defvjp("cast", _cast)
