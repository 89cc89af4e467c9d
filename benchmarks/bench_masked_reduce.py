"""Masked reductions as a mode of the plain ones (ADR 0017 decision 5, issue 15 design item 5).

One kernel, ``graphview_kernels.reduce.reduce3``, runs the plain reductions and, given lengths, the
masked ones. This script times it, on the same inputs in one run (best of --repeat), against NumPy
and against the two kernels it replaced (the plain row kernels and ``masked_reduce``), read from git
at --baseline (default: the commit before the switch) and launched as the ops launched them. With
--check it first compares the new outputs with the baseline's, bit for bit (float32 NaNs: as NaN), on
random float64, float32 and integer inputs with NaN and inf, over every axis combination.

Run: python benchmarks/bench_masked_reduce.py [--repeat N] [--size N] [--check] [--baseline REV] [--clock cpu]
"""
import argparse
import importlib
import itertools
import math
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import best_of_turns, table  # noqa: E402

import graphview  # noqa: E402,F401  (registers every op)
from graphview import registry  # noqa: E402
from graphview.ops.masked_common import canonical, place  # noqa: E402
from graphview.ops.reduce import three_axis_view  # noqa: E402
from graphview.shapes import normalize_axes  # noqa: E402
from graphview_kernels.threads import PARALLEL_THRESHOLD, WORKERS  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The last commit with the two kernels (kernels/reduce.py's row kernels, kernels/masked.py's masked_reduce).
BASELINE = "e07b817c87169bc10e81f6a704f84aa0bef020ba"
OLD_MODES = {"sum": 0, "mean": 1, "max": 2, "min": 3, "logsumexp": 4, "count": 5}


CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}
clock = CLOCKS["wall"]   # --clock


def load_baseline(revision):
    """kernels/reduce.py, masked.py and threads.py at ``revision``, as a package in a temporary folder."""
    folder = tempfile.mkdtemp(prefix="graphview-baseline-")
    package = os.path.join(folder, "baseline_kernels")
    os.mkdir(package)
    for name in ("__init__", "reduce", "masked", "threads"):
        text = "" if name == "__init__" else subprocess.run(
            ["git", "show", f"{revision}:kernels/{name}.py"], cwd=ROOT, check=True, capture_output=True,
            text=True).stdout
        with open(os.path.join(package, name + ".py"), "w") as file:
            file.write(text)
    sys.path.insert(0, folder)
    return importlib.import_module("baseline_kernels.reduce"), importlib.import_module("baseline_kernels.masked")


def new_plain(op, x, axis):
    out = np.empty(reduced(x.shape, axis), result_dtype(op, x.dtype))
    registry.get(op).kernel(x, out, axis=axis)
    return out


def new_masked(op, x, lengths, axis):
    out = np.empty(reduced(x.shape, axis), result_dtype(op, x.dtype))
    registry.get("masked_" + op).kernel(x, lengths, out, axis=axis)
    return out


def old_plain(old, op, x, axis):
    """The plain ops' launchers as they were: three_axis_view, then sum3 or one row kernel."""
    x3 = three_axis_view(x, normalize_axes(axis, x.ndim))
    out = np.empty(reduced(x.shape, axis), result_dtype(op, x.dtype))
    out2 = out.reshape(x3.shape[0], x3.shape[2])
    if op in ("sum", "mean"):
        zero = np.float64(0) if op == "mean" or x.dtype.kind == "f" else np.int64(0)
        n = x3.shape[1]
        old.sum3(x3, out2, zero, (1.0 / n if n else np.nan) if op == "mean" else zero + 1)
    elif op == "logsumexp":
        old.logsumexp_rows(x3, out2)
    else:
        old.max_rows(x3, out2, 1 if op == "max" else -1)
    return out


def old_masked(old, op, x, lengths, axis, b=0, t=1):
    """The masked ops' launcher as it was: canonical (B, T, K, M), then masked_reduce(_integer)."""
    axes = normalize_axes(axis, x.ndim)
    reduced_axes = [a for a in range(x.ndim) if a in axes and a not in (b, t)]
    moved, order = canonical(x, b, t, reduced_axes)
    kept_other = [a for a in order[2:] if a not in reduced_axes]
    x4 = moved.reshape(x.shape[b], x.shape[t], math.prod([x.shape[a] for a in kept_other]),
                       math.prod([x.shape[a] for a in reduced_axes]))
    rb, rt = b in axes, t in axes
    out = np.empty(reduced(x.shape, axis), result_dtype(op, x.dtype))
    result = np.empty((1 if rb else x.shape[b], 1 if rt else x.shape[t], x4.shape[2]), out.dtype)
    if out.dtype.kind == "f":
        old.masked_reduce(x4, lengths, result, OLD_MODES[op], rb, rt)
    else:
        start = {"max": np.iinfo(x.dtype).min, "min": np.iinfo(x.dtype).max}.get(op, 0)
        old.masked_reduce_integer(x4, lengths, result, OLD_MODES[op], rb, rt, start)
    kept_order = ([] if rb else [b]) + ([] if rt else [t]) + kept_other
    kept = [a for a in range(x.ndim) if a not in axes]
    place(result.reshape([x.shape[a] for a in kept_order]), kept_order, out.reshape([x.shape[a] for a in kept]), kept)
    return out


