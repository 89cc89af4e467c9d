"""Op attributes, declared once and checked wherever a node is made (``gv.attrs``).

An op declares the type and range of each attribute next to its shape rule::

    gv.defop("dropout", ..., attrs={"rate": gv.attrs.Float(minimum=0.0, below=1.0), "seed": gv.attrs.Seed()})

:func:`check` applies the declarations: building an op (graphview.building) and loading
a graph file (graphview.serialization) both call it, with the arity check and the
shape and dtype rules, so a file that loads holds only what building could have
made. A value of the wrong type is an OpArgumentError (a ShapeError for shape and
permutation entries, a DTypeError for dtypes), an axis that the input does not have
a ShapeError naming the input and its rank. Attributes an op does not declare (a
custom op may declare none) are only frozen to plain values. See adr/0016.

The parsers here (:func:`axis`, :func:`axes`, :func:`integers`) are the one place
where an axis or an integer entry is read: Python and NumPy integers are accepted,
bools, floats, strings and None (where not allowed) are not.
"""
import math
import operator
from dataclasses import dataclass
from typing import Optional, Union

import numpy as np

from graphview import dtypes
from graphview.dims import Dim
from graphview.errors import DTypeError, GraphviewError, IndexDescriptorError, OpArgumentError, ShapeError


class Invalid(Exception):
    """What is wrong with one attribute value; :func:`check` turns it into the declared error kind."""

    def __init__(self, text, kind=None):
        super().__init__(text)
        self.kind = kind


def _shown(value):
    if isinstance(value, np.ndarray):
        return tuple(_shown(v) for v in value.tolist()) if value.ndim else value.item()
    if isinstance(value, (list, tuple)):
        return tuple(_shown(v) for v in value)
    return value.item() if isinstance(value, np.generic) else value


def _brief(value, limit=40):
    """``value``'s repr for a message, shortened: an int of 600 digits is described, not printed."""
    value = _shown(value)
    if is_integer(value):
        bits = abs(operator.index(value)).bit_length()
        if bits > 3.33 * limit:  # past ~limit digits; str() itself refuses ints over 4300 digits
            digits = len(str(abs(operator.index(value)))) if bits < 14_000 else f"about {int(bits * 0.30103) + 1}"
            return f"an int of {digits} digits"
    elif isinstance(value, (list, tuple)) and any(is_integer(v) and abs(operator.index(v)).bit_length() > 64
                                                  for v in value):
        return "(" + ", ".join(_brief(v, limit) for v in value[:4]) + (", ...)" if len(value) > 4 else ")")
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def is_integer(value):
    """True for a Python or NumPy integer (or a 0-d integer array), never for a bool."""
    return (hasattr(value, "__index__") and not isinstance(value, (bool, np.bool_))
            and not isinstance(value, (list, tuple, str, bytes)) and np.ndim(value) == 0)


def _in_int64(value):
    return -2**63 <= operator.index(value) < 2**63


def _int64_entries(items, shown):
    """``items`` (a sequence) as a tuple of ints, each an integer in the int64 range."""
    for item in items:
        if not is_integer(item):
            raise Invalid(f"{shown} holds {_brief(item)}, which is not an int")
        if not _in_int64(item):
            raise Invalid(f"{shown} holds {_brief(item)}, past the int64 range")
    return tuple(operator.index(item) for item in items)


def _integers(values, what):
    if is_integer(values):
        items = (values,)
    elif hasattr(values, "__iter__") and not isinstance(values, (str, bytes, dict)):
        items = tuple(values)
    else:
        raise Invalid(f"{what}{_brief(values, 80)} is not an int or a tuple of ints")
    return _int64_entries(items, f"{what}{_brief(items, 80)}")


def integers(values, op, what, error=ShapeError):
    """``values`` (an int or a sequence of ints of any integer type) as a tuple of ints; a float or
    bool entry is an ``error``, never truncated."""
    try:
        return _integers(values, f"{what} ")
    except Invalid as problem:
        raise error(f"{op}: {problem}") from None


