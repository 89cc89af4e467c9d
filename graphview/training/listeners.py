"""Training listeners: a score listener, early stopping, checkpoints, and the per-epoch progress bar.

Each is a ``gv.Listener``; fit calls the training hooks of ``gv.Listener``
with a :class:`TrainingContext`: ``epoch_start(ctx)``, ``iteration_start(ctx)``,
``iteration_end(ctx, loss)`` (after the update; ``ctx.iteration`` counts steps
from 1) and ``epoch_end(ctx, losses)`` (after validation, with the epoch's
per-iteration losses; ``ctx.epoch_loss`` is their example-weighted mean and
``ctx.validation`` the validation metrics). A listener stops training by
setting ``ctx.stop_training = True``. A listener that also overrides
``pre_op``/``post_op`` watches every op of every training step.
"""
import contextlib
import os
import sys

import numpy as np

from graphview import compilation
from graphview.errors import GraphviewError
from graphview.execution import ExecutionContext
from graphview.listeners import Listener


class TrainingContext(ExecutionContext):
    """What training listeners see: the graph, counters, the last loss, the history and the updater."""

    def __init__(self, graph, config, history):
        super().__init__(graph, "training", iteration=0, epoch=0)
        self.config = config
        self.updater = config.updater
        self.history = history
        self.loss = None
        self.batch = None
        self.validation = None
        self.epoch_loss = None
        self.stop_training = False
        self.progress_bar = False     # True while a ProgressBar draws this fit's epochs (their summary line)


class ScoreListener(Listener):
    """Print (or pass to ``log``) the loss every ``every`` iterations, and each epoch's summary (printed
    only when no progress bar already shows it: an epoch is on the terminal once)."""

    def __init__(self, every=10, log=None):
        if every < 1:
            raise GraphviewError(f"ScoreListener: every must be at least 1, not {every}")
        self.every = int(every)
        self.printing = log is None       # a log of the user's own gets every line, the bar or not
        self.log = log or (lambda line: print(line, flush=True))

    def iteration_end(self, ctx, loss=None):
        if ctx.iteration % self.every == 0:
            self.log(f"epoch {ctx.epoch + 1} iteration {ctx.iteration}: loss {ctx.loss:.6f}")

    def epoch_end(self, ctx, losses=None):
        if ctx.progress_bar and self.printing:
            return      # the epoch's bar, left on the terminal, already says its loss and metrics
        metrics = "".join(f", validation {k} {v:.4f}" for k, v in (ctx.validation or {}).items())
        self.log(f"epoch {ctx.epoch + 1} done: mean loss {ctx.epoch_loss:.6f}{metrics}")


class EarlyStoppingListener(Listener):
    """Stop when ``monitor`` has not improved by more than ``min_delta`` for ``patience`` epochs.

    ``monitor`` is ``"loss"`` (the epoch's training loss) or a validation metric
    such as ``"val_loss"`` or ``"val_accuracy"``; ``mode`` is "min" or "max"
    ("auto": max for accuracy, min otherwise). ``best_epoch`` and ``best`` say
    where the best value was.
    """

    def __init__(self, monitor="val_loss", patience=3, min_delta=0.0, mode="auto"):
        if mode == "auto":
            mode = "max" if "accuracy" in monitor else "min"
        if mode not in ("min", "max"):
            raise GraphviewError(f"EarlyStoppingListener: mode must be 'min', 'max' or 'auto', not {mode!r}")
        self.monitor, self.patience, self.min_delta, self.mode = monitor, int(patience), float(min_delta), mode
        self.best, self.best_epoch, self.waited = None, None, 0

    def _value(self, ctx):
        if self.monitor == "loss":
            return ctx.epoch_loss
        if self.monitor.startswith("val_"):
            metrics = ctx.validation or {}
            name = self.monitor[len("val_"):]
            if name not in metrics:
                raise GraphviewError(f"EarlyStoppingListener: monitor {self.monitor!r} needs validation metric "
                                     f"{name!r}; this run has {', '.join(metrics) or 'no validation data'}")
            return metrics[name]
        raise GraphviewError(f"EarlyStoppingListener: monitor must be 'loss' or 'val_<metric>', not {self.monitor!r}")

    def epoch_end(self, ctx, losses=None):
        value = self._value(ctx)
        better = self.best is None or (value < self.best - self.min_delta if self.mode == "min"
                                       else value > self.best + self.min_delta)
        if better:
            self.best, self.best_epoch, self.waited = value, ctx.epoch, 0
            return
        self.waited += 1
        if self.waited >= self.patience:
            ctx.stop_training = True


