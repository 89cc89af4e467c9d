"""What ``graphview gradcheck`` writes: tables, the ``--json`` report and ``--junit`` XML.

Everything here reads a :class:`graphview.gradcheck.GradCheckReport` through
its documented fields (``passed``, ``variables``, ``failures``,
``violations``) and the op suite's cases, and never changes them.
"""
import json
import math
import xml.etree.ElementTree as ET



def _get(item, *names, default=None):
    """A field of a report record, whether it is an object or a dict."""
    for name in names:
        if isinstance(item, dict) and name in item:
            return item[name]
        if hasattr(item, name):
            return getattr(item, name)
    return default


def variable_rows(report):
    """``[{variable, shape, checked, passed, failed, max_rel_error, seconds}]`` from ``report.variables``."""
    variables = _get(report, "variables", default=None) or {}
    items = variables.items() if isinstance(variables, dict) else [(_get(v, "variable", "name"), v) for v in variables]
    rows = []
    for name, stats in items:
        shape = _get(stats, "shape")
        rows.append({"variable": str(name), "shape": None if shape is None else [d for d in shape],
                     "checked": int(_get(stats, "checked", default=0)),
                     "passed": int(_get(stats, "passed", default=0)), "failed": int(_get(stats, "failed", default=0)),
                     "max_rel_error": _number(_get(stats, "max_rel_error", "max_relative_error", default=0.0)),
                     "seconds": round(float(_get(stats, "seconds", default=0.0)), 6)})
    return rows


def listed_failures(report, max_failures):
    """``(records, not_listed)``: at most ``max_failures`` failure records per variable, and per variable
    how many were left out (a 10,000-element variable that fails must not write megabytes)."""
    records, listed, not_listed = [], {}, {}
    for record in failure_records(report):
        name = record["variable"]
        if listed.get(name, 0) < max_failures:
            records.append(record)
            listed[name] = listed.get(name, 0) + 1
        else:
            not_listed[name] = not_listed.get(name, 0) + 1
    return records, not_listed


def failure_records(report):
    """One JSON record per failure; ``culprit`` names the op whose gradient rule disagrees, when found."""
    return [{"variable": str(_get(f, "variable")), "index": _index(_get(f, "index")),
             "analytic": _number(_get(f, "analytic")), "numeric": _number(_get(f, "numeric")),
             "rel_error": _number(_get(f, "rel_error")), "abs_error": _number(_get(f, "abs_error")),
             "kind": str(_get(f, "kind", default="gradient")), "message": str(f),
             "culprit": _culprit(_get(f, "culprit"))}
            for f in (_get(report, "failures", default=None) or [])]


def _culprit(culprit):
    if culprit is None:
        return None
    return {"op": _get(culprit, "op"), "node": _get(culprit, "node"), "input": _get(culprit, "input"),
            "position": _get(culprit, "position"), "message": str(culprit)}


def violation_texts(report):
    return [str(v) for v in (_get(report, "violations", default=None) or [])]


def _index(index):
    if index is None:
        return None
    if isinstance(index, (tuple, list)):
        return [int(i) for i in index]
    return int(index)


def _number(value):
    """A float for JSON: NaN and infinities become the strings "NaN", "Infinity", "-Infinity"."""
    if value is None:
        return None
    value = float(value)
    if math.isfinite(value):
        return value
    return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")


def _checked_json(report, max_failures):
    """The per-variable rows, failures (at most ``max_failures`` per variable) and violations of a report."""
    failures, not_listed = listed_failures(report, max_failures)
    variables = variable_rows(report)
    for row in variables:
        row["failures_not_listed"] = not_listed.get(row["variable"], 0)
    return {"variables": variables, "failures": failures, "failures_not_listed": sum(not_listed.values()),
            "violations": violation_texts(report)}


def target_json(target, report, options, max_failures):
    return {"target": target, "passed": bool(report.passed), "options": options,
            **_checked_json(report, max_failures)}


def suite_json(rows, options, max_failures):
    cases = [case for row in rows for case in row.cases]
    return {"target": None, "passed": not any(row.failed for row in rows), "options": options,
            "ops": [{"op": row.op, "family": row.family, "differentiable": row.differentiable,
                     "gradient_rule": row.has_rule, "samples": row.samples, "passed": row.count("passed"),
                     "failed": row.count("failed") + row.count("error"), "skipped": row.count("skipped"),
                     "status": row.status} for row in rows],
            "cases": [{"op": c.op, "sample": c.index, "label": c.label, "status": c.status, "reason": c.reason,
                       "seconds": round(c.seconds, 6),
                       **(_checked_json(c.report, max_failures) if c.report is not None else
                          {"variables": [], "failures": [], "failures_not_listed": 0, "violations": []})}
                      for c in cases]}


def write_json(path, document):
    with open(path, "w", encoding="utf-8") as stream:
        json.dump(document, stream, indent=2, allow_nan=False)
        stream.write("\n")


