"""fit: the training loop. One executor run per step gives the loss and every gradient.

Each step feeds one batch, runs the gradient graph once for the loss, the
gradients and the state updates together (ADR 0019), writes the new state into
its variables, and hands the gradients to the updater, which writes the new
values into the graph's variable buffers in place (ADR 0013).
"""
import contextlib
import itertools
import math

import numpy as np

from graphview import runstate
from graphview.data.dataset import DataSet
from graphview.errors import GraphviewError, TrainingError
from graphview.listeners import Listener
from graphview.training.config import TrainingConfig
from graphview.training.evaluation import ConfusionCounter
from graphview.training.history import History
from graphview.training.listeners import ProgressBar, TrainingContext, load_updater_state
from graphview.training.step import GradientStep

HOOKS = ("epoch_start", "iteration_start", "iteration_end", "epoch_end")


def fit(graph, dataset, epochs, config, listeners=None, validation=None, progress=None, resume_from=None):
    """Train ``graph``'s variables on ``dataset`` for ``epochs`` more epochs; returns a History.

    ``validation`` (a data set of batches) is evaluated after every epoch.
    ``progress`` draws a tqdm bar per epoch (default: only when stderr is a
    terminal, and on rank 0 of a data-parallel world of several). ``resume_from``
    is a checkpoint graph file: the updater's state and the epoch count are
    restored from it (load the graph itself with ``gv.load``), so training
    continues exactly where it stopped.
    """
    _check_arguments(graph, dataset, epochs, config, validation)
    if validation is not None:
        validation = CheckedValidation(graph, validation, config)
    updater = config.updater
    if resume_from is not None:
        updater.load_state_dict(load_updater_state(resume_from))
    wrt = config.trainable_names(graph)
    step = GradientStep(graph, wrt)
    history = History()
    ctx = TrainingContext(graph, config, history)
    listeners = list(listeners or ())
    parallel = config.data_parallel
    if parallel is not None:
        parallel.start(graph, step.gradient_order(), updater)
        if parallel.rank != 0:              # listeners and progress bars run on rank 0 only
            listeners, progress = [], False
        elif progress is None and parallel.size > 1:    # the launcher relays rank 0's stderr: never a terminal
            progress = ProgressBar.available()
    if progress or (progress is None and ProgressBar.wanted() and ProgressBar.available()):
        listeners.append(ProgressBar.checked())
    hooks = {hook: [getattr(l, hook) for l in listeners if _overrides(l, hook)] for hook in HOOKS}
    op_listeners = [l for l in listeners if _watches_ops(l)]
    if parallel is not None:                # can rank 0's listeners stop training within an epoch?
        parallel.watch_iterations = parallel.agree(bool(hooks["iteration_end"]))
    with blas_threads(config.blas_threads), ProgressBar.watch_compilation(listeners):
        return _train(graph, dataset, epochs, config, validation, step, history, ctx, hooks, op_listeners)


def blas_threads(count):
    """A context limiting the BLAS threads to ``count`` (None: a context that changes nothing)."""
    if count is None:
        return contextlib.nullcontext()
    try:
        from threadpoolctl import threadpool_limits  # an optional dependency, imported only when asked for
    except ImportError:
        raise ImportError("TrainingConfig(blas_threads=...) needs threadpoolctl: pip install threadpoolctl "
                          "(or set OPENBLAS_NUM_THREADS before starting Python)") from None
    # Load the BLAS that Numba's np.dot calls (scipy's) now, so the limit reaches it before the first matmul.
    import scipy.linalg.cython_blas  # noqa: F401
    return threadpool_limits(count, user_api="blas")


