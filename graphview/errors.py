"""Every error graphview raises derives from GraphviewError."""
import difflib


class GraphviewError(Exception):
    """Base class of every error graphview raises."""


class ShapeError(GraphviewError, ValueError):
    """Shapes that do not fit an op, raised when the op is built."""


class DTypeError(GraphviewError, TypeError):
    """A dtype an op does not support, raised when the op is built."""


class IndexDescriptorError(GraphviewError, IndexError):
    """A malformed or out-of-range CreateView index descriptor."""


class InplaceModificationError(GraphviewError):
    """An op modified an input it did not declare as written."""


class GraphFileError(GraphviewError):
    """A graph file that cannot be read."""


class NameConflictError(GraphviewError, ValueError):
    """A name that is already taken in the graph."""


class UnknownNameError(GraphviewError, LookupError):
    """A name that is not in the graph."""


class PlaceholderError(GraphviewError, ValueError):
    """A placeholder value that is missing, unknown or unusable."""


class ExecutionError(GraphviewError, RuntimeError):
    """A value that can only be checked at run time was wrong (e.g. a label out of range), or a
    step failed with an exception that is not graphview's (raised from it; see execution._named)."""


class OpArgumentError(GraphviewError, TypeError):
    """An op called with the wrong number of inputs or an attribute it does not take."""


class TrainingError(GraphviewError, RuntimeError):
    """Training that cannot go on: the loss became NaN or infinite.

    ``iteration`` is the failed step (counted from 1, as ``ctx.iteration``),
    ``epoch`` its epoch (from 0, as ``ctx.epoch``) and ``loss`` the loss it gave.
    """

    def __init__(self, message, iteration=None, epoch=None, loss=None):
        super().__init__(message)
        self.iteration, self.epoch, self.loss = iteration, epoch, loss


def did_you_mean(name, candidates):
    """``" (did you mean 'x'?)"``: the candidates closest to an unknown ``name``, or ``""`` when none is close.

    Case is ignored when comparing, and a candidate that differs only in case ("Tanh" for "tanh") or by one
    letter added, dropped, changed or swapped ("w3" for "w1") is always suggested, first; difflib's close
    matches follow. At most three."""
    name, candidates = str(name), list(dict.fromkeys(str(c) for c in candidates))
    folded = name.casefold()
    by_folded = {}
    for candidate in candidates:
        by_folded.setdefault(candidate.casefold(), []).append(candidate)
    same = by_folded.get(folded, [])
    near = [c for c in candidates if len(folded) > 1 and _one_edit_apart(folded, c.casefold())]
    close = [c for match in difflib.get_close_matches(folded, list(by_folded), n=3) for c in by_folded[match]]
    suggested = [c for c in dict.fromkeys(same + near + close) if c != name][:3]
    if not suggested:
        return ""
    return " (did you mean " + " or ".join(repr(c) for c in suggested) + "?)"


def _one_edit_apart(a, b):
    """Whether ``b`` is ``a`` with one character added, dropped, changed, or two neighbours swapped."""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        differ = [i for i in range(len(a)) if a[i] != b[i]]
        return len(differ) == 1 or (len(differ) == 2 and differ[1] == differ[0] + 1
                                    and a[differ[0]] == b[differ[1]] and a[differ[1]] == b[differ[0]])
    shorter, longer = sorted((a, b), key=len)
    return any(longer[:i] + longer[i + 1:] == shorter for i in range(len(longer)))
