"""What a run is for, for the ops whose behaviour depends on it (dropout, batch norm).

Two modes, held in a context variable so threads and nested runs keep their own:

- inference, the default: every plain run (``g.output``, ``calculate_gradients``
  outside ``fit``, gradient checks, the CLI) and any run inside ``inference()``
  (``g.evaluate``, ``g.predict``, ``fit``'s validation, ``gv.inference()``):
  dropout is the identity and batch norm uses its running statistics, as
  SameDiff's ``output()`` and Keras outside training;
- ``training(step)``: set by ``fit`` and ``GradientStep`` around each step; the
  mask is drawn from (seed, step), a new one per step, and the forward and
  backward dropout of one step share it (they run in the same executor run);
  batch norm uses the batch's statistics. ``training()`` with no step (users'
  ``gv.training_mode()``) applies the mask fixed by the seed, the same on every
  run, so a user's own loop or a gradient check of a training-mode graph is
  reproducible and finite differences see one function. Running statistics are
  written only by a step (``fit``, ``GradientStep``), never by a plain run.
"""
import contextlib
import contextvars

_STATE = contextvars.ContextVar("graphview_run_state", default=None)
TRAINING, INFERENCE = "training", "inference"


@contextlib.contextmanager
def training(step=None, stream=0):
    """Runs inside this block are in training mode: dropout masks, batch norm uses batch statistics.
    ``step`` (an int >= 0) draws that step's dropout masks; None keeps the masks fixed by their seeds
    (the same on every run). ``stream`` (a data-parallel rank) makes dropout draw other masks in the
    same step; stream 0 draws what one process draws. Public as ``gv.training_mode()``."""
    token = _STATE.set((TRAINING, None if step is None else int(step), int(stream)))
    try:
        yield
    finally:
        _STATE.reset(token)


@contextlib.contextmanager
def inference():
    """Runs inside this block are inference, as every run outside ``training``: dropout is the identity
    and batch norm uses its running statistics. It also switches training off inside a step."""
    token = _STATE.set((INFERENCE, None, 0))
    try:
        yield
    finally:
        _STATE.reset(token)


def current():
    """``None`` (a plain run: inference), ``("training", step, stream)`` (step may be None) or
    ``("inference", None, 0)``."""
    return _STATE.get()


def is_training():
    """True inside ``training``: the runs whose dropout masks and whose batch norm uses batch statistics."""
    state = _STATE.get()
    return state is not None and state[0] == TRAINING