def _train(graph, dataset, epochs, config, validation, step, history, ctx, hooks, op_listeners):
    updater = config.updater
    first = updater.epochs_done
    for epoch in range(first, first + epochs):
        ctx.epoch = updater.epoch = epoch
        ctx.stop_training = False
        if config.data_parallel is not None:
            config.data_parallel.check_plan(dataset, epoch)
        for hook in hooks["epoch_start"]:
            hook(ctx)
        total, count, losses = 0.0, 0, []
        for batch in dataset.iterate(epoch):
            ctx.batch = batch
            for hook in hooks["iteration_start"]:
                hook(ctx)
            if config.data_parallel is None:
                feeds = config.feeds(graph, batch)
                if validation is not None:
                    validation.check()
                loss, gradients = step(feeds, op_listeners, step=updater.iteration, commit_state=False)
                if config.terminate_on_nan and not math.isfinite(loss):
                    raise _non_finite(loss, updater.iteration + 1, epoch, len(losses) + 1)
                step.commit_state()
                updater.step(graph, gradients)
            else:
                loss = _parallel_step(graph, batch, config, validation, step, op_listeners, epoch, len(losses))
            size = batch.size
            total += loss * size
            count += size
            losses.append(float(loss))
            ctx.iteration, ctx.loss = updater.iteration, loss
            for hook in hooks["iteration_end"]:
                hook(ctx, loss)
            if config.data_parallel is not None and config.data_parallel.watch_iterations:
                ctx.stop_training = config.data_parallel.agree(ctx.stop_training)
            if ctx.stop_training:
                break
        if count == 0:
            raise GraphviewError(f"fit: epoch {epoch + 1} gave no batches; is the data set empty?")
        ctx.epoch_loss = float(total / count)     # plain floats: a History prints as numbers, not np.float64
        ctx.validation = validate(graph, validation, config) if validation is not None else None
        history.iteration_losses.extend(losses)
        history.epochs.append(epoch)
        history.epoch_losses.append(ctx.epoch_loss)
        if ctx.validation is not None:
            history.validation.append(ctx.validation)
        updater.epochs_done = epoch + 1
        parallel = config.data_parallel
        if parallel is not None and parallel.sharded_update:
            parallel.gather_state(updater)      # whole, for a checkpoint written at the epoch's end
        for hook in hooks["epoch_end"]:
            hook(ctx, losses)
        if parallel is not None:
            if parallel.sharded_update:
                parallel.scatter_state(updater)
            ctx.stop_training = parallel.agree(ctx.stop_training)
        if ctx.stop_training:
            history.stopped_early = True
            break
    return history


def _parallel_step(graph, batch, config, validation, step, op_listeners, epoch, batches_done):
    """One data-parallel step (ADR 0025): this rank's share of ``batch``, the ranks' gradients combined
    into the whole batch's, one update everywhere; returns the whole batch's loss."""
    parallel, updater = config.data_parallel, config.updater
    local, rows, total = parallel.shard(batch)
    if validation is not None:
        validation.check()
    exchange = parallel.exchange(parallel.weight(rows, total))
    try:
        if rows:                            # the gradients' all-reduce starts during the backward pass
            loss, gradients = step(config.feeds(graph, local), op_listeners, step=updater.iteration,
                                   commit_state=False, stream=parallel.rank, ready=exchange.arrived)
        else:                               # fewer rows than ranks: this rank adds nothing to the step
            loss, gradients = 0.0, {}
        exchange.finish(gradients)
        state = {name: step.new_state.get(name) if rows else None for name, _ in step.state}
        parallel.start_tail(exchange, graph, loss, rows, total, state)
        loss = parallel.finish_tail(exchange, graph, state)   # waits for every collective of the step
    except BaseException as error:
        parallel.failed(exchange, error)
        raise
    if config.terminate_on_nan and not math.isfinite(loss):
        raise _non_finite(loss, updater.iteration + 1, epoch, batches_done + 1)
    if step.state:
        step.new_state = state
        step.commit_state()
    parallel.update(updater, graph, gradients, exchange.weight, exchange)
    return loss


