"""Train an MLP on scikit-learn's bundled digits data set (8x8 images, 10 classes; no download).

    python examples/train_digits.py [--epochs 20] [--out DIR] [--plot loss.png] [--checkpoints DIR]
    mpiexec -n 2 python examples/train_digits.py --data-parallel     (the distributed extra: mpi4py, mpich)

Needs the ``examples`` extra (scikit-learn): ``pip install 'graphview[examples]'``.
Reaches about 97-98% test accuracy in a few seconds. ``--out out`` (what ``make run`` passes) leaves the pictures
there: the loss curves as PNG (needs matplotlib, the ``plot`` extra), the model as Graphviz DOT and, where
Graphviz' ``dot`` is installed, as SVG.
"""
import argparse
import os
import shutil
import subprocess
import sys
import time

import numpy as np

import graphview as gv
from graphview.dot import to_dot


def load_digits_split(seed=0):
    try:
        from sklearn.datasets import load_digits
        from sklearn.model_selection import train_test_split
    except ImportError:
        sys.exit("this example needs scikit-learn: pip install 'graphview[examples]'")
    x, y = load_digits(return_X_y=True)
    return train_test_split(x, y.astype(np.int64), test_size=0.2, random_state=seed, stratify=y)


def build_mlp(features=64, hidden=128, classes=10, seed=0, dtype="float64"):
    """x -> relu(x @ w1 + b1) @ w2 + b2 = logits; loss = softmax cross-entropy."""
    rng = np.random.default_rng(seed)
    g = gv.Graph("digits-mlp")
    x = g.placeholder("x", (None, features), dtype)
    y = g.placeholder("y", (None,), "int64")
    with g.name_scope("hidden"):
        w1 = g.var("w", rng.normal(0.0, np.sqrt(2.0 / features), (features, hidden)).astype(dtype))
        b1 = g.var("b", np.zeros(hidden, dtype))
    with g.name_scope("output"):
        w2 = g.var("w", rng.normal(0.0, np.sqrt(1.0 / hidden), (hidden, classes)).astype(dtype))
        b2 = g.var("b", np.zeros(classes, dtype))
    logits = g.math.add(g.nn.relu(x @ w1 + b1) @ w2, b2, name="logits")
    g.set_loss(g.loss.softmax_cross_entropy(logits, y, name="loss"))
    return g


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--out", metavar="DIR", help="write loss.png, the model's DOT and (with Graphviz) SVG here")
    parser.add_argument("--plot", help="write the loss curves to this PNG (needs matplotlib)")
    parser.add_argument("--checkpoints", help="save a graph file here every 5 epochs")
    parser.add_argument("--data-parallel", action="store_true",
                        help="train on every rank of an MPI world at once (run under mpiexec -n N)")
    parser.add_argument("--sharded-update", action="store_true",
                        help="with --data-parallel: each rank updates its chunk of the parameters (BigDL)")
    args = parser.parse_args(argv)
    world = gv.distributed.init() if args.data_parallel else None
    if world is not None and world.rank != 0:   # one rank writes the pictures and the report
        args.out = args.plot = None
    if args.out:  # before training, not after 20 epochs
        prepare_folder(parser, "--out", args.out)

    start = time.perf_counter()
    x_train, x_test, y_train, y_test = load_digits_split()
    train = gv.data.ArrayDataSet({"x": x_train}, {"y": y_train})
    test = gv.data.ArrayDataSet({"x": x_test}, {"y": y_test})
    # One Normalize instance: it learns the pixel statistics on the training pass and reuses them on test data.
    normalize = gv.data.Normalize("x")
    train_batches = train >> gv.data.Shuffle(seed=0) >> normalize >> gv.data.Batch(64)
    test_batches = test >> normalize >> gv.data.Batch(256)

    g = build_mlp()
    schedule = gv.training.CosineDecay(3e-3, total=args.epochs, minimum=3e-4, unit="epoch")
    parallel = gv.distributed.DataParallel(world, sharded_update=args.sharded_update) if world else None
    config = gv.TrainingConfig(updater=gv.AdamW(learning_rate=schedule, weight_decay=1e-4),
                               feature_mapping=["x"], label_mapping=["y"], prediction="logits",
                               data_parallel=parallel)
    listeners = [gv.ScoreListener(every=10_000)]          # one line per epoch
    if args.checkpoints:
        listeners.append(gv.CheckpointListener(args.checkpoints, every=5))
    history = g.fit(train_batches, epochs=args.epochs, config=config, listeners=listeners, validation=test_batches)

    report = g.evaluate(test_batches, output="logits", label="y")   # every rank evaluates its share
    elapsed = time.perf_counter() - start
    if world is None or world.rank == 0:
        print()
        print(report)
        ranks = f" on {world.size} ranks" if world is not None else ""
        print(f"\ntest accuracy {report.accuracy:.4f} after {len(history.epoch_losses)} epochs{ranks} in {elapsed:.1f} s")
    if args.plot:
        print("loss curves written to", history.plot(args.plot))
    if args.out:
        write_pictures(g, history, args.out)
    return report.accuracy


def prepare_folder(parser, option, folder):
    """Create ``folder`` (and its parents) or stop with a usage error that says why it cannot be."""
    if os.path.exists(folder) and not os.path.isdir(folder):
        parser.error(f"{option} {folder}: is a file, not a folder; give a folder for the pictures")
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as error:
        parser.error(f"{option} {folder}: cannot create the folder: {error.strerror or error}")


def write_pictures(graph, history, folder):
    """Write the loss curves (PNG), the graph (DOT) and, if Graphviz is installed, its drawing (SVG) into
    ``folder``, printing each path; a missing matplotlib or Graphviz is reported and skipped."""
    os.makedirs(folder, exist_ok=True)
    print()
    try:
        print("loss curves:", history.plot(os.path.join(folder, "loss.png")))
    except ImportError as error:
        print(f"loss curves: skipped, {error}")
    dot_path = os.path.join(folder, f"{graph.name}.dot")
    with open(dot_path, "w", encoding="utf-8") as file:
        file.write(to_dot(graph))
    print("graph (DOT):", dot_path)
    svg_path = os.path.splitext(dot_path)[0] + ".svg"
    dot = shutil.which("dot")
    if dot is None:
        print(f"graph (SVG): skipped, Graphviz' dot is not installed (then: dot -Tsvg {dot_path} -o {svg_path})")
        return
    done = subprocess.run([dot, "-Tsvg", dot_path, "-o", svg_path], capture_output=True, text=True)
    if done.returncode == 0:
        print("graph (SVG):", svg_path)
    else:
        print(f"graph (SVG): skipped, {dot} failed with exit status {done.returncode}: {done.stderr.strip()}")


if __name__ == "__main__":
    accuracy = main()
    sys.exit(0 if accuracy >= 0.95 else 1)
