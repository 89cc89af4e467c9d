"""Train a small CNN, built from layers, on scikit-learn's bundled digits data set (8x8 images, 10 classes).

    python examples/cnn_digits.py [--epochs 20] [--learning-rate 0.005] [--seed 0]
    graphview gradcheck examples/cnn_digits.py:build --max-per-param 20

Needs the ``examples`` extra (scikit-learn): ``pip install 'graphview[examples]'``.
The model is issue 17's: two 3x3 convolutions (16 and 32 filters), batch norm, a 2x2 max pool, dropout
and a dense layer, 10,058 parameters (9,994 trainable), trained in float32 with AdamW and a cosine
schedule on the same 80/20 stratified split as train_digits.py. Reaches at least 98.5% test accuracy
(exit status 1 below that) in well under a minute of training. ``build()`` is the same model in
float64 on a small batch, for the gradient checker.
"""
import argparse
import itertools
import sys
import time

import numpy as np

import graphview as gv
from graphview import layers as L

TARGET = 0.985          # issue 17's figure; a PyTorch CNN of this shape reaches it
EPOCHS, LEARNING_RATE = 20, 5e-3


def load_digits_split(seed=0):
    """(x_train, x_test, y_train, y_test): images (n, 1, 8, 8) of pixels 0..16, labels int64."""
    try:
        from sklearn.datasets import load_digits   # optional: the examples extra
        from sklearn.model_selection import train_test_split
    except ImportError:
        sys.exit("this example needs scikit-learn: pip install 'graphview[examples]'")
    x, y = load_digits(return_X_y=True)
    x = x.reshape(-1, 1, 8, 8)
    return train_test_split(x, y.astype(np.int64), test_size=0.2, random_state=seed, stratify=y)


def build_cnn(dtype="float32", seed=0):
    """The graph with its loss set, and its logits: issue 17's CNN on (None, 1, 8, 8) images."""
    g = gv.Graph("cnn")
    x = g.placeholder("x", (None, 1, 8, 8), dtype)
    y = g.placeholder("y", (None,), "int64")
    model = gv.Sequential([
        L.Conv2D(16, 3, padding="same"), L.ReLU(),
        L.Conv2D(32, 3, padding="same"), L.BatchNorm(), L.ReLU(), L.MaxPool2D(2),
        L.Flatten(), L.Dropout(0.25), L.Dense(10),
    ], name="net", seed=seed)
    logits = model(x)
    g.set_loss(g.loss.softmax_cross_entropy(logits, y, name="loss"))
    return g, logits


def build(batch=8, seed=0, margin=2e-5):
    """The gradient checker's target: the CNN in float64 and a batch of ``batch`` random images and labels.

    Outside training mode (a gradient check's default), batch norm normalizes with its running statistics
    and dropout is the identity, so the loss is one deterministic function of the weights, smooth except at its kinks: a ReLU
    input at 0 and a max-pool window whose two largest values are equal. Central differences straddling
    a kink disagree with any gradient (PyTorch's too), and a random batch of 8 has values within 1e-5
    (the checker's step) of one about four times in five, so batches are drawn until every value is more
    than ``margin`` away from a kink."""
    g, _ = build_cnn("float64", seed)
    for attempt in itertools.count():
        rng = np.random.default_rng([seed, attempt])
        placeholders = {"x": rng.uniform(0.0, 1.0, (batch, 1, 8, 8)), "y": rng.integers(0, 10, batch)}
        if distance_to_kinks(g, placeholders) > margin:
            return g, placeholders


def distance_to_kinks(g, placeholders):
    """The smallest |input| of the two ReLUs and the smallest gap between the two largest values of a
    max-pool window (whose largest value is positive: a window of ReLU zeros stays one)."""
    relu_inputs = [g.layers[name]["calls"][0]["inputs"][0] for name in ("net/relu", "net/relu_1")]
    pooled = g.layers["net/max_pool2d"]["calls"][0]["inputs"][0]
    values = g.output(placeholders, relu_inputs + [pooled])
    n, channels, height, width = values[pooled].shape
    windows = values[pooled].reshape(n, channels, height // 2, 2, width // 2, 2).transpose(0, 1, 2, 4, 3, 5)
    top = np.sort(windows.reshape(n, channels, height // 2, width // 2, 4), axis=-1)[..., -2:]
    gaps = (top[..., 1] - top[..., 0])[top[..., 1] > 0]
    return min([gaps.min(initial=np.inf)] + [np.abs(values[name]).min() for name in relu_inputs])


def digits_data(seed=0):
    """(train batches, test batches, test images, test labels): the images scaled by the training pixels'
    mean and std (one Normalize, so the test data gets the training statistics), float32."""
    x_train, x_test, y_train, y_test = load_digits_split()
    mean, std = float(x_train.mean()), float(x_train.std())
    normalize = gv.data.Normalize("x", mean=mean, std=std, per_feature=False)
    train = gv.data.ArrayDataSet({"x": x_train.astype(np.float32)}, {"y": y_train})
    test = gv.data.ArrayDataSet({"x": x_test.astype(np.float32)}, {"y": y_test})
    return (train >> gv.data.Shuffle(seed=seed) >> normalize >> gv.data.Batch(64),
            test >> normalize >> gv.data.Batch(256), ((x_test - mean) / std).astype(np.float32), y_test)


def training_config(logits, epochs, learning_rate=LEARNING_RATE):
    """AdamW with a cosine schedule from ``learning_rate`` down to a twentieth of it over ``epochs``, and one
    BLAS thread (threadpoolctl comes with scikit-learn): this model's matrix products are small, and more
    threads made training 10-15 times slower whenever other processes shared the 2-core machine."""
    schedule = gv.training.CosineDecay(learning_rate, total=epochs, minimum=learning_rate / 20, unit="epoch")
    return gv.TrainingConfig(updater=gv.AdamW(learning_rate=schedule, weight_decay=1e-4),
                             feature_mapping=["x"], label_mapping=["y"], prediction=logits, blas_threads=1)


def train(epochs=EPOCHS, learning_rate=LEARNING_RATE, seed=0, verbose=True):
    """Train the CNN from scratch; returns (graph, logits, test accuracy, seconds of training)."""
    train_batches, test_batches, x_test, y_test = digits_data(seed)
    g, logits = build_cnn("float32", seed)
    if verbose:
        print(g.summary(params=True))
    listeners = [gv.ScoreListener(every=10_000)] if verbose else []   # one line per epoch
    start = time.perf_counter()
    g.fit(train_batches, epochs=epochs, config=training_config(logits.name, epochs, learning_rate),
          listeners=listeners, validation=test_batches)
    seconds = time.perf_counter() - start
    predicted = g.predict(x_test, output=logits.name).argmax(axis=1)
    return g, logits, float(np.mean(predicted == y_test)), seconds


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=EPOCHS)
    parser.add_argument("--learning-rate", type=float, default=LEARNING_RATE)
    parser.add_argument("--seed", type=int, default=0, help="seeds the initial weights, dropout and the shuffle")
    args = parser.parse_args(argv)
    if args.epochs < 1:
        parser.error(f"--epochs must be at least 1, not {args.epochs}")
    _, _, accuracy, seconds = train(args.epochs, args.learning_rate, args.seed)
    print(f"\ntest accuracy {accuracy:.4f} after {args.epochs} epochs, {seconds:.1f} s of training")
    return accuracy


if __name__ == "__main__":
    accuracy = main()
    if accuracy < TARGET:
        print(f"test accuracy {accuracy:.4f} is below the target of {TARGET:.1%}", file=sys.stderr)
    sys.exit(0 if accuracy >= TARGET else 1)
