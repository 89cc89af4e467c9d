"""Dimension tags: ``gv.Dim``, the global ``gv.batch_dim`` and memoized dim arithmetic.

Two dims are equal only when they are the same object, were explicitly declared
the same (``a.declare_same_as(b)``), or are derived by the same arithmetic from
equal dims. Names are for people: two dims called "time" are different dims
(matching by name was RETURNN's long-standing source of bugs), and messages tell
them apart: the second dim made with a name prints as ``Dim('time'#2, None)``.

Arithmetic is memoized (``a * b is a * b``) and non-commutative (``a * b != b * a``:
merging h then w is not merging w then h). Simple identities are undone:
``(a * b) // b is a``, ``(a + b) - b is a``, ``a * 1 is a``, ``a + 0 is a``. Integer
offsets fold and commute, because a constant has no identity to keep apart:
``(1 + x) - 1 is x`` and ``x + 1 + 1 is x + 2``.

Which graph values carry which dims, and the per-batch-entry lengths of dynamic
dims, live in a side table per graph: see :mod:`graphview.layouts.table` (saved in graph files by
:mod:`graphview.layouts.dimfile`).
"""
import threading

from graphview.errors import GraphviewError, ShapeError

KINDS = (None, "batch", "spatial", "feature")

# How many dims of each name were made: the n-th dim called "time" prints as time#2, time#3, ... so two
# distinct dims never read the same in a message; the first keeps its bare name.
_ORDINALS = {}
_ORDINALS_LOCK = threading.Lock()


class DimError(GraphviewError, ValueError):
    """A dim used where it does not fit: unknown axis, ambiguous axis, mismatched sizes."""


class Dim:
    """A dimension tag: a name, a static size (or None for dynamic) and a kind."""

    __slots__ = ("name", "size", "kind", "_same", "_derived", "_ordinal", "__weakref__")

    def __init__(self, name, size=None, kind=None):
        if not isinstance(name, str) or not name:
            raise DimError(f"Dim: the name must be a non-empty string, not {name!r}")
        if size is not None:
            if isinstance(size, bool) or not hasattr(size, "__index__") or size.__index__() < 0:
                raise DimError(f"Dim {name!r}: size must be None (dynamic) or an int >= 0, not {size!r}")
            size = size.__index__()
        if kind not in KINDS:
            raise DimError(f"Dim {name!r}: kind must be one of {KINDS}, not {kind!r}")
        self.name = name
        self.size = size
        self.kind = kind
        self._same = None      # the dim this one was declared the same as (union-find parent)
        self._derived = None   # (operation, left, right) for dims made by arithmetic
        with _ORDINALS_LOCK:
            self._ordinal = _ORDINALS[name] = _ORDINALS.get(name, 0) + 1

    # --- identity ------------------------------------------------------------------

    def canonical(self):
        """The representative of the dims declared the same as this one."""
        dim = self
        while dim._same is not None:
            dim = dim._same
        node = self
        while node._same is not None and node._same is not dim:
            node._same, node = dim, node._same
        return dim

    def declare_same_as(self, other):
        """Declare that ``self`` and ``other`` are one dim from now on (sizes and kinds must agree)."""
        if not isinstance(other, Dim):
            raise DimError(f"declare_same_as: {other!r} is not a gv.Dim")
        if self.size != other.size:
            raise DimError(f"declare_same_as: {self!r} has size {_size(self.size)} but {other!r} has size "
                           f"{_size(other.size)}; only dims of the same size can be the same")
        if self.kind is not None and other.kind is not None and self.kind != other.kind:
            raise DimError(f"declare_same_as: {self!r} is a {self.kind} dim but {other!r} is a {other.kind} dim")
        mine, theirs = self.canonical(), other.canonical()
        if mine is not theirs:
            mine._same = theirs
        return self

    def __eq__(self, other):
        if self is other:
            return True
        if not isinstance(other, Dim):
            return NotImplemented
        mine, theirs = self.canonical(), other.canonical()
        if mine is theirs:
            return True
        if mine._derived is None or theirs._derived is None:
            return False
        return mine._derived[0] == theirs._derived[0] and all(
            _same_operand(a, b) for a, b in zip(mine._derived[1:], theirs._derived[1:]))

    def __ne__(self, other):
        result = self.__eq__(other)
        return result if result is NotImplemented else not result

    def __hash__(self):
        # Equal dims always have equal sizes (declare_same_as checks it), so hashing
        # the size stays valid when dims are declared the same after being hashed.
        return hash(("graphview.Dim", self.size))

    # --- description -----------------------------------------------------------------

    @property
    def is_dynamic(self):
        return self.size is None

    @property
    def derived_from(self):
        """``(operation, left, right)`` for a dim made by arithmetic, else None."""
        return self._derived

    def __repr__(self):
        kind = f", kind={self.kind!r}" if self.kind else ""
        number = f"#{self._ordinal}" if self._ordinal > 1 else ""
        return f"Dim({self.name!r}{number}, {self.size!r}{kind})"

    def __str__(self):
        return self.name if self._ordinal == 1 else f"{self.name}#{self._ordinal}"

    def __index__(self):
        raise DimError(f"{self!r} is a dim, not an axis number; pass it to an op's axis argument, "
                       "which finds its position in the input")

    def __bool__(self):
        return True

    # --- arithmetic (memoized, non-commutative) ---------------------------------------

    def __add__(self, other):
        return add(self, other)

    def __radd__(self, other):
        return add(other, self)

    def __sub__(self, other):
        return sub(self, other)

    def __rsub__(self, other):
        return sub(other, self)

    def __mul__(self, other):
        return mul(self, other)

    def __rmul__(self, other):
        return mul(other, self)

    def __floordiv__(self, other):
        return floordiv(self, other)

    def __rfloordiv__(self, other):
        return floordiv(other, self)


