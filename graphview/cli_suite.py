"""The op suite on several processes: ``graphview gradcheck --jobs N`` (ADR 0029).

On an empty Numba cache the suite's time is compiling, one kernel after another. Each op family
(element-wise, reductions, pooling, recurrent cells, ...) compiles mostly kernels of its own, so the
families are shared among ``N`` worker processes: each worker takes the next family not yet taken,
largest first, runs its samples with :func:`graphview.opsuite.run_case` and sends back what each case
found. The compiled kernels land in the one Numba cache, so a later run of either kind loads them. The
workers start with ``spawn`` (a fresh interpreter: no Numba or thread state is copied by ``fork``) and
import the same ``--import`` modules as the command, so the ops those declare are registered there too.
The verdicts and figures are those of a run in one process: each case is checked alone, as there.
"""
import concurrent.futures
import multiprocessing
import os
import sys
import types

from graphview import opsuite, registry
from graphview.distributed import comm
from graphview.targets import import_module

MAX_JOBS = 8
CASES_PER_JOB = 200


def jobs_for(asked, cases, options):
    """How many processes check ``cases``: ``asked`` (default one per core, at most ``MAX_JOBS``, and one
    per ``CASES_PER_JOB`` cases), no more than there are families; one under an MPI launcher (the ranks share the work already) or when the
    suite stops at its first failure (which needs the cases in order)."""
    if options.get("exit_on_first_failure") or comm.launched():
        return 1
    # By default a worker more per CASES_PER_JOB cases: starting one (a fresh interpreter importing
    # graphview) costs 1-2 s, more than a few ops' checks take when their kernels are cached.
    jobs = asked or min(os.cpu_count() or 1, MAX_JOBS, len(cases) // CASES_PER_JOB)
    return max(1, min(jobs, len(families(cases))))


def families(cases):
    """The cases grouped by their op's family, largest group first (the longest tasks start first)."""
    grouped = {}
    for case, sample in cases:
        grouped.setdefault(registry.get(case.op).family, []).append((case, sample))
    return sorted(grouped.values(), key=len, reverse=True)


def run(cases, options, jobs, imports, done):
    """Check ``cases`` (``(Case, Sample)`` pairs from :func:`graphview.opsuite.plan`) on ``jobs`` worker
    processes, filling in each Case; ``done(count)`` is called as the cases of a family come back."""
    groups = families(cases)
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(min(jobs, len(groups)), mp_context=context) as pool:
        # A spawned process imports the caller's main module first (as __mp_main__), and a script that calls
        # graphview.cli.main() without an ``if __name__ == "__main__"`` guard would run again in each
        # worker. The workers need nothing from it, so they are started (at the submits) while an empty
        # module stands in for it.
        caller = sys.modules["__main__"]
        sys.modules["__main__"] = types.ModuleType("__main__")
        try:
            futures = {pool.submit(_worker, [(case.op, case.index) for case, _ in group], options, list(imports)):
                       group for group in groups}
        finally:
            sys.modules["__main__"] = caller
        for future in concurrent.futures.as_completed(futures):
            group = futures[future]
            for (case, sample), found in zip(group, future.result()):
                if found is None:           # an op the workers do not have (registered by this process only)
                    opsuite.run_case(case, sample, options)
                else:
                    case.status, case.reason, case.report, case.seconds = found
            done(len(group))


def _worker(keys, options, imports):
    """In a worker: the cases ``keys`` ((op, sample index) pairs) checked, as (status, reason, report,
    seconds) in that order; None for a case whose op this process does not have."""
    for module in imports:
        import_module(module)
    known = registry.ops()
    wanted = sorted({op for op, _ in keys if op in known})
    _, cases = opsuite.plan([registry.get(op) for op in wanted])
    by_key = {(case.op, case.index): (case, sample) for case, sample in cases}
    results = []
    for key in keys:
        if key not in by_key:               # declared in the calling process only: it checks the case itself
            results.append(None)
            continue
        case, sample = by_key[key]
        opsuite.run_case(case, sample, options)
        results.append((case.status, case.reason, case.report, case.seconds))
    return results
