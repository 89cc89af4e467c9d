"""fit, evaluate, History and the training listeners, on small problems with known answers."""
import io
import os

import numpy as np
import pytest

import graphview as gv
from graphview import data
from graphview.training import History, ProgressBar


def blobs(n=120, seed=0, dtype=np.float64):
    """Two well separated classes in 2-D."""
    rng = np.random.default_rng(seed)
    y = np.arange(n) % 2
    x = rng.normal(0.0, 0.5, (n, 2)) + np.where(y[:, None] == 1, 2.0, -2.0)
    return x.astype(dtype), y.astype(np.int64)


def classifier(dtype="float64", hidden=8, seed=1):
    rng = np.random.default_rng(seed)
    g = gv.Graph("classifier")
    x = g.placeholder("x", (None, 2), dtype)
    y = g.placeholder("y", (None,), "int64")
    w1 = g.var("w1", rng.normal(0, 0.5, (2, hidden)).astype(dtype))
    b1 = g.var("b1", np.zeros(hidden, dtype))
    w2 = g.var("w2", rng.normal(0, 0.5, (hidden, 2)).astype(dtype))
    b2 = g.var("b2", np.zeros(2, dtype))
    logits = g.math.add(g.nn.relu(x @ w1 + b1) @ w2, b2, name="logits")
    g.set_loss(g.loss.softmax_cross_entropy(logits, y, name="loss"))
    return g


def train_set(seed=0, batch=16, shuffle=True, dtype=np.float64):
    x, y = blobs(seed=seed, dtype=dtype)
    dataset = data.ArrayDataSet({"x": x}, {"y": y})
    if shuffle:
        dataset = dataset >> data.Shuffle(seed=7)
    return dataset >> data.Batch(batch)


def config(updater=None, **options):
    return gv.TrainingConfig(updater or gv.SGD(learning_rate=0.1), ["x"], ["y"], **options)


@pytest.mark.parametrize("updater", [gv.SGD(0.1, momentum=0.9), gv.Adam(0.01), gv.AdamW(0.01), gv.RMSProp(0.01)],
                         ids=["sgd", "adam", "adamw", "rmsprop"])
def test_fit_reduces_the_loss_on_a_separable_problem(updater):
    g = classifier()
    history = g.fit(train_set(), epochs=5, config=config(updater))
    assert history.epoch_losses[-1] < 0.5 * history.epoch_losses[0]
    assert len(history.iteration_losses) == 5 * 8 and len(history.epoch_losses) == 5
    assert g.evaluate(train_set(shuffle=False), "logits", "y").accuracy >= 0.98


def test_fit_in_float32():
    g = classifier("float32")
    history = g.fit(train_set(dtype=np.float32), epochs=3, config=config(gv.Adam(0.02)))
    assert history.epoch_losses[-1] < history.epoch_losses[0]
    assert g.value("w1").dtype == np.float32


def test_epoch_loss_is_the_example_weighted_mean_of_iteration_losses():
    g = classifier()
    history = g.fit(train_set(batch=50), epochs=1, config=config())  # batches of 50, 50, 20
    sizes = np.array([50, 50, 20])
    assert history.epoch_losses[0] == pytest.approx(np.dot(history.iteration_losses, sizes) / 120)


def test_parameters_keep_their_buffers_and_change_in_place():
    g = classifier()
    buffers = {name: g.stored(name) for name in ("w1", "b1", "w2", "b2")}
    before = {name: array.copy() for name, array in buffers.items()}
    g.fit(train_set(), epochs=1, config=config())
    for name, buffer in buffers.items():
        assert g.stored(name) is buffer
        assert not np.array_equal(buffer, before[name])


def test_one_forward_pass_per_step():
    """The loss and the gradients come from one executor run: each forward op runs once per step."""
    from graphview.listeners import Listener  # also gv.Listener

    class Counter(Listener):
        def __init__(self):
            self.runs = {}

        def post_op(self, ctx, node, inputs, outputs):
            self.runs[node.name] = self.runs.get(node.name, 0) + 1

    g = classifier()
    counter = Counter()
    g.fit(train_set(batch=40), epochs=1, config=config(), listeners=[counter])
    assert counter.runs["logits"] == 3 and counter.runs["loss"] == 3


def test_feature_mapping_by_position_and_by_dict():
    x, y = blobs()
    renamed = data.ArrayDataSet({"points": x}, {"classes": y}) >> data.Batch(30)
    g = classifier()
    history = g.fit(renamed, epochs=2, config=config(gv.Adam(0.05)))            # positional
    assert history.epoch_losses[-1] < history.epoch_losses[0]
    g.fit(renamed, epochs=1, config=gv.TrainingConfig(gv.SGD(0.1), {"points": "x"}, {"classes": "y"}))
    with pytest.raises(gv.PlaceholderError, match="no batch label field for placeholder 'z'"):
        g.fit(renamed, epochs=1, config=gv.TrainingConfig(gv.SGD(0.1), ["x"], ["y", "z"]))


