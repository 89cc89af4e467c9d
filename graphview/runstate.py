"""What a run is for, for the ops whose behaviour depends on it (dropout).

Three states, held in a context variable so threads and nested runs keep their own:

- no state (a plain ``g.output`` or a gradient check): dropout applies the mask
  fixed by its seed, the same on every run, so results are reproducible and
  finite differences see one function;
- ``training(step)``: set by ``fit`` and ``GradientStep`` around each step; the
  mask is drawn from (seed, step), a new one per step, and the forward and
  backward dropout of one step share it (they run in the same executor run);
- ``inference()``: set by ``g.evaluate`` and ``fit``'s validation, and
  available to users as ``gv.inference()``; dropout is the identity.
"""
import contextlib
import contextvars

_STATE = contextvars.ContextVar("graphview_run_state", default=None)
TRAINING, INFERENCE = "training", "inference"


@contextlib.contextmanager
def training(step, stream=0):
    """Runs inside this block are training step ``step`` (an int >= 0). ``stream`` (a data-parallel
    rank) makes dropout draw other masks in the same step; stream 0 draws what one process draws."""
    token = _STATE.set((TRAINING, int(step), int(stream)))
    try:
        yield
    finally:
        _STATE.reset(token)


@contextlib.contextmanager
def inference():
    """Runs inside this block are inference: dropout is the identity."""
    token = _STATE.set((INFERENCE, None, 0))
    try:
        yield
    finally:
        _STATE.reset(token)


def current():
    """``None``, ``("training", step, stream)`` or ``("inference", None, 0)``."""
    return _STATE.get()