def _axes(value, none, many):
    if value is None and none:
        return None
    if is_integer(value):
        if not _in_int64(value):
            raise Invalid(f"{_brief(value)} is past the int64 range")
        return operator.index(value)
    if many and (isinstance(value, (list, tuple)) or (isinstance(value, np.ndarray) and value.ndim == 1)):
        return _int64_entries(value, _brief(value))
    wanted = " or ".join(["an int"] + (["a tuple of ints"] if many else []) + (["None"] if none else []))
    raise Invalid(f"{_brief(value)} is not {wanted}")


def axis(value, op, what="axis"):
    """One axis (any Python or NumPy integer) as an int; anything else is an OpArgumentError."""
    return axes(value, op, what, none=False, many=False)


def axes(value, op, what="axis", none=True, many=True):
    """None (where allowed), one axis or a sequence of them, as None, an int or a tuple of ints."""
    try:
        return _axes(value, none, many)
    except Invalid as problem:
        raise OpArgumentError(f"{op}: {what} {problem}") from None


# --- declarations ------------------------------------------------------------------------------

class Attribute:
    """One attribute's declaration: ``parse`` checks the value alone, ``check`` it against the inputs,
    ``relate`` against the op's other attributes (once all are parsed)."""
    error = OpArgumentError     # the error a value of the wrong type or range raises

    def parse(self, value):
        return value

    def check(self, value, inputs, definition):
        """``inputs``: one (label, shape) per input of the op being made."""

    def relate(self, value, attrs):
        """``attrs``: every attribute of the node, the declared ones parsed."""


@dataclass(frozen=True)
class Int(Attribute):
    """An int (Python or NumPy) in [minimum, maximum]; without bounds, an int64 (what kernels take)."""
    minimum: Optional[int] = None
    maximum: Optional[int] = None

    def parse(self, value):
        if not is_integer(value):
            raise Invalid(f"{_brief(value)} is not an int")
        value = operator.index(value)
        if (self.minimum is not None and value < self.minimum) or (self.maximum is not None and value > self.maximum):
            low = "-inf" if self.minimum is None else self.minimum
            high = "inf" if self.maximum is None else self.maximum
            raise Invalid(f"{_brief(value)} is not in [{low}, {high}]")
        if not _in_int64(value):
            raise Invalid(f"{_brief(value)} is past the int64 range")
        return value


@dataclass(frozen=True)
class OneOf(Attribute):
    """One of the strings ``options`` (a layout name, a mode, a reduction)."""
    options: tuple = ()

    def parse(self, value):
        if not isinstance(value, str) or value not in self.options:
            raise Invalid(f"{value!r:.40} is not one of {', '.join(map(repr, self.options))}")
        return value


@dataclass(frozen=True)
class Seed(Attribute):
    """A random seed: an int in [0, 2**64), the seeds the kernels' 64-bit hash takes."""

    def parse(self, value):
        if not is_integer(value) or not 0 <= operator.index(value) < 2**64:
            raise Invalid(f"{_brief(value)} is not a seed: a seed is an int in [0, 2**64)")
        return operator.index(value)


@dataclass(frozen=True)
class Float(Attribute):
    """A real number (an int is converted) in [minimum, maximum], or [minimum, below); without bounds
    also NaN and the infinities, unless ``finite``. ``at_most``: the name of another attribute of the
    op that this one may not exceed (uniform's low and high)."""
    minimum: Optional[float] = None
    maximum: Optional[float] = None
    below: Optional[float] = None
    finite: bool = False
    at_most: Optional[str] = None

    def parse(self, value):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise Invalid(f"{_brief(value)} is not a number")
        try:
            value = float(value)
        except OverflowError:
            raise Invalid(f"{_brief(value)} is too large for a float") from None
        if self.finite and not math.isfinite(value):
            raise Invalid(f"{value} is not a finite number")
        if self.minimum is None and self.maximum is None and self.below is None:
            return value
        low = -math.inf if self.minimum is None else self.minimum
        if not (low <= value and (self.maximum is None or value <= self.maximum)
                and (self.below is None or value < self.below)):
            high = f"{self.maximum}]" if self.maximum is not None else f"{self.below})" if self.below is not None else "inf)"
            raise Invalid(f"{value} is not in [{low}, {high}")
        return value

    def relate(self, value, attrs):
        other = attrs.get(self.at_most) if self.at_most else None
        if isinstance(value, float) and isinstance(other, float) and value > other:
            raise Invalid(f"{value} is greater than {self.at_most} ({other})")