def reduced(shape, axis):
    axes = normalize_axes(axis, len(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def result_dtype(op, dtype):
    if dtype.kind == "f":
        return dtype
    return np.dtype(np.int64) if op in ("sum", "count") else dtype if op in ("max", "min") else np.dtype(np.float64)


def numpy_logsumexp(x, axis):
    top = np.max(x, axis=axis, keepdims=True)
    with np.errstate(invalid="ignore"):   # a batch entry with no valid step: -inf - -inf
        return np.log(np.sum(np.exp(x - top), axis=axis)) + np.squeeze(top, axis=axis)


def numpy_masked(function, x, lengths, axis):
    """NumPy's masked reduction: the padding replaced (np.where) by the reduction's neutral value."""
    mask = np.arange(x.shape[1])[None, :, None] < lengths[:, None, None]
    return function(np.where(mask, x, 0.0 if function is np.sum else -np.inf), axis=axis)


def same_bits(a, b):
    """Bit for bit; a float32 NaN may differ in sign (the NaN an operation between two NaNs keeps
    depends on the order the compiler gives its operands)."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype == np.float32:
        nan = np.isnan(a)
        if not np.array_equal(nan, np.isnan(b)):
            return False
        a, b = np.where(nan, 0, a), np.where(nan, 0, b)
    return np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes()


def check(old_reduce, old_masked_kernels):
    """New against baseline, bit for bit, on random inputs with NaN, inf and -0.0; returns the cases."""
    r = np.random.default_rng(17)
    cases = 0
    for dtype in (np.float64, np.float32, np.int64, np.int32):
        for shape in ((4, 6, 3), (3, 5, 2, 4), (5, 300), (2, 7, 1), (0, 3, 2), (3, 0, 2)):
            if dtype in (np.float64, np.float32):
                x = r.normal(scale=1e3, size=shape).astype(dtype)
                flat = x.reshape(-1)
                for value in (np.nan, np.inf, -np.inf, -0.0, 0.0):
                    flat[r.integers(0, max(flat.size, 1), size=min(flat.size, 2))] = value if flat.size else 0
                ops = ("sum", "mean", "max", "min", "logsumexp", "count")
            else:
                x = r.integers(-2 ** 40 if dtype == np.int64 else -1000, 2 ** 40 if dtype == np.int64 else 1000,
                               size=shape).astype(dtype)
                ops = ("sum", "max", "min", "count")
            lengths = r.integers(0, shape[1] + 1, size=shape[0]).astype(np.int64)
            axes = [None] + [c for k in range(1, len(shape) + 1) for c in itertools.combinations(range(len(shape)), k)]
            for axis in axes:
                for op in ops:
                    if op != "count" and not (op in ("max", "min") and 0 in [shape[a] for a in normalize_axes(axis, len(shape))]) \
                            and (op != "logsumexp" and op != "mean" or dtype in (np.float64, np.float32)):
                        new, was = new_plain(op, x, axis), old_plain(old_reduce, op, x, axis)
                        assert same_bits(new, was), f"plain {op} {np.dtype(dtype).name} {shape} axis={axis}: {new} != {was}"
                        cases += 1
                    if len(shape) >= 2:
                        new, was = new_masked(op, x, lengths, axis), old_masked(old_masked_kernels, op, x, lengths, axis)
                        assert same_bits(new, was), f"masked {op} {np.dtype(dtype).name} {shape} axis={axis}: {new} != {was}"
                        cases += 1
    return cases


def timings(old_reduce, old_masked_kernels, size, repeat):
    r = np.random.default_rng(5)
    B, F = 64, 128
    T = max(size // (B * F), 2)
    x = r.normal(size=(B, T, F))
    lengths = r.integers(T // 2, T + 1, size=B).astype(np.int64)
    lengths[0], lengths[1] = 0, T
    print(f"input (B, T, F) = {x.shape} float64, {x.size:,} elements; lengths in [{T // 2}, {T}] (one 0, one {T}); "
          f"best of {repeat}, {clock.__name__}; {WORKERS} worker threads above {PARALLEL_THRESHOLD:,} elements\n")
    rows = []
    for op, function in (("sum", np.sum), ("max", np.max), ("logsumexp", numpy_logsumexp)):
        for axis in (0, 1, 2):
            t_numpy, t_old, t_new = best_of_turns([lambda: function(x, axis=axis),
                                                   lambda: old_plain(old_reduce, op, x, axis),
                                                   lambda: new_plain(op, x, axis)], repeat, clock=clock)
            rows.append((f"{op} axis={axis}", f"{t_numpy * 1e3:.2f}", f"{t_old * 1e3:.2f}", "-", f"{t_new * 1e3:.2f}",
                         f"{t_numpy / t_new:.2f}", f"{t_old / t_new:.2f}"))
        for axis in (1, (1, 2), 0, None):
            t_numpy, t_old, t_new = best_of_turns([lambda: numpy_masked(function, x, lengths, axis),
                                                   lambda: old_masked(old_masked_kernels, op, x, lengths, axis),
                                                   lambda: new_masked(op, x, lengths, axis)], repeat, clock=clock)
            rows.append((f"masked_{op} axis={axis}", f"{t_numpy * 1e3:.2f}", "-", f"{t_old * 1e3:.2f}",
                         f"{t_new * 1e3:.2f}", f"{t_numpy / t_new:.2f}", f"{t_old / t_new:.2f}"))
    flat = x.reshape(-1)
    t_numpy, t_old, t_new = best_of_turns([lambda: np.sum(flat), lambda: old_plain(old_reduce, "sum", flat, None),
                                           lambda: new_plain("sum", flat, None)], repeat, clock=clock)
    rows.append(("sum of all (flat)", f"{t_numpy * 1e3:.2f}", f"{t_old * 1e3:.2f}", "-", f"{t_new * 1e3:.2f}",
                 f"{t_numpy / t_new:.2f}", f"{t_old / t_new:.2f}"))
    print(table(rows, ("case", "NumPy ms", "plain before ms", "masked before ms", "unified ms",
                       "NumPy / unified", "before / unified")))
    small(old_reduce, old_masked_kernels, repeat)


def small(old_reduce, old_masked_kernels, repeat):
    """The per-call cost on small inputs (a bias gradient's sum over a batch): microseconds."""
    r = np.random.default_rng(6)
    x = r.normal(size=(256, 128))
    lengths = r.integers(0, 129, size=256).astype(np.int64)
    rows = []
    for op, function in (("sum", np.sum), ("mean", np.mean), ("max", np.max)):
        t_numpy, t_old, t_new = best_of_turns([lambda: function(x, axis=0), lambda: old_plain(old_reduce, op, x, 0),
                                               lambda: new_plain(op, x, 0)], repeat, number=200, clock=clock)
        rows.append((f"{op} axis=0", f"{t_numpy * 1e6:.1f}", f"{t_old * 1e6:.1f}", "-", f"{t_new * 1e6:.1f}",
                     f"{t_numpy / t_new:.2f}", f"{t_old / t_new:.2f}"))
        t_old, t_new = best_of_turns([lambda: old_masked(old_masked_kernels, op, x, lengths, 1),
                                      lambda: new_masked(op, x, lengths, 1)], repeat, number=200, clock=clock)
        rows.append((f"masked_{op} axis=1", "-", "-", f"{t_old * 1e6:.1f}", f"{t_new * 1e6:.1f}", "-",
                     f"{t_old / t_new:.2f}"))
    print("\nsmall: (256, 128) float64\n")
    print(table(rows, ("case", "NumPy us", "plain before us", "masked before us", "unified us",
                       "NumPy / unified", "before / unified")))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--size", type=int, default=1 << 21, help="elements per input (1e6 to 1e7)")
    parser.add_argument("--check", action="store_true", help="first compare with the baseline bit for bit")
    parser.add_argument("--baseline", default=BASELINE, help="the git revision of the kernels compared with")
    parser.add_argument("--clock", choices=CLOCKS, default="wall",
                        help="cpu: the process's CPU time (every thread's), steadier on a loaded machine")
    arguments = parser.parse_args()
    global clock
    clock = CLOCKS[arguments.clock]
    old_reduce, old_masked_kernels = load_baseline(arguments.baseline)
    if arguments.check:
        print(f"bit-identical to {arguments.baseline} on {check(old_reduce, old_masked_kernels)} cases\n")
    timings(old_reduce, old_masked_kernels, arguments.size, arguments.repeat)


if __name__ == "__main__":
    main()
