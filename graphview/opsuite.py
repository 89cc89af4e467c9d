"""The built-in op suite: every registered op's samples through the gradient checker.

This is SameDiff's OpValidation as a command (``graphview gradcheck`` with no
TARGET). Each sample of each differentiable op is checked by
``graphview.gradcheck.check_op`` (placeholders keep the sample's strides; the
loss is a randomly weighted sum of the output, so a rule that permutes or drops
elements cannot pass by symmetry). The result is one :class:`Case` per sample
and one :class:`Coverage` row per op, with the reasons samples were skipped.
"""
import time
from dataclasses import dataclass, field

from graphview import registry
from graphview.config import config
from graphview.errors import GraphviewError, InplaceModificationError, did_you_mean
from graphview.gradcheck import check_op


@dataclass
class Case:
    """One op sample in the suite and what its gradient check found."""
    op: str
    index: int
    label: str
    status: str = "skipped"          # passed, failed, skipped or error
    reason: str = ""
    report: object = None
    seconds: float = 0.0

    @property
    def name(self):
        return f"{self.op}[{self.index}] {self.label}".rstrip()


@dataclass
class Coverage:
    """One op's row in the coverage table."""
    op: str
    family: str
    differentiable: bool
    has_rule: bool
    samples: int
    cases: list = field(default_factory=list)

    def count(self, status):
        return sum(case.status == status for case in self.cases)

    @property
    def status(self):
        if self.differentiable is not False and not self.has_rule:
            return "NO GRADIENT RULE"
        if not self.differentiable:
            return "not differentiable"
        if not self.samples:
            return "NO SAMPLES"
        if self.count("failed") or self.count("error"):
            return "FAILED"
        if not self.count("passed"):
            return "not checked"
        return "ok"

    @property
    def failed(self):
        return self.status in ("FAILED", "NO GRADIENT RULE")


def selected_ops(names=None):
    """Registered op definitions, optionally only ``names`` (unknown names raise GraphviewError)."""
    if not names:
        return registry.definitions()
    unknown = [name for name in names if name not in registry.ops()]
    if unknown:
        named = ", ".join(f"{name!r}{did_you_mean(name, registry.ops())}" for name in unknown)
        raise GraphviewError(f"--ops: no registered op named {named}; an op declared "
                             "with gv.defop needs --import MODULE (package.module or path/to/file.py) "
                             "to be registered (run `graphview ops` for the list)")
    return [registry.get(name) for name in names]


def plan(definitions):
    """The coverage rows and the cases to check, before anything runs."""
    rows, cases = [], []
    for definition in definitions:
        samples = list(definition.samples()) if definition.samples else []
        row = Coverage(definition.name, definition.family, definition.differentiable,
                       definition.has_gradient, len(samples))
        for index, sample in enumerate(samples):
            case = Case(definition.name, index, sample.label)
            if definition.differentiable is False:
                case.reason = "not differentiable"
            elif not definition.has_gradient:
                case.status, case.reason = "failed", "no gradient rule and not marked differentiable=False"
            elif not sample.gradcheck:
                case.reason = "sample marked gradcheck=False"
            else:
                case.status = "pending"
                cases.append((case, sample))
            row.cases.append(case)
        rows.append(row)
    return rows, cases


def run_case(case, sample, options):
    """Check one sample's gradients with ``gv.gradcheck.check_op``; the outcome goes into ``case``.

    The sample's graphs run unfused (``gv.config.fusion`` is restored after): a fused group computes
    bit-identical values (ADR 0024), so no check changes, but each sample's small gradient graph would
    generate and compile kernels of its own that nothing else uses (a fifth of a cold suite's compile time).
    """
    start = time.perf_counter()
    fusion, config.fusion = config.fusion, False
    try:
        case.report = check_op(case.op, sample, **options)
        if case.report is None:
            case.status, case.reason = "skipped", "no floating-point input or output to check"
            return case
        case.status = "passed" if case.report.passed else "failed"
    except InplaceModificationError as error:
        case.status, case.reason = "failed", f"InplaceModificationError: {error}"
    except Exception as error:  # noqa: BLE001 - one broken op must not stop the suite; it is reported
        case.status, case.reason = "error", f"{type(error).__name__}: {error}"
    finally:
        config.fusion = fusion
        case.seconds = time.perf_counter() - start
    return case