def test_trainable_subset_leaves_the_rest_alone():
    g = classifier()
    frozen = g.value("w1")
    g.fit(train_set(), epochs=1, config=config(trainable=["w2", "b2"]))
    np.testing.assert_array_equal(g.value("w1"), frozen)


def test_validation_metrics_in_history_and_printable():
    g = classifier()
    history = g.fit(train_set(), epochs=3, config=config(gv.Adam(0.02), prediction="logits"),
                    validation=train_set(seed=5, shuffle=False, batch=64))
    assert len(history.validation) == 3
    assert set(history.validation[0]) == {"loss", "accuracy"}
    assert history.metric("accuracy")[-1] >= 0.95
    assert history.metric("loss")[-1] < history.metric("loss")[0]
    text = str(history)
    assert "val_accuracy" in text and len(text.splitlines()) == 4
    assert history.to_dict()["epochs"] == [0, 1, 2]


def test_evaluate_against_a_numpy_reference():
    g = classifier()
    g.fit(train_set(), epochs=1, config=config())
    x, y = blobs(seed=3)
    x[:10] = -x[:10]                                  # some mistakes on purpose
    report = g.evaluate(data.ArrayDataSet({"x": x}, {"y": y}) >> data.Batch(25), "logits", "y")
    predicted = g.output({"x": x}, ["logits"])["logits"].argmax(axis=1)
    confusion = np.zeros((2, 2), np.int64)
    for t, p in zip(y, predicted):
        confusion[t, p] += 1
    np.testing.assert_array_equal(report.confusion, confusion)
    assert report.accuracy == pytest.approx(np.mean(predicted == y))
    np.testing.assert_allclose(report.precision, np.diag(confusion) / confusion.sum(axis=0))
    np.testing.assert_allclose(report.recall, np.diag(confusion) / confusion.sum(axis=1))
    text = str(report)
    assert "accuracy" in text and "confusion matrix" in text and "precision" in text


def test_score_listener_logs_every_n_iterations():
    lines = []
    g = classifier()
    g.fit(train_set(), epochs=2, config=config(), listeners=[gv.ScoreListener(every=4, log=lines.append)])
    iteration_lines = [line for line in lines if "iteration" in line]
    assert len(iteration_lines) == 4 and "iteration 4: loss" in iteration_lines[0]
    assert sum("done: mean loss" in line for line in lines) == 2


def test_early_stopping_stops_when_the_monitored_value_stalls():
    g = classifier()
    stopper = gv.EarlyStoppingListener(monitor="loss", patience=2, min_delta=10.0)
    history = g.fit(train_set(), epochs=20, config=config(), listeners=[stopper])
    assert history.stopped_early and len(history.epoch_losses) == 3 and stopper.best_epoch == 0
    with pytest.raises(gv.GraphviewError, match="needs validation metric 'accuracy'"):
        classifier().fit(train_set(), epochs=1, config=config(),
                         listeners=[gv.EarlyStoppingListener(monitor="val_accuracy")])


def test_checkpoint_round_trip_resumes_with_identical_results(tmp_path):
    straight = classifier()
    full = straight.fit(train_set(), epochs=4, config=config(gv.Adam(0.01)))

    first = classifier()
    saver = gv.CheckpointListener(tmp_path, every=2)
    first.fit(train_set(), epochs=2, config=config(gv.Adam(0.01)), listeners=[saver])
    path = tmp_path / "checkpoint-epoch0002.gvz"
    assert saver.saved == [str(path)] and os.path.exists(path)

    resumed = gv.load(path)
    rest = resumed.fit(train_set(), epochs=2, config=config(gv.Adam(0.01)), resume_from=path)
    assert rest.epochs == [2, 3]
    assert rest.iteration_losses == full.iteration_losses[16:]
    for name in ("w1", "b1", "w2", "b2"):
        np.testing.assert_array_equal(resumed.value(name), straight.value(name))


def test_checkpoint_keeps_only_the_newest(tmp_path):
    saver = gv.CheckpointListener(tmp_path, every=1, keep=2)
    classifier().fit(train_set(), epochs=3, config=config(), listeners=[saver])
    assert sorted(os.listdir(tmp_path)) == ["checkpoint-epoch0002.gvz", "checkpoint-epoch0002.state.npz",
                                            "checkpoint-epoch0003.gvz", "checkpoint-epoch0003.state.npz"]


def test_history_plot_writes_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    g = classifier()
    history = g.fit(train_set(), epochs=2, config=config(prediction="logits"), validation=train_set(shuffle=False))
    path = history.plot(tmp_path / "loss.png")
    with open(path, "rb") as handle:
        assert handle.read(8) == b"\x89PNG\r\n\x1a\n"


def test_history_plot_without_matplotlib_says_how_to_install(monkeypatch, tmp_path):
    import builtins
    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    with pytest.raises(ImportError, match=r"pip install 'graphview\[plot\]'"):
        History().plot(tmp_path / "x.png")


