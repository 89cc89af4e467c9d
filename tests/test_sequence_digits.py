"""examples/sequence_digits.py: digits read as variable-length sequences by an LSTM layer whose time Dim's
lengths mask the padding (issue 17 item 7). The proof that padding is masked: the padding's values change
no logit, and each sequence run alone at its own length gives the batched logits."""
import importlib.util
import json
import os

import numpy as np
import pytest

import graphview as gv
from graphview.cli import main as cli

ROOT = os.path.join(os.path.dirname(__file__), os.pardir)
PATH = os.path.join(ROOT, "examples", "sequence_digits.py")


def load_example():
    spec = importlib.util.spec_from_file_location("sequence_digits", PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


example = load_example()


@pytest.fixture(scope="module")
def split():
    pytest.importorskip("sklearn")
    return example.load_split("columns")


@pytest.fixture(scope="module")
def trained(split):
    """The example's model after 2 epochs (hidden 32), and its test accuracy."""
    train_x, test_x, y_train, y_test = split
    g, logits = example.build_model(hidden=32, seed=0)
    train = gv.data.ArrayDataSet({"x": train_x}, {"y": y_train}) >> gv.data.Shuffle(seed=0)
    config = gv.TrainingConfig(updater=gv.Adam(learning_rate=1e-2), feature_mapping=example.FEEDS,
                               label_mapping=["y"], blas_threads=1)
    g.fit(train >> gv.data.Batch(32, pad="longest"), epochs=2, config=config)
    test = gv.data.ArrayDataSet({"x": test_x}, {"y": y_test}) >> gv.data.Batch(100, pad="longest")
    accuracy = np.mean(g.predict(test, logits, feature_mapping=example.FEEDS).argmax(axis=1) == y_test)
    return g, logits, accuracy


def test_trim_keeps_the_columns_from_the_first_with_ink_to_the_last():
    image = np.zeros((8, 8))
    image[2, 1], image[5, 4], image[3, 6] = 3.0, 1.0, 2.0          # ink in columns 1, 4 and 6; rows 2, 3, 5
    columns = example.trim(image)
    np.testing.assert_array_equal(columns, image.T[1:7])
    assert columns.shape == (6, 8)
    np.testing.assert_array_equal(example.trim(image, "rows"), image[2:6])
    assert example.trim(np.zeros((8, 8))).shape == (0, 8)


def test_on_the_real_data_every_row_holds_ink_and_columns_give_lengths_2_to_8():
    pytest.importorskip("sklearn")
    rows = [len(s) for part in example.load_split("rows")[:2] for s in part]
    assert set(rows) == {8}                                  # trimming rows would pad nothing
    train_x, test_x, y_train, y_test = example.load_split("columns")
    lengths = np.array([len(s) for s in train_x + test_x])
    assert (lengths.min(), lengths.max(), len(lengths)) == (2, 8, 1797)
    assert np.bincount(lengths).tolist() == [0, 0, 1, 4, 52, 202, 1388, 146, 4]
    assert len(test_x) == 360 and np.bincount(y_test).min() >= 35       # stratified 20%
    assert all(s.shape[1] == 8 and s.max() <= 1.0 and s[[0, -1]].any(axis=1).all() for s in train_x + test_x)


def test_the_gradient_check_target_passes(tmp_path):
    report = tmp_path / "report.json"
    assert cli(["gradcheck", f"{PATH}:build", "--max-per-param", "20", "--json", str(report)]) == 0
    result = json.loads(report.read_text())
    text = json.dumps(result)
    for name in ("net/lstm/weight_ih", "net/lstm/weight_hh", "net/lstm/bias_ih", "net/dense/weight"):
        assert name in text
    g, feeds = example.build()
    assert g["x"].dtype == np.float64 and feeds["seq_len"].min() < feeds["x"].shape[1]     # some padding


def test_two_epochs_beat_chance_clearly(trained):
    assert trained[2] > 0.6                                  # chance is 0.1


def test_the_padding_values_change_no_logit_and_no_finite_padding_changes_a_gradient(split, trained):
    g, logits, _ = trained
    test_x, y_test = split[1][:64], split[3][:64]
    x, lengths = example.padded(test_x, 0.0)
    assert lengths.min() < x.shape[1]
    zero = g.predict({"x": x, "seq_len": lengths}, logits)
    for value in (1e6, -1e300, np.inf, np.nan):
        other = g.predict({"x": example.padded(test_x, value)[0], "seq_len": lengths}, logits)
        np.testing.assert_array_equal(other, zero)
    longer = g.predict({"x": example.padded(test_x, 7.0, steps=12)[0], "seq_len": lengths}, logits)
    np.testing.assert_array_equal(longer, zero)               # more padding steps: the same logits
    names = [v.name for v in g.nodes() if g.is_trainable(v.name)]
    feeds = {"x": x, "seq_len": lengths, "y": y_test}
    gradients = g.calculate_gradients(feeds, names)
    for value in (1e6, -3.5):
        changed = g.calculate_gradients(dict(feeds, x=example.padded(test_x, value)[0]), names)
        for name in names:
            np.testing.assert_array_equal(changed[name], gradients[name], err_msg=name)


def test_each_sequence_alone_at_its_own_length_gives_the_batched_logits(split, trained):
    g, logits, _ = trained
    test_x = split[1]
    x, lengths = example.padded(test_x, 1e6)
    batched = g.predict({"x": x, "seq_len": lengths}, logits)
    alone = np.concatenate([g.predict({"x": s[None], "seq_len": np.array([len(s)])}, logits) for s in test_x])
    np.testing.assert_allclose(alone, batched, rtol=1e-12, atol=1e-12)
    for row in np.flatnonzero(lengths < 8)[:5]:              # one sequence padded, alone: bit for bit
        padded_alone = g.predict({"x": x[row:row + 1], "seq_len": lengths[row:row + 1]}, logits)
        np.testing.assert_array_equal(padded_alone, alone[row:row + 1])


def test_the_logits_are_pytorchs_lstm_over_packed_sequences(split, trained):
    torch = pytest.importorskip("torch")
    g, logits, _ = trained
    test_x = split[1][:50]
    x, lengths = example.padded(test_x, 1e6)
    lstm = torch.nn.LSTM(8, 32, batch_first=True).double()
    linear = torch.nn.Linear(32, 10).double()
    with torch.no_grad():
        for part in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
            getattr(lstm, f"{part}_l0").copy_(torch.from_numpy(g.value(f"net/lstm/{part}")))
        linear.weight.copy_(torch.from_numpy(g.value("net/dense/weight").T))
        linear.bias.copy_(torch.from_numpy(g.value("net/dense/bias")))
        packed = torch.nn.utils.rnn.pack_padded_sequence(torch.from_numpy(x), torch.from_numpy(lengths),
                                                         batch_first=True, enforce_sorted=False)
        _, (h_n, _) = lstm(packed)
        expected = linear(h_n[0]).numpy()
    np.testing.assert_allclose(g.predict({"x": x, "seq_len": lengths}, logits), expected, rtol=1e-10, atol=1e-12)


def test_the_example_reaches_95_percent_and_prints_that_padding_changes_nothing(capsys):
    pytest.importorskip("sklearn")
    accuracy = example.main([])
    printed = capsys.readouterr().out
    assert accuracy >= example.TARGET
    assert "read by rows: lengths 8 to 8" in printed and "read by columns: lengths 2 to 8" in printed
    assert "net/lstm (LSTM)    (?, 64)       18,944" in printed and "total params: 19,594" in printed
    assert f"test accuracy {accuracy:.4f}" in printed
    assert printed.count("max |logits - logits with padding 0| = 0\n") == 2      # 1e6 and NaN
    alone = float(printed.split("max |logits - batched logits| = ")[1].split()[0])
    assert 0 <= alone < 1e-12