@dataclass(frozen=True)
class Bool(Attribute):
    """True or False (a NumPy bool is converted)."""

    def parse(self, value):
        if not isinstance(value, (bool, np.bool_)):
            raise Invalid(f"{_brief(value)} is not a bool")
        return bool(value)


@dataclass(frozen=True)
class DType(Attribute):
    """The name of one of graphview's dtypes (a NumPy dtype or type is converted), among ``allowed``."""
    allowed: tuple = tuple(dtypes.ALL)
    error = DTypeError

    def parse(self, value):
        names = [np.dtype(d).name for d in self.allowed]
        if isinstance(value, str) or isinstance(value, np.dtype) or any(value is t for t in (bool, int, float)) or (
                isinstance(value, type) and issubclass(value, np.generic)):
            try:
                name = np.dtype(value).name
            except TypeError:
                name = None
            if name in names:
                return name
        raise Invalid(f"{_brief(value)} is not one of the dtypes {', '.join(names)}")


@dataclass(frozen=True)
class Shape(Attribute):
    """A shape: a tuple of sizes (ints >= 0); with ``minus_one``, one entry may be -1 (inferred)."""
    minus_one: bool = False
    error = ShapeError

    def parse(self, value):
        shape = _integers(value, "")
        if any(d < 0 for d in shape if not (self.minus_one and d == -1)) or shape.count(-1) > self.minus_one:
            allowed = "sizes >= 0 and at most one -1" if self.minus_one else "sizes >= 0"
            raise Invalid(f"{shape} holds a negative size; a shape holds {allowed}")
        return shape


@dataclass(frozen=True)
class Axis(Attribute):
    """An axis of input ``input`` (a position or the shape rule's name for it).

    ``many``: a tuple of axes is allowed too, ``none``: None (all axes) too. ``new``: the axes
    are positions in the result, whose rank is the input's plus the number of axes given.
    ``extra`` is added to the rank (-1: the axes of the input without its last axis)."""
    input: Union[int, str] = 0
    many: bool = False
    none: bool = False
    new: bool = False
    extra: int = 0

    def parse(self, value):
        return _axes(value, self.none, self.many)

    def check(self, value, inputs, definition):
        position = _input_position(self.input, definition)
        if value is None or position >= len(inputs):
            return
        label, shape = inputs[position]
        listed = value if isinstance(value, tuple) else (value,)
        rank = len(shape) + self.extra + (len(listed) if self.new else 0)
        for item in listed:
            if not -rank <= item < rank:
                text = f"axis {_brief(item)} is out of range for input {position} ({label}) of rank {len(shape)}"
                counted = f"the result's {rank} axes" if self.new else f"its first {rank} axes" if self.extra else ""
                valid = f"axes {-rank}..{rank - 1}" if rank > 0 else "no axis"
                raise Invalid(f"{text} ({counted + ': ' if counted else ''}{valid})", ShapeError)
        normalized = [item % rank for item in listed]
        if len(set(normalized)) != len(normalized):
            raise Invalid(f"{value} names an axis twice", ShapeError)


@dataclass(frozen=True)
class Perm(Attribute):
    """None (reverse the axes) or a permutation of the axes of input ``input``; entries as shapes'."""
    input: Union[int, str] = 0
    error = ShapeError

    def parse(self, value):
        return None if value is None else _integers(value, "")

    def check(self, value, inputs, definition):
        position = _input_position(self.input, definition)
        if value is None or position >= len(inputs):
            return
        label, shape = inputs[position]
        rank = len(shape)
        if len(value) != rank or sorted(p % rank if rank else p for p in value if -rank <= p < rank) != list(range(rank)):
            raise Invalid(f"{value} is not a permutation of the {rank} axes of input {position} ({label})", ShapeError)