def table(header, rows):
    """A plain-text table with a rule under the header, columns padded to fit."""
    cells = [list(map(str, header))] + [[str(cell) for cell in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


def max_error(cases):
    errors = [row["max_rel_error"] for case in cases if case.report is not None for row in variable_rows(case.report)
              if isinstance(row["max_rel_error"], float)]
    return f"{max(errors):.2e}" if errors else "-"


def coverage_table(rows):
    body = []
    for row in rows:
        checked = [c for c in row.cases if c.status in ("passed", "failed", "error")]
        body.append((row.op, row.family, row.samples, len(checked), row.count("passed"),
                     row.count("failed") + row.count("error"), max_error(checked), row.status))
    return table(("op", "family", "samples", "checked", "passed", "failed", "max rel error", "status"), body)


def coverage_summary(rows):
    differentiable = [row for row in rows if row.differentiable]
    covered = [row for row in differentiable if row.status == "ok"]
    failed = [row.op for row in rows if row.failed]
    cases = [case for row in rows for case in row.cases]
    checked = sum(case.status in ("passed", "failed", "error") for case in cases)
    line = (f"gradient checks: {len(covered)}/{len(differentiable)} differentiable ops covered, "
            f"{checked} samples checked, {sum(c.status == 'passed' for c in cases)} passed, "
            f"{sum(c.status in ('failed', 'error') for c in cases)} failed, "
            f"{sum(c.status == 'skipped' for c in cases)} skipped")
    if failed:
        line += f"; FAILED: {', '.join(failed)}"
    return line


def junit(suite_name, testcases, seconds=None):
    """JUnit XML text; ``testcases`` are (classname, name, seconds, outcome, message, details); the suite's
    time is ``seconds`` (the whole run, compilation included) or else the sum of its testcases'."""
    root = ET.Element("testsuites", name="graphview gradcheck")
    suite = ET.SubElement(root, "testsuite", name=suite_name)
    counts = {"failure": 0, "error": 0, "skipped": 0}
    total = 0.0
    for classname, name, took, outcome, message, details in testcases:
        case = ET.SubElement(suite, "testcase", classname=classname, name=name, time=f"{took:.6f}")
        total += took
        if outcome in counts:
            counts[outcome] += 1
            element = ET.SubElement(case, outcome, message=message)
            if details:
                element.text = details
    for element in (root, suite):
        element.set("tests", str(len(testcases)))
        element.set("failures", str(counts["failure"]))
        element.set("errors", str(counts["error"]))
        element.set("skipped", str(counts["skipped"]))
        element.set("time", f"{total if seconds is None else seconds:.6f}")
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def target_testcases(target, report, max_failures):
    """One testcase per variable, timed by its own check."""
    failures, not_listed = listed_failures(report, max_failures)
    rows = variable_rows(report)
    testcases = []
    for row in rows:
        mine = [f for f in failures if f["variable"] == row["variable"]]
        outcome = "failure" if row["failed"] or mine else None
        message = (f"{row['failed']} of {row['checked']} elements failed; max relative error "
                   f"{row['max_rel_error']}") if outcome else ""
        culprits = dict.fromkeys(f["culprit"]["message"] for f in mine if f["culprit"])
        message += "".join(f"; {culprit}" for culprit in culprits)
        details = _failure_details(mine, not_listed.get(row["variable"], 0))
        testcases.append((f"gradcheck.{target}", row["variable"], row["seconds"], outcome, message, details))
    listed = {row["variable"] for row in rows}
    for failure in failures:
        if failure["variable"] not in listed:
            listed.add(failure["variable"])
            testcases.append((f"gradcheck.{target}", failure["variable"], 0.0, "failure", "gradient check failed",
                              _describe_failure(failure)))
    violations = violation_texts(report)
    testcases.append((f"gradcheck.{target}", "non-inplace validation", 0.0, "failure" if violations else None,
                      f"{len(violations)} violations" if violations else "", "\n".join(violations)))
    if not report.passed and not any(t[3] for t in testcases):
        testcases.append((f"gradcheck.{target}", "report", 0.0, "failure", "the report did not pass", str(report)))
    return testcases


def suite_testcases(rows, max_failures):
    """One testcase per op sample; a failed sample lists at most ``max_failures`` failures per variable,
    as ``--json`` does, and counts the rest."""
    testcases = []
    for row in rows:
        if row.differentiable and not row.has_rule:
            testcases.append((f"gradcheck.ops.{row.op}", "gradient rule", 0.0, "failure",
                              f"{row.op} is declared differentiable but has no gradient rule", ""))
            continue
        for case in row.cases:
            outcome = {"failed": "failure", "error": "error", "skipped": "skipped"}.get(case.status)
            details = case.reason
            message = case.reason or (f"{len(failure_records(case.report))} elements failed"
                                      if case.report is not None else "")
            if case.report is not None and case.status == "failed":
                details = _report_details(case.report, max_failures)
                culprits = dict.fromkeys(f["culprit"]["message"] for f in failure_records(case.report)
                                         if f["culprit"])
                message += "".join(f"; {culprit}" for culprit in culprits)
            testcases.append((f"gradcheck.ops.{row.op}", f"{case.index} {case.label}".strip(), case.seconds,
                              outcome, message if outcome else "", details if outcome else ""))
    return testcases


def _report_details(report, max_failures):
    """A failed report's summary line, then its listed failures and violations, variable by variable."""
    failures, not_listed = listed_failures(report, max_failures)
    lines = [str(report).splitlines()[0]] if str(report) else []
    for variable in dict.fromkeys([f["variable"] for f in failures] + list(not_listed)):
        mine = [f for f in failures if f["variable"] == variable]
        lines.append(("" if mine else f"{variable}: ") + _failure_details(mine, not_listed.get(variable, 0)))
    lines += violation_texts(report)
    return "\n".join(line for line in lines if line)


def _failure_details(failures, not_listed):
    lines = [_describe_failure(f) for f in failures]
    if not_listed:
        lines.append(f"... and {not_listed} more failures (--max-failures)")
    return "\n".join(lines)


def _describe_failure(f):
    if f["kind"] == "shape":
        return f["message"]
    return (f"{f['variable']}{f['index']}: analytic={f['analytic']} numeric={f['numeric']} "
            f"rel_error={f['rel_error']} abs_error={f['abs_error']}")