def _non_finite(loss, iteration, epoch, batch):
    return TrainingError(f"fit: the loss became {loss} at iteration {iteration} (epoch {epoch + 1}, batch {batch} "
                         f"of the epoch); training stopped before that step's update, so the variables hold "
                         f"their values after iteration {iteration - 1}. Lower the learning rate, look for NaN "
                         f"or infinite values in the data, or pass TrainingConfig(terminate_on_nan=False) to "
                         f"train on regardless", iteration=iteration, epoch=epoch, loss=loss)


def _check_arguments(graph, dataset, epochs, config, validation):
    if not isinstance(dataset, DataSet):
        raise GraphviewError(f"fit: expected a gv.data data set of batches, not {type(dataset).__name__}")
    if validation is not None and not isinstance(validation, DataSet):
        raise GraphviewError(f"fit: validation must be a gv.data data set, not {type(validation).__name__}")
    if not isinstance(epochs, (int, np.integer)) or isinstance(epochs, bool) or epochs < 0:
        raise GraphviewError(f"fit: epochs must be an int >= 0, not {epochs!r}")
    if not isinstance(config, TrainingConfig):
        raise GraphviewError(f"fit: config must be a gv.TrainingConfig, not {type(config).__name__}")
    if not graph.losses:
        raise GraphviewError(f"fit: graph {graph.name!r} has no loss; call g.set_loss(...) first")


def _overrides(listener, hook):
    """True when ``listener`` has its own ``hook`` (not gv.Listener's, which does nothing)."""
    method = getattr(type(listener), hook, None)
    return callable(method) and method is not getattr(Listener, hook, None)


def _watches_ops(listener):
    """True when a listener overrides the per-op hooks (then it also watches every op of every step)."""
    return _overrides(listener, "pre_op") or _overrides(listener, "post_op")


class CheckedValidation(DataSet):
    """The validation data, whose first batch ``check`` reads and feeds (dtypes cast or refused) before
    the first step, so bad validation data stops fit before any update.

    fit calls ``check`` once the training pass has given its first batch, so a transformer that learns
    from its first pass and is shared with the training pipeline (one Normalize instance) has learned
    from the training data, as when validation ran only after the epoch. The pass begun for the check is
    the one the first validation reads, so data that can be read only once is still read once, whole.
    """

    def __init__(self, graph, dataset, config):
        self.graph, self.dataset, self.config = graph, dataset, config
        self.checked, self._begun = False, None

    def check(self):
        if self.checked:
            return
        items = iter(self.dataset.iterate(0))
        first = next(items, None)
        if first is None:
            raise GraphviewError("fit: the validation data set gave no batches")
        self.config.feeds(self.graph, first, data="validation batch")
        self.checked, self._begun = True, itertools.chain([first], items)

    def iterate(self, epoch=0):
        begun, self._begun = self._begun, None
        return begun if begun is not None else self.dataset.iterate(epoch)


def validate(graph, dataset, config):
    """Mean loss over a data set of batches, and accuracy when the config names a prediction."""
    losses = [loss.name for loss in graph.losses]
    outputs = losses + ([config.prediction] if config.prediction else [])
    label = _first_label_placeholder(graph, config)
    counter = ConfusionCounter() if config.prediction else None
    total, count = 0.0, 0
    for batch in dataset.iterate(0):
        feeds = config.feeds(graph, batch, data="validation batch")
        with runstate.inference():
            values = graph.output(feeds, outputs)
        total += sum(float(values[name]) for name in losses) * batch.size
        count += batch.size
        if counter is not None:
            counter.add(feeds[label], values[config.prediction])
    if count == 0:
        raise GraphviewError("fit: the validation data set gave no batches")
    metrics = {"loss": total / count}
    if counter is not None:
        metrics["accuracy"] = float(np.trace(counter.matrix) / counter.matrix.sum())
    return metrics


def _first_label_placeholder(graph, config):
    mapping = config.label_mapping
    if not config.prediction:
        return None
    if not mapping:
        raise GraphviewError("fit: TrainingConfig(prediction=...) needs a label_mapping to compare with")
    return next(iter(mapping.values())) if isinstance(mapping, dict) else mapping[0]