def test_progress_bar_only_on_a_terminal(capsys):
    pytest.importorskip("tqdm")
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    assert not ProgressBar.wanted(io.StringIO()) and ProgressBar.wanted(Terminal())
    classifier().fit(train_set(), epochs=1, config=config())
    assert capsys.readouterr().err == ""                  # pytest's stderr is not a terminal
    terminal = Terminal()
    bar = ProgressBar(stream=terminal)
    classifier().fit(train_set(), epochs=1, config=config(), listeners=[bar], progress=False)
    assert "epoch 1" in terminal.getvalue() and "loss=" in terminal.getvalue()


def test_fit_errors():
    g = classifier()
    with pytest.raises(gv.GraphviewError, match="not a MiniBatch; end the pipeline with gv.data.Batch"):
        g.fit(data.ArrayDataSet({"x": blobs()[0]}, {"y": blobs()[1]}), epochs=1, config=config())
    with pytest.raises(gv.GraphviewError, match="config must be a gv.TrainingConfig"):
        g.fit(train_set(), epochs=1, config=gv.SGD(0.1))
    with pytest.raises(gv.GraphviewError, match="updater must be gv.SGD"):
        gv.TrainingConfig("adam", ["x"], ["y"])
    no_loss = gv.Graph()
    no_loss.var("w", np.ones(2))
    with pytest.raises(gv.GraphviewError, match="has no loss; call g.set_loss"):
        no_loss.fit(train_set(), epochs=1, config=config())


def test_train_digits_example_reaches_95_percent(tmp_path, capsys):
    pytest.importorskip("sklearn")
    import importlib.util
    path = os.path.join(os.path.dirname(__file__), os.pardir, "examples", "train_digits.py")
    spec = importlib.util.spec_from_file_location("train_digits", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    accuracy = module.main(["--epochs", "20", "--checkpoints", str(tmp_path)])
    assert accuracy >= 0.95
    assert "confusion matrix" in capsys.readouterr().out
    assert sorted(os.listdir(tmp_path))[0] == "checkpoint-epoch0005.gvz"


# --- dropout in training ------------------------------------------------------------------------

def test_dropout_draws_a_new_mask_per_training_step_shared_by_forward_and_backward():
    from graphview.training.step import GradientStep
    g = gv.Graph()
    x = g.var("x", np.ones(64))
    dropped = g.nn.dropout(x, 0.5, seed=11)
    g.set_loss(g.math.sum(dropped * dropped))
    step = GradientStep(g, ["x"])
    patterns = []
    for number in (0, 1, 0):
        _, gradients = step({}, step=number)
        kept = gradients["x"] != 0
        np.testing.assert_allclose(gradients["x"][kept], 2 * 2.0 * 2.0)     # d/dx (2x)^2 where kept
        patterns.append(kept)
    assert not np.array_equal(patterns[0], patterns[1]) and np.array_equal(patterns[0], patterns[2])
    assert 16 < patterns[1].sum() < 48
    plain = [g.output({}, [dropped])[dropped.name] for _ in range(2)]
    np.testing.assert_array_equal(plain[0], plain[1])                     # outside training: one fixed mask


def test_dropout_is_the_identity_in_inference_evaluation_and_validation():
    g = gv.Graph()
    x = g.placeholder("x", (None, 4))
    dropped = g.nn.dropout(x, 0.5)
    data_ = np.arange(8.0).reshape(2, 4)
    with gv.inference():
        np.testing.assert_array_equal(g.output({"x": data_}, [dropped])[dropped.name], data_)
    trained = classifier()
    reference = trained.evaluate(train_set(shuffle=False), "logits", "y").accuracy
    noisy = classifier()
    noisy_logits = noisy.nn.dropout(noisy["logits"], 0.9, name="noisy")
    assert noisy.evaluate(train_set(shuffle=False), noisy_logits, "y").accuracy == reference


def test_training_with_dropout_resumes_from_a_checkpoint_bit_identically(tmp_path):
    def model():
        g = classifier(hidden=16)
        relu = next(node.name for node in g.nodes() if node.op == "relu")
        hidden = g.nn.dropout(g[relu], 0.3, seed=5)
        g.set_loss(g.loss.softmax_cross_entropy(g.math.add(hidden @ g["w2"], g["b2"]), g["y"], name="dropped"))
        return g

    straight = model()
    straight.fit(train_set(), epochs=2, config=config(gv.SGD(0.1, momentum=0.9)))
    first = model()
    first.fit(train_set(), epochs=1, config=config(gv.SGD(0.1, momentum=0.9)),
              listeners=[gv.CheckpointListener(tmp_path, every=1)])
    path = tmp_path / "checkpoint-epoch0001.gvz"
    resumed = gv.load(path)
    resumed.fit(train_set(), epochs=1, config=config(gv.SGD(0.1, momentum=0.9)), resume_from=path)
    for name in ("w1", "b1", "w2", "b2"):
        np.testing.assert_array_equal(resumed.value(name), straight.value(name))
