"""Dimension tags: ``gv.Dim``, the global ``gv.batch_dim`` and memoized dim arithmetic.

Two dims are equal only when they are the same object, were explicitly declared
the same (``a.declare_same_as(b)``), or are derived by the same arithmetic from
equal dims. Names are for people: two dims called "time" are different dims
(matching by name was RETURNN's long-standing source of bugs), and messages tell
them apart: the second dim made with a name prints as ``Dim('time'#2, None)``.

Arithmetic is memoized (``a * b is a * b``) and non-commutative (``a * b != b * a``:
merging h then w is not merging w then h). RETURNN's identities hold, as identity, because
a dim made by ``+`` or ``*`` is memoized by its normal form (a sum of product terms, see
``_form``): ``(a + b) * c is a * c + b * c``, ``a * b // b is a``, ``2 * a is a + a`` (but
``2 * a != a * 2``), ``(a + b) - b is a``, ``a * 1 is a``, ``a + 0 is a``. Integer offsets
fold and commute, because a constant has no identity to keep apart: ``(1 + x) - 1 is x``
and ``x + 1 + 1 is x + 2``.

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

    __slots__ = ("name", "size", "kind", "_same", "_derived", "_form", "_ordinal", "__weakref__")

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
        self._form = None      # the normal form of a dim made by + or * (see _form below)
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
        if mine._form is not None or theirs._form is not None:
            return mine._form is not None and theirs._form is not None and _forms_equal(mine._form, theirs._form)
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
# 2 * (a + b) is (a + b) + (a + b) = a + b + a + b, written out while it stays this short.
_REPEAT_LIMIT = 64


def _key(value):
    return ("dim", id(value.canonical())) if isinstance(value, Dim) else ("int", value)


def _check_operand(operation, value):
    if isinstance(value, Dim):
        return value
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise DimError(f"dim {SYMBOLS[operation]}: {value!r} is neither a gv.Dim nor an int")
    return value.__index__()


# --- normal forms (RETURNN's linear terms of product terms) -----------------------------------------
# A derived dim's form is (terms, constant): a sum, in order, of product terms plus an integer offset
# (offsets commute: a constant has no identity to keep apart). A term is a tuple of factors, outer
# first: ints (adjacent ones folded, never 1) and atoms (dims not made by + or *, or a sum kept whole
# as an inner factor). Arithmetic works on forms and memoizes by the form, so every way of writing one
# form gives the same object: (a + b) * c is a * c + b * c, a + a is 2 * a, (a * b) // b is a.

def _form(value):
    if not isinstance(value, Dim):
        return (), value
    dim = value.canonical()
    return dim._form if dim._form is not None else (((dim,),), 0)


def _term_key(term):
    return tuple(_key(factor) for factor in term)


def _form_key(form):
    return tuple(_term_key(t) for t in form[0]), form[1]


def _times(left, right):
    """Two product terms merged (left outer), adjacent ints folded."""
    if left and right and isinstance(left[-1], int) and isinstance(right[0], int):
        joined = left[-1] * right[0]
        return _times(left[:-1] + ((joined,) if joined != 1 else ()), right[1:])
    return tuple(left) + tuple(right)


def _split_coefficient(term):
    return (term[0], term[1:]) if term and isinstance(term[0], int) else (1, term)


def _append(terms, term):
    """``terms + term``, an equal neighbour absorbed as a coefficient (a + a is 2 * a)."""
    if terms:
        c1, rest1 = _split_coefficient(terms[-1])
        c2, rest2 = _split_coefficient(term)
        if rest1 and _term_key(rest1) == _term_key(rest2):
            return terms[:-1] + ((c1 + c2,) + rest1,)
    return terms + (term,)


def _sum(*forms):
    terms, constant = (), 0
    for more, offset in forms:
        for term in more:
            terms = _append(terms, term)
        constant += offset
    return terms, constant


def _size_of(form):
    total = form[1]
    for term in form[0]:
        size = 1
        for factor in term:
            factor_size = factor if isinstance(factor, int) else factor.size
            if factor_size is None:
                return None
            size *= factor_size
        total += size
    return total


def _terms_equal(a, b):
    return len(a) == len(b) and all(_same_operand(x, y) for x, y in zip(a, b))


def _forms_equal(a, b):
    return a[1] == b[1] and len(a[0]) == len(b[0]) and all(_terms_equal(x, y) for x, y in zip(a[0], b[0]))


def _name(operation, left, right):
    names = [f"({v.name})" if isinstance(v, Dim) and v._derived else str(v) for v in (left, right)]
    return f"{names[0]}{SYMBOLS[operation]}{names[1]}"


def _made(form, operation, left, right):
    """The dim (or int) whose form is ``form``, made once; ``(operation, left, right)`` is how it was
    first written (its name, and what graph files record)."""
    terms, constant = form
    if not terms:
        return constant
    if constant == 0 and len(terms) == 1 and len(terms[0]) == 1 and isinstance(terms[0][0], Dim):
        return terms[0][0]
    size = _size_of(form)
    if size is not None and size < 0:
        raise DimError(f"{left!r} {SYMBOLS[operation]} {right!r} would have the negative size {size}")
    key = ("form", _form_key(form))
    with _LOCK:
        found = _MEMO.get(key)
        if found is None:
            found = Dim(_name(operation, left, right), size)
            found._derived = (operation, left, right)
            found._form = form
            _MEMO[key] = found
        return found


def _derive(operation, left, right, size):
    """The memoized opaque dim ``left <operation> right`` (a - b, a // b that no identity undoes)."""
    key = (operation, _key(left), _key(right))
    with _LOCK:
        found = _MEMO.get(key)
        if found is not None:
            return found
        dim = Dim(_name(operation, left, right), size)
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
    if isinstance(left, Dim) and isinstance(right, Dim):
        derived = left.canonical()._derived
        if derived and derived[0] == "sub" and left.canonical()._form is None and derived[2] == right:
            return derived[1]   # (a - b) + b is a
    form = _sum(_form(left), _form(right))
    size = _size_of(form)
    if size is not None and size < 0:
        raise DimError(f"{left!r} + {right!r} would have the negative size {size}")
    return _made(form, "add", left, right)


def sub(left, right):
    """``left - right``: the first part of ``left`` once ``right`` is removed from its end."""
    left, right = _check_operand("sub", left), _check_operand("sub", right)
    if not isinstance(right, Dim):
        return add(left, -right) if isinstance(left, Dim) else left - right
    if isinstance(left, Dim) and left == right:
        raise DimError(f"{left!r} - {right!r} would be an empty dim")
    (terms, constant), (minus, offset) = _form(left), _form(right)
    rest, count = None, len(minus)
    # right's terms end left's, its first one possibly absorbed into a coefficient (p + (p + q) is 2p + q)
    if minus and len(terms) >= count and _terms_equal_all(terms[len(terms) - count + 1:], minus[1:]):
        head = terms[:len(terms) - count + 1]
        c1, body1 = _split_coefficient(head[-1])
        c2, body2 = _split_coefficient(minus[0])
        if body1 and _terms_equal(body1, body2) and c1 >= c2:
            rest = head[:-1] + ((((c1 - c2,) if c1 - c2 > 1 else ()) + body1,) if c1 > c2 else ())
    if rest is not None and constant >= offset and (rest or constant > offset):
        return _made((rest, constant - offset), "sub", left, right)
    sizes = _static(left, right)
    if sizes is not None and sizes[0] < sizes[1]:
        raise DimError(f"{left!r} - {right!r} would have the negative size {sizes[0] - sizes[1]}")
    return _derive("sub", left, right, None if sizes is None else sizes[0] - sizes[1])


def _terms_equal_all(a, b):
    return all(_terms_equal(x, y) for x, y in zip(a, b))


def _repeated(count, form):
    """``count * form`` written out as the sum repeated, or None when that would be long."""
    if count < 0 or count * max(1, len(form[0])) > _REPEAT_LIMIT:
        return None
    return _sum(*([form] * count)) if count else ((), 0)


def mul(left, right):
    """``left * right``: two axes merged, ``left`` outer and ``right`` inner.

    A sum on the left distributes (``(a + b) * c`` is ``a * c + b * c``: the blocks of a merged
    concatenation are the concatenated merges); a sum on the right is kept whole as the inner factor,
    except after an int, which repeats it (``2 * (a + b)`` is ``(a + b) + (a + b)``).
    """
    left, right = _check_operand("mul", left), _check_operand("mul", right)
    if not isinstance(left, Dim) and not isinstance(right, Dim):
        return left * right
    if isinstance(right, int) and right == 1:
        return left
    if isinstance(left, int) and left == 1:
        return right
    (terms, constant), right_form = _form(left), _form(right)
    if isinstance(right, int):
        inner = (right,)
    elif len(right_form[0]) == 1 and right_form[1] == 0:
        inner = right_form[0][0]
    else:
        inner = (right.canonical(),)
    pieces = [((_times(term, inner),), 0) for term in terms]
    if constant:
        if isinstance(right, Dim) and inner == (right.canonical(),):
            repeated = _repeated(constant, right_form)
            pieces.append(repeated if repeated is not None else (((constant,) + inner,), 0))
        elif all(isinstance(factor, int) for factor in inner):
            pieces.append(((), constant * _int_product(inner)))
        else:
            pieces.append(((_times((constant,) if constant != 1 else (), inner),), 0))
    return _made(_sum(*pieces), "mul", left, right)


def _int_product(factors):
    result = 1
    for factor in factors:
        result *= factor
    return result


def floordiv(left, right):
    """``left // right``: the outer part of ``left`` once the inner ``right`` is split off."""
    left, right = _check_operand("floordiv", left), _check_operand("floordiv", right)
    if not isinstance(left, Dim) and not isinstance(right, Dim):
        return left // right
    if isinstance(right, int) and right == 1:
        return left
    if isinstance(left, Dim):
        outer = _divided(_form(left), right)
        if outer is not None:
            return _made(outer, "floordiv", left, right)
    sizes = _static(left, right)
    if sizes is not None:
        if sizes[1] == 0 or sizes[0] % sizes[1]:
            raise ShapeError(f"{left!r} // {right!r}: size {sizes[0]} is not a multiple of {sizes[1]}")
        return _derive("floordiv", left, right, sizes[0] // sizes[1])
    return _derive("floordiv", left, right, None)


def _divided(form, right):
    """``form`` with the inner factor ``right`` taken off every term, or None when some term does not
    end with it."""
    terms, constant = form
    if isinstance(right, int):
        if right <= 0 or constant % right:
            return None
        result = []
        for term in terms:
            if not term or not isinstance(term[-1], int) or term[-1] % right:
                return None
            last = term[-1] // right
            result.append(term[:-1] + ((last,) if last != 1 else ()))
        return (tuple(result), constant // right) if all(result) else None
    right_form = _form(right)
    if constant:
        return None
    if len(right_form[0]) == 1 and right_form[1] == 0:
        inner = right_form[0][0]
    else:
        inner = (right.canonical(),)
    result = []
    for term in terms:
        if len(term) <= len(inner) or not _terms_equal(term[len(term) - len(inner):], inner):
            return None
        result.append(term[:len(term) - len(inner)])
    return _sum(*[((t,), 0) if not all(isinstance(f, int) for f in t) else ((), _int_product(t))
                  for t in result])


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
        return (dim,) if isinstance(dim, Dim) else None
    if not isinstance(dim, Dim) or dim.canonical()._form is None:
        return None
    terms, constant = dim.canonical()._form
    if constant or not terms or not all(len(term) >= 2 or len(terms) > 1 for term in terms):
        return None
    inner = terms[0][-1]
    if not isinstance(inner, Dim) or not all(term and _same_operand(term[-1], inner) for term in terms):
        return None
    if len(terms) > 1 and any(len(term) < 2 for term in terms):
        return None
    outer = floordiv(dim, inner)
    found = factors(outer, count - 1) if isinstance(outer, Dim) else None
    return None if found is None else found + (inner,)
