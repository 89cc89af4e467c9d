"""What fit and the command show: the History table, its numbers, one line per epoch, kernel names."""
import io
import types

import numba
import numpy as np
import pytest
from numba.core import event

import graphview as gv
from graphview import compilation, fused_kernels, registry
from graphview.compilation import kernel_name
from graphview.training.history import History
from graphview.training.listeners import ProgressBar
from graphview.training.step import GradientStep


def regression(seed=0):
    r = np.random.default_rng(seed)
    g = gv.Graph("regression")
    x, y = g.placeholder("x", (None, 3)), g.placeholder("y", (None, 1))
    w = g.var("w", r.normal(size=(3, 1)))
    g.set_loss(g.math.mean(g.math.square(x @ w - y), name="loss"))
    data = gv.data.ArrayDataSet({"x": r.normal(size=(32, 3))}, {"y": r.normal(size=(32, 1))}) >> gv.data.Batch(8)
    return g, data, gv.TrainingConfig(gv.SGD(0.1), ["x"], ["y"])


def test_history_losses_are_plain_floats(monkeypatch):
    # A data-parallel step's loss is a NumPy scalar (the all-reduced buffer's entry); the History holds floats.
    original = GradientStep.__call__

    def numpy_loss(self, *args, **kwargs):
        loss, gradients = original(self, *args, **kwargs)
        return np.float64(loss), gradients

    monkeypatch.setattr(GradientStep, "__call__", numpy_loss)
    g, data, config = regression()
    history = g.fit(data, epochs=2, config=config, progress=False)
    assert all(type(loss) is float for loss in history.epoch_losses + history.iteration_losses)
    assert "np.float64" not in repr(history.epoch_losses)


def test_history_table_header_lines_up_with_its_columns():
    history = History()
    history.epochs, history.epoch_losses = [0, 1], [12.345678, 0.5]
    history.validation = [{"loss": 1.5, "accuracy": 0.25}, {"loss": 0.75, "accuracy": 0.5}]
    header, *rows = str(history).splitlines()
    ends = [i + 1 for i, (here, after) in enumerate(zip(header, header[1:] + " ")) if here != " " and after == " "]
    assert len(ends) == 4
    for row in rows:
        row_ends = [i + 1 for i, (here, after) in enumerate(zip(row, row[1:] + " ")) if here != " " and after == " "]
        assert row_ends == ends, f"{header!r} over {row!r}"


def test_an_epoch_is_printed_once_with_a_progress_bar_and_a_score_listener(capsys):
    g, data, config = regression()
    g.fit(data, epochs=2, config=config, listeners=[gv.ScoreListener(every=100), ProgressBar(stream=io.StringIO())])
    assert "done" not in capsys.readouterr().out         # the bars say each epoch's loss
    g.fit(data, epochs=2, config=config, listeners=[gv.ScoreListener(every=100)], progress=False)
    assert capsys.readouterr().out.count("done: mean loss") == 2      # no bar: the listener's lines


def test_a_fused_kernel_is_named_by_its_group_not_kernel_kernel():
    namespace = {}
    exec(compile("def kernel(x):\n    return x\n", "<graphview fused 0123abcd>", "exec"), namespace)
    assert kernel_name(namespace["kernel"]) == "fused 0123abcd"
    namespace["kernel"].__module__ = fused_kernels.PREFIX + "4567ef"
    assert kernel_name(namespace["kernel"]) == "fused 4567ef"
    assert kernel_name(regression) == "regression"
    stack, seen = [], []
    dispatcher = types.SimpleNamespace(py_func=namespace["kernel"])
    with compilation.watching(stack, lambda: seen.append(list(stack))):     # what the gradcheck bar and fit see
        event.start_event("numba:compile", data={"dispatcher": dispatcher})
        event.end_event("numba:compile", data={"dispatcher": dispatcher})
    assert seen == [["fused 4567ef"], []]
    assert compilation.status(seen[0][-1]) == "compiling kernel fused 4567ef (once; cached)"


@pytest.fixture
def freshly_compiled_op():
    """An op whose kernel Numba has never compiled (no disk cache), so its first run compiles it."""
    @numba.njit(cache=False)
    def scale_by_three(x, out):
        for i in range(x.size):
            out.flat[i] = 3.0 * x.flat[i]

    name = "test_fit_compiles_scale_by_three"
    op = gv.defop(name, shape=lambda x: x, kernel=lambda x, out: scale_by_three(np.ascontiguousarray(x), out),
                  vjp=lambda grad, out, x: (grad * 3.0,))
    yield op
    registry._REGISTRY.pop(name, None)
    registry._CALLABLES.pop(name, None)


def with_op(op):
    g, data, config = regression()
    w = g.var("v", np.ones((3, 1)))
    x, y = g["x"], g["y"]
    g.set_loss(g.math.mean(g.math.square(op(x @ w) - y), name="loss2"))
    return g, data, config


def test_fit_shows_the_kernel_being_compiled_while_progress_is_shown(freshly_compiled_op, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")      # tqdm's width on a stream that is no terminal: the whole name
    g, data, config = with_op(freshly_compiled_op)
    stream = io.StringIO()
    g.fit(data, epochs=1, config=config, listeners=[ProgressBar(stream=stream)])
    assert "compiling kernel freshly_compiled_op.scale_by_three (once; cached)" in stream.getvalue()


def test_fit_without_progress_shows_nothing_while_compiling(freshly_compiled_op, capsys):
    g, data, config = with_op(freshly_compiled_op)
    g.fit(data, epochs=1, config=config, progress=False)
    captured = capsys.readouterr()
    assert "compiling" not in captured.err + captured.out
