"""Every error graphview raises derives from GraphviewError."""


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
    """A value that can only be checked at run time was wrong (e.g. a label out of range)."""


class OpArgumentError(GraphviewError, TypeError):
    """An op called with the wrong number of inputs or an attribute it does not take."""
