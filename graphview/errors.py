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
    """``" (did you mean 'x'?)"``: the candidates closest to an unknown ``name``, or ``""`` when none is close."""
    close = difflib.get_close_matches(str(name), [str(c) for c in candidates], n=3)
    if not close:
        return ""
    return " (did you mean " + " or ".join(repr(c) for c in close) + "?)"
