"""``gv.Masked``: the declaration of how an op is built over a dim with lengths (ADR 0014, ADR 0017).

A declaration like the others in this layer (``gv.attrs``, ``OpDef``), so the registry checks a masked
form when it is declared; graphview/masking.py applies it when building.
"""
import dataclasses
from typing import Callable, Optional, Union

from graphview.errors import GraphviewError

MASKED_AXES = ("attribute", "attribute or last", "all but last", "all")


@dataclasses.dataclass(frozen=True)
class Masked:
    """How a plain op is built when it reduces over a dim with lengths, registered on the plain op with
    ``registry.defmasked`` or ``gv.defop(masked=...)`` (graphview.masking reads it when building).

    ``op``: the masked op's name (found in the registry when building), a function composing one
    (called as a masked op is: the plain op's inputs, then the lengths), or None: ``where`` replaces
    the padding by ``where_neutral`` and the plain op is built on the result.
    ``axes``: which of the input's axes the op reduces over, so that a dim with lengths there masks it:
    "attribute" (its ``axis``, None for every axis; several dims with lengths are masked together),
    "attribute or last" (its one ``axis``, the last by default), "all but last" (not the class axis), "all".
    ``where_neutral``: what the padding of a dim masked by ``where`` becomes: a value, or "lowest" /
    "highest" (of the input's dtype).
    ``passes``: (attribute, default) pairs handed on to the masked op.
    ``inputs``: the inputs whose dims are looked at, in order; the first with a dim with lengths is masked.
    ``sum_op``: for a mean, the masked sum that, divided by the count of valid entries, gives the mean
    over several dims with lengths.
    ``several``: for "attribute or last", how the op is built over a tuple of axes of which some dims
    have lengths: ``several(x, axes, name)`` (softmax: the axes merged into one masked axis).
    """
    op: Union[str, Callable, None]
    axes: str = "attribute"
    where_neutral: object = None
    passes: tuple = ()
    inputs: tuple = (0,)
    sum_op: Optional[str] = None
    several: Optional[Callable] = None

    def __post_init__(self):
        if self.axes not in MASKED_AXES:
            raise GraphviewError(f"Masked({self.op!r}): axes={self.axes!r} is not one of {', '.join(MASKED_AXES)}")
        if self.op is None and self.where_neutral is None:
            raise GraphviewError("Masked(None): without a masked op, where_neutral must say what padding becomes")