batch_dim = Dim("batch", kind="batch")


def _size(size):
    return "dynamic" if size is None else str(size)


def _same_operand(a, b):
    if isinstance(a, Dim) and isinstance(b, Dim):
        return a == b
    if isinstance(a, Dim) or isinstance(b, Dim):
        return False
    return a == b


_MEMO = {}
_LOCK = threading.Lock()
SYMBOLS = {"add": "+", "sub": "-", "mul": "*", "floordiv": "//"}


def _key(value):
    return ("dim", id(value.canonical())) if isinstance(value, Dim) else ("int", value)


def _check_operand(operation, value):
    if isinstance(value, Dim):
        return value
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise DimError(f"dim {SYMBOLS[operation]}: {value!r} is neither a gv.Dim nor an int")
    return value.__index__()


def _derive(operation, left, right, size):
    """The memoized dim ``left <operation> right``."""
    key = (operation, _key(left), _key(right))
    with _LOCK:
        found = _MEMO.get(key)
        if found is not None:
            return found
        symbol = SYMBOLS[operation]
        names = [f"({v.name})" if isinstance(v, Dim) and v._derived else str(v) for v in (left, right)]
        dim = Dim(f"{names[0]}{symbol}{names[1]}", size)
        dim._derived = (operation, left, right)
        _MEMO[key] = dim
        return dim


def _static(*values):
    sizes = [v.size if isinstance(v, Dim) else v for v in values]
    return None if None in sizes else sizes


def add(left, right):
    """``left + right``: concatenation of two axes (or an axis padded by an int)."""
    left, right = _check_operand("add", left), _check_operand("add", right)
    if not isinstance(left, Dim) and not isinstance(right, Dim):
        return left + right
    if not isinstance(left, Dim):
        left, right = right, left   # integer offsets commute: 1 + x is x + 1
    if not isinstance(right, Dim):
        if left._derived and left._derived[0] == "add" and not isinstance(left._derived[2], Dim):
            base, offset = left._derived[1], left._derived[2]
            return add(base, offset + right)
        if right == 0:
            return left
        if left.size is not None and left.size + right < 0:
            raise DimError(f"{left!r} + {right} would have the negative size {left.size + right}")
        return _derive("add", left, right, None if left.size is None else left.size + right)
    if left == right:
        return mul(2, left)   # a + a is 2 * a (but not a * 2)
    sizes = _static(left, right)
    return _derive("add", left, right, None if sizes is None else sizes[0] + sizes[1])


def sub(left, right):
    """``left - right``: the first part of ``left`` once ``right`` is removed from its end."""
    left, right = _check_operand("sub", left), _check_operand("sub", right)
    if not isinstance(right, Dim):
        return add(left, -right) if isinstance(left, Dim) else left - right
    if isinstance(left, Dim) and left.canonical()._derived:
        operation, a, b = left.canonical()._derived
        if operation == "add" and isinstance(b, Dim) and b == right:
            return a
    if isinstance(left, Dim) and left == right:
        raise DimError(f"{left!r} - {right!r} would be an empty dim")
    sizes = _static(left, right)
    if sizes is not None and sizes[0] < sizes[1]:
        raise DimError(f"{left!r} - {right!r} would have the negative size {sizes[0] - sizes[1]}")
    return _derive("sub", left, right, None if sizes is None else sizes[0] - sizes[1])


def mul(left, right):
    """``left * right``: two axes merged, ``left`` outer and ``right`` inner."""
    left, right = _check_operand("mul", left), _check_operand("mul", right)
    if not isinstance(left, Dim) and not isinstance(right, Dim):
        return left * right
    if isinstance(right, int) and right == 1:
        return left
    if isinstance(left, int) and left == 1:
        return right
    sizes = _static(left, right)
    return _derive("mul", left, right, None if sizes is None else sizes[0] * sizes[1])


def floordiv(left, right):
    """``left // right``: the outer part of ``left`` once the inner ``right`` is split off."""
    left, right = _check_operand("floordiv", left), _check_operand("floordiv", right)
    if not isinstance(left, Dim) and not isinstance(right, Dim):
        return left // right
    if isinstance(right, int) and right == 1:
        return left
    if isinstance(left, Dim) and left.canonical()._derived:
        operation, a, b = left.canonical()._derived
        if operation == "mul" and _same_operand(b, right):
            return a
    sizes = _static(left, right)
    if sizes is not None:
        if sizes[1] == 0 or sizes[0] % sizes[1]:
            raise ShapeError(f"{left!r} // {right!r}: size {sizes[0]} is not a multiple of {sizes[1]}")
        return _derive("floordiv", left, right, sizes[0] // sizes[1])
    return _derive("floordiv", left, right, None)


def product(dims):
    """``((d0 * d1) * d2) ...``: the dim of several axes merged in order."""
    dims = list(dims)
    if not dims:
        raise DimError("product of no dims")
    result = dims[0]
    for dim in dims[1:]:
        result = mul(result, dim)
    return result


def factors(dim, count):
    """The ``count`` dims whose product (in order) is ``dim``, or None when it was not made so."""
    if count == 1:
        return (dim,)
    derived = dim.canonical()._derived if isinstance(dim, Dim) else None
    if not derived or derived[0] != "mul":
        return None
    inner = factors(derived[1], count - 1)
    return None if inner is None else inner + (derived[2],)