@dataclass(frozen=True)
class Descriptors(Attribute):
    """View descriptors (ADR 0008): a tuple of descriptors, each a tuple of integers (``dynamic``
    then integers for a descriptor whose values come from an input); ``levels`` 2: a tuple of them."""
    levels: int = 1
    dynamic: str = "dynamic"
    error = IndexDescriptorError

    def parse(self, value):
        lists = [value]
        for _ in range(self.levels - 1):
            if not isinstance(value, tuple) or not all(isinstance(item, tuple) for item in lists):
                break
            lists = [item for outer in lists for item in outer]
        for entries in lists:
            if not isinstance(entries, tuple):
                raise Invalid(f"{_shown(entries)!r:.80} is not a list of descriptors")
            for entry in entries:
                if not isinstance(entry, tuple):
                    raise Invalid(f"descriptor {_shown(entry)!r:.80} is not a list")
                values = entry[1:] if entry[:1] == (self.dynamic,) else entry
                for item in values:
                    if not is_integer(item):
                        raise Invalid(f"descriptor {list(_shown(entry))!r:.80} holds {_shown(item)!r}, "
                                      "which is not an integer")
        return value


def _input_position(which, definition):
    if isinstance(which, int):
        return which
    return definition.arity.inputs.index(which)


def holds_dim(value):
    """Whether an attribute value is or holds a gv.Dim (an axis named by its dim, resolved by building)."""
    return isinstance(value, Dim) or (isinstance(value, (list, tuple)) and any(holds_dim(v) for v in value))


def check(definition, attrs, inputs, prefix=""):
    """``attrs`` with every declared attribute parsed and checked against ``inputs``, one (label, shape)
    per input; a bad value raises the declaration's error, ``<prefix>attribute 'key': what is wrong``.

    A value holding a gv.Dim is left to graphview.layouts (it becomes an axis of input 0 there)."""
    declared = definition.attributes
    if not declared:
        return dict(attrs)
    result = dict(attrs)
    for key, value in attrs.items():
        declaration = declared.get(key)
        if declaration is None or holds_dim(value):
            continue
        try:
            value = declaration.parse(value)
            declaration.check(value, inputs, definition)
        except Invalid as problem:
            raise (problem.kind or declaration.error)(f"{prefix}attribute {key!r}: {problem}") from None
        result[key] = value
    for key, value in result.items():
        declaration = declared.get(key)
        if declaration is None or holds_dim(value):
            continue
        try:
            declaration.relate(value, result)
        except Invalid as problem:
            raise (problem.kind or declaration.error)(f"{prefix}attribute {key!r}: {problem}") from None
    return result


def check_declarations(name, declared, arity):
    """Refuse (at defop) declarations that are not Attributes or name attributes the shape rule lacks."""
    if not isinstance(declared, dict):
        raise GraphviewError(f"defop {name}: attrs must be a dict of attribute name -> gv.attrs declaration")
    for key, declaration in declared.items():
        if not isinstance(declaration, Attribute):
            raise GraphviewError(f"defop {name}: attrs[{key!r}] is {declaration!r}, not a gv.attrs declaration "
                                 "(gv.attrs.Int(), gv.attrs.Axis(), ...)")
        if arity is not None and key not in arity.attributes and not arity.any_attribute:
            raise GraphviewError(f"defop {name}: attrs declares {key!r}, which the shape rule does not take "
                                 f"(it takes {', '.join(arity.attributes) or 'no attributes'})")
        other = getattr(declaration, "at_most", None)
        if other is not None and other not in declared:
            raise GraphviewError(f"defop {name}: attrs[{key!r}] is compared with {other!r}, which attrs does not "
                                 "declare")
        which = getattr(declaration, "input", None)
        if isinstance(which, str) and (arity is None or which not in arity.inputs):
            raise GraphviewError(f"defop {name}: attrs[{key!r}] refers to input {which!r}, which the shape rule "
                                 "does not name")