class CheckpointListener(Listener):
    """Save a graph file (``g.save``) every ``every`` epochs, with the updater's state beside it.

    Files are ``<directory>/<prefix>-epoch<NNNN>.gvz`` (the graph, in the format
    of ``gv.load``) and ``...state.npz`` (the updater's state and counters,
    saved without pickle). ``keep`` keeps only the newest that many.
    ``g.fit(..., resume_from=path)`` on ``gv.load(path)`` continues training
    exactly where the checkpoint left off.
    """

    def __init__(self, directory, every=1, prefix="checkpoint", keep=None):
        if every < 1:
            raise GraphviewError(f"CheckpointListener: every must be at least 1, not {every}")
        self.directory, self.every, self.prefix, self.keep = os.fspath(directory), int(every), prefix, keep
        self.saved = []

    def epoch_end(self, ctx, losses=None):
        done = ctx.epoch + 1
        if done % self.every:
            return
        os.makedirs(self.directory, exist_ok=True)
        path = os.path.join(self.directory, f"{self.prefix}-epoch{done:04d}.gvz")
        save_checkpoint(ctx.graph, ctx.updater, path)
        self.saved.append(path)
        if self.keep is not None:
            while len(self.saved) > self.keep:
                old = self.saved.pop(0)
                for stale in (old, state_path(old)):
                    if os.path.exists(stale):
                        os.remove(stale)


def state_path(path):
    """The updater-state file saved beside the graph file ``path``."""
    root = os.fspath(path)
    if root.endswith(".gvz"):
        root = root[:-4]
    return root + ".state.npz"


def save_checkpoint(graph, updater, path):
    """Write ``graph`` to ``path`` and the updater's state to :func:`state_path` (path)."""
    graph.save(path)
    with open(state_path(path), "wb") as handle:
        np.savez(handle, **updater.state_dict())
    return path


def load_updater_state(path):
    """The updater state saved beside the graph file ``path``, as a dict of arrays."""
    try:
        with np.load(state_path(path), allow_pickle=False) as saved:
            return {key: saved[key] for key in saved.files}
    except (OSError, ValueError) as error:
        raise GraphviewError(f"cannot read the updater state {state_path(path)!r} of checkpoint {path!r}: {error}") from None


class ProgressBar(Listener):
    """A tqdm bar per epoch showing the running mean loss and, while Numba compiles (a first run can spend
    tens of seconds there), the kernel being compiled; only drawn when stderr is a terminal."""

    def __init__(self, total=None, stream=None):
        self.stream = stream or sys.stderr
        self.total = total
        self.bar = None
        self._sum = self._count = 0
        self.loss_text = ""
        self.compiling = []           # the kernels being compiled now, innermost last

    @staticmethod
    def watch_compilation(listeners):
        """A context within which each ProgressBar in ``listeners`` names the kernel being compiled."""
        stack = contextlib.ExitStack()
        for listener in listeners:
            if isinstance(listener, ProgressBar):
                stack.enter_context(compilation.watching(listener.compiling, listener.show))
        return stack

    def show(self):
        """Put the loss and the kernel compiling into the bar, drawn now while something compiles."""
        if self.bar is None:
            return
        parts = [self.loss_text] + ([compilation.status(self.compiling[-1])] if self.compiling else [])
        self.bar.set_postfix_str(", ".join(part for part in parts if part), refresh=bool(self.compiling))

    @staticmethod
    def wanted(stream=None):
        stream = stream or sys.stderr
        try:
            return stream.isatty()
        except (AttributeError, ValueError):
            return False

    @staticmethod
    def available():
        try:
            import tqdm  # noqa: F401  (an optional dependency, imported only for a progress bar)
        except ImportError:
            return False
        return True

    @classmethod
    def checked(cls, **options):
        """A ProgressBar, or a clear ImportError when tqdm is missing."""
        if not cls.available():
            raise ImportError("the training progress bar needs tqdm: pip install tqdm "
                              "(or pass progress=False)")
        return cls(**options)

    def epoch_start(self, ctx):
        from tqdm import tqdm  # an optional dependency (see available)
        self.bar = tqdm(total=self.total, desc=f"epoch {ctx.epoch + 1}", unit="batch", file=self.stream, leave=True)
        ctx.progress_bar = True
        self._sum = self._count = 0
        self.loss_text = ""

    def iteration_end(self, ctx, loss=None):
        self._sum += ctx.loss
        self._count += 1
        self.bar.update(1)
        if self._count % 5 == 1:
            self.loss_text = f"loss={self._sum / self._count:.4f}"
            self.show()

    def epoch_end(self, ctx, losses=None):
        if self.bar is not None:
            metrics = {"loss": f"{ctx.epoch_loss:.4f}"}
            metrics.update({f"val_{k}": f"{v:.4f}" for k, v in (ctx.validation or {}).items()})
            self.bar.set_postfix(metrics)
            self.bar.close()
            self.bar = None
