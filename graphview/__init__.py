"""graphview: an immutable op graph with Numba kernels, zero-copy views, reverse-mode autodiff and gradient checks."""
import importlib

from graphview import allocation  # noqa: F401  (raises glibc's mmap threshold once; ADR 0026)

from graphview.errors import (DTypeError, ExecutionError, GraphFileError, GraphviewError, IndexDescriptorError,
                              InplaceModificationError, NameConflictError, OpArgumentError, PlaceholderError,
                              ShapeError, TrainingError, UnknownNameError)
from graphview.graph import Graph
from graphview.variable import Kind, Variable

# Importing the subpackage registers the built-in ops; it also binds the name
# ``graphview.ops`` to the subpackage, so the function is imported after it.
importlib.import_module("graphview.ops")
# Every built-in op's gradient rule, registered before any user code runs (ADR 0017).
importlib.import_module("graphview.gradients")
from graphview.registry import defop, defvjp, ops  # noqa: E402
from graphview.rule_context import needs_gradient  # noqa: E402
from graphview.gradients.unbroadcast import unbroadcast  # noqa: E402  (for gradient rules of broadcasting ops)
from graphview import attributes as attrs  # noqa: E402  (gv.attrs.Axis(), gv.attrs.Seed(), ... for defop)
from graphview.testing import Sample  # noqa: E402

# CreateView descriptors (ADR 0008); gv.all shadows the builtin only as a module attribute.
from graphview import indexing  # noqa: E402
from graphview.indexing import all, interval, new_axis, point  # noqa: E402,A004
# Autodiff, listeners and gradient checks (ADRs 0005-0007).
from graphview.listeners import DebugListener, Listener, NonInplaceValidationListener, ProfilingListener  # noqa: E402
from graphview.gradcheck import GradCheckReport, check_gradients, op_coverage  # noqa: E402
# Graph files (ADR 0010).
from graphview.serialization import load  # noqa: E402
# Training: the data pipeline, updaters, fit/evaluate and training listeners (ADR 0013).
from graphview import data  # noqa: E402
from graphview.runstate import inference, training as training_mode  # noqa: E402
from graphview.training import (SGD, Adam, AdamW, CheckpointListener, EarlyStoppingListener, RMSProp,  # noqa: E402
                                ScoreListener, TrainingConfig)
# Dims, layout views, rearrange and masking (ADR 0014).
from graphview.dims import Dim, DimError, batch_dim  # noqa: E402
from graphview.layouts.table import dims_of, lengths_of, set_dims, unmasked  # noqa: E402
from graphview.layouts.views import (ClassView, DataView, ImageView, LayoutError, ListView,  # noqa: E402
                                     SequenceView)
from graphview.rearrange import PatternError, rearrange, reduce  # noqa: E402
from graphview.ops.masked import PUBLIC as _MASKED, mask_of  # noqa: E402
from graphview.masked_form import Masked  # noqa: E402
# Process-wide switches: gv.config.fusion, the generated kernels' cache folder (ADR 0024).
from graphview.config import config  # noqa: E402
# Data-parallel training on MPI (ADR 0025).
from graphview import distributed  # noqa: E402
# ONNX export and import (ADR 0028); onnx itself is imported only when they are called.
from graphview import onnx  # noqa: E402
# Layers, models and initializers (ADR 0023).
from graphview import init, layers  # noqa: E402
from graphview.layers import Sequential  # noqa: E402

masked_sum, masked_mean, masked_max, masked_min, masked_logsumexp = (
    _MASKED[f"masked_{n}"] for n in ("sum", "mean", "max", "min", "logsumexp"))
masked_softmax, masked_log_softmax = _MASKED["masked_softmax"], _MASKED["masked_log_softmax"]
masked_softmax_cross_entropy = _MASKED["masked_softmax_cross_entropy"]

VARIABLE, CONSTANT, PLACEHOLDER, ARRAY = Kind.VARIABLE, Kind.CONSTANT, Kind.PLACEHOLDER, Kind.ARRAY

from graphview.version import __version__  # noqa: E402,F401  (one place: graph files write it too)

__all__ = [
    "Graph", "Variable", "Kind", "VARIABLE", "CONSTANT", "PLACEHOLDER", "ARRAY", "defop", "defvjp", "needs_gradient",
    "unbroadcast", "Masked", "ops", "attrs", "Sample",
    "GraphviewError", "ShapeError", "DTypeError", "IndexDescriptorError", "InplaceModificationError",
    "GraphFileError", "NameConflictError", "UnknownNameError", "PlaceholderError", "ExecutionError", "OpArgumentError",
    "TrainingError", "indexing", "point", "interval", "all", "new_axis",
    "Listener", "NonInplaceValidationListener", "ProfilingListener", "DebugListener",
    "check_gradients", "GradCheckReport", "op_coverage", "load",
    "data", "SGD", "Adam", "AdamW", "RMSProp", "TrainingConfig", "ScoreListener", "EarlyStoppingListener",
    "CheckpointListener", "inference", "training_mode",
    "Dim", "DimError", "batch_dim", "dims_of", "lengths_of", "mask_of", "set_dims", "unmasked", "DataView",
    "ImageView", "SequenceView", "ClassView", "ListView", "LayoutError", "rearrange", "reduce", "PatternError",
    "masked_sum", "masked_mean", "masked_max", "masked_min", "masked_logsumexp", "masked_softmax",
    "masked_log_softmax", "masked_softmax_cross_entropy", "init", "layers", "Sequential", "config", "distributed", "onnx",
]
