"""Cold start: the all-ops gradient check on an empty Numba cache, and where its compile time goes.

The parent process makes two empty cache folders (NUMBA_CACHE_DIR and
GRAPHVIEW_CACHE_DIR) and runs

1. a child process that runs the op suite (``graphview gradcheck`` with no
   TARGET, the CLI's loop and default options) on those empty caches while
   listening to Numba's ``numba:compile`` events: per kernel (module.function)
   the signatures compiled and the seconds spent compiling them (exclusive:
   a callee compiled while typing its caller counts for the callee only), and
   per op the compile seconds its samples triggered;
2. ``graphview gradcheck --quiet`` on the now-filled caches (warm);
3. with ``--cli``, first ``graphview gradcheck --quiet`` on other empty caches
   (the cold time a user sees, without the listener).

Times are wall-clock and CPU (user + system) seconds of whole processes
(import included), with the 1-minute load average after each. The machine
is shared: compare runs of one invocation only.

Run: .venv/bin/python benchmarks/cold_start.py [--cli] [--top N] [--signatures]
"""
import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict

from numba.core import event

from graphview import opsuite

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GRAPHVIEW = os.path.join(os.path.dirname(sys.executable), "graphview")


class CompileRecorder(event.Listener):
    """Per dispatcher: the signatures compiled and their exclusive compile seconds."""

    def __init__(self):
        self.stack = []          # [start, seconds spent in nested compiles]
        self.kernels = defaultdict(lambda: {"signatures": [], "seconds": 0.0})
        self.current = "(import)"
        self.by_op = defaultdict(float)
        self.first_op = {}       # kernel: the op whose samples compiled it first

    def on_start(self, ev):
        self.stack.append([time.perf_counter(), 0.0])

    def on_end(self, ev):
        start, nested = self.stack.pop()
        total = time.perf_counter() - start
        if self.stack:
            self.stack[-1][1] += total
        dispatcher = ev.data["dispatcher"]
        function = dispatcher.py_func
        name = f"{function.__module__}.{function.__qualname__}"
        if "scalar" in function.__code__.co_freevars:     # a kernel built around a scalar function
            scalar = function.__closure__[function.__code__.co_freevars.index("scalar")].cell_contents
            name += f"[{getattr(scalar, '__name__', scalar)}]"
        kernel = self.kernels[name]
        kernel["signatures"].append(", ".join(str(a) for a in ev.data["args"]))
        kernel["seconds"] += total - nested
        self.by_op[self.current] += total - nested
        self.first_op.setdefault(name, self.current)


def child(path):
    """Run the op suite as the CLI does, recording compile events; write the record to ``path``."""
    recorder = CompileRecorder()
    event.register("numba:compile", recorder)
    start = time.perf_counter()
    rows, cases = opsuite.plan(opsuite.selected_ops())
    op_seconds = defaultdict(float)
    for case, sample in cases:
        recorder.current = case.op
        opsuite.run_case(case, sample, {})
        op_seconds[case.op] += case.seconds
    failed = [row.op for row in rows if row.failed]
    record = {"seconds": time.perf_counter() - start, "failed": failed, "kernels": dict(recorder.kernels),
              "compile_by_op": dict(recorder.by_op), "first_op": recorder.first_op, "op_seconds": dict(op_seconds),
              "cases": len(cases)}
    with open(path, "w", encoding="utf-8") as stream:
        json.dump(record, stream)


def timed(command, env):
    """Run ``command``: its wall-clock seconds, CPU seconds (user + system) and exit status."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    result = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    if result.returncode:
        print(result.stdout[-2000:], result.stderr[-2000:], file=sys.stderr)
    return seconds, cpu, result.returncode


def load():
    """The 1-minute load average, to print beside a time (the machine may be shared)."""
    return os.getloadavg()[0]


def cache_env(folders):
    """The environment with two new empty cache folders (appended to ``folders``, removed at the end)."""
    env = dict(os.environ)
    env["NUMBA_CACHE_DIR"] = tempfile.mkdtemp(prefix="cold-numba-")
    env["GRAPHVIEW_CACHE_DIR"] = tempfile.mkdtemp(prefix="cold-graphview-")
    folders += [env["NUMBA_CACHE_DIR"], env["GRAPHVIEW_CACHE_DIR"]]
    return env


def report(record, top, signatures):
    kernels = record["kernels"]
    total = sum(k["seconds"] for k in kernels.values())
    count = sum(len(k["signatures"]) for k in kernels.values())
    print(f"compiled {count} signatures of {len(kernels)} kernels in {total:.1f} s "
          f"(of {record['seconds']:.1f} s running {record['cases']} samples)")
    print(f"\n{'kernel':60} {'sigs':>5} {'seconds':>8}  first compiled for op")
    ranked = sorted(kernels.items(), key=lambda item: -item[1]["seconds"])
    for name, kernel in ranked[:top]:
        print(f"{name:60} {len(kernel['signatures']):5d} {kernel['seconds']:8.2f}  {record['first_op'].get(name, '')}")
        if signatures:
            for signature in kernel["signatures"]:
                print(f"    ({signature})")
    families = defaultdict(lambda: [0, 0.0])
    for name, kernel in kernels.items():
        family = "generated fused kernels" if name.startswith("gv_fused_") else name.split("[")[0].rsplit(".", 1)[0]
        families[family][0] += len(kernel["signatures"])
        families[family][1] += kernel["seconds"]
    print(f"\n{'module':40} {'sigs':>5} {'seconds':>8}")
    for family, (sigs, seconds) in sorted(families.items(), key=lambda item: -item[1][1]):
        print(f"{family:40} {sigs:5d} {seconds:8.2f}")
    print(f"\n{'op':30} {'compile s':>9} {'total s':>8}")
    ops = sorted(record["op_seconds"], key=lambda op: -record["op_seconds"][op])
    for op in ops[:top]:
        print(f"{op:30} {record['compile_by_op'].get(op, 0.0):9.2f} {record['op_seconds'][op]:8.2f}")
    if record["failed"]:
        print(f"\nFAILED ops: {', '.join(record['failed'])}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cli", action="store_true", help="also time a plain cold `graphview gradcheck --quiet`")
    parser.add_argument("--top", type=int, default=25, help="rows of the breakdown tables")
    parser.add_argument("--signatures", action="store_true", help="list each kernel's compiled signatures")
    parser.add_argument("--json", help="write the child's record to this file")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return 0
    folders = []
    try:
        if args.cli:
            seconds, cpu, code = timed([GRAPHVIEW, "gradcheck", "--quiet"], cache_env(folders))
            print(f"cold `graphview gradcheck --quiet`: {seconds:.1f} s, {cpu:.1f} s CPU "
                  f"(exit {code}, load {load():.2f})")
        env = cache_env(folders)
        path = args.json or os.path.join(env["GRAPHVIEW_CACHE_DIR"], "record.json")
        seconds, cpu, code = timed([sys.executable, os.path.abspath(__file__), "--child", path], env)
        print(f"cold op suite with the compile listener: {seconds:.1f} s, {cpu:.1f} s CPU "
              f"(exit {code}, load {load():.2f})")
        warm, cpu, code = timed([GRAPHVIEW, "gradcheck", "--quiet"], env)
        print(f"warm `graphview gradcheck --quiet` (same caches): {warm:.1f} s, {cpu:.1f} s CPU "
              f"(exit {code}, load {load():.2f})\n")
        with open(path, encoding="utf-8") as stream:
            report(json.load(stream), args.top, args.signatures)
    finally:
        for folder in folders:
            shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
