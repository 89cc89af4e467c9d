"""The ``graphview`` command: gradcheck, summary, ops, dot and adr.

``main(argv)`` returns the exit status: 0 when every check passed, 1 when a
gradient check failed or the non-inplace validation listener found a
violation, 2 for usage or input errors, which are one line on stderr (the
traceback only with ``--debug``). See adr/0011-cli-design.md.
"""
import argparse
import contextlib
import inspect
import math
import os
import sys
import time
import traceback

from graphview import __version__, cli_report, cli_suite, opsuite, registry
from graphview.adr.cli import register as add_adr_command
from graphview.cli_progress import activity, shown
from graphview.cli_usage import chosen_parser, unrecognized, with_suggestion
from graphview.distributed.comm import init, launched
from graphview.dot import to_dot
from graphview.errors import GraphviewError, InplaceModificationError, did_you_mean
from graphview.gradcheck import check_gradients
from graphview.onnx.export import export as export_onnx
from graphview.targets import TargetError, import_module, load_target, read_inputs
from graphview.variable import Kind

PASSED, FAILED, USAGE = 0, 1, 2
PROGRESS_DELAY = 1.0  # seconds before a progress bar appears on a terminal
STATUS_LINES_DELAY = 5.0  # seconds before status lines appear in a log (quick commands write none)
DEFAULT_MAX_FAILURES = 20  # failures listed per variable in --json and --junit


class UsageError(Exception):
    """A usage or input error: one line on stderr, exit status 2."""


class _Parser(argparse.ArgumentParser):
    """argparse, with its errors as one line on stderr instead of usage text, and a "did you mean"."""

    def error(self, message):
        raise UsageError(f"{self.prog}: error: {with_suggestion(message)}")


def _number(kind, minimum):
    """An argparse type: a finite ``kind`` greater than 0 (``minimum="positive"``) or at least 0."""
    def convert(text):
        try:
            value = kind(text)
        except ValueError:
            described = {int: "an integer", float: "a number"}.get(kind, kind.__name__)
            raise argparse.ArgumentTypeError(f"{text!r} is not {described}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
        if minimum == "positive" and not value > 0:
            raise argparse.ArgumentTypeError(f"{text!r} must be greater than 0")
        if minimum == "non-negative" and not value >= 0:
            raise argparse.ArgumentTypeError(f"{text!r} must be 0 or more")
        return value
    return convert


def _positive(kind):
    return _number(kind, "positive")


def _non_negative(kind):
    return _number(kind, "non-negative")


def _names(text):
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        raise argparse.ArgumentTypeError("give at least one name, separated by commas")
    return names


def _writable_path(text):
    """An argparse type for a file the command will write: checked when the arguments are parsed, so a
    path that cannot be written stops the command before any work runs (and nothing is created)."""
    path = os.path.abspath(text)
    folder = os.path.dirname(path)
    if os.path.isdir(path):
        raise argparse.ArgumentTypeError(f"{text!r} is a directory; give a file path to write")
    if not os.path.isdir(folder):
        raise argparse.ArgumentTypeError(f"cannot write {text!r}: no such directory {folder!r} (create it first)")
    if not os.access(folder, os.W_OK | os.X_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise argparse.ArgumentTypeError(f"cannot write {text!r}: permission denied")
    return text


def build_parser():
    parser = _Parser(prog="graphview", description="Gradient checks, graph files and op listings for graphview.")
    parser.add_argument("--version", action="version", version=f"graphview {__version__}")
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error")
    # Also before the command (`graphview --import m ops`); its own dest, since a sub-command's defaults
    # would overwrite this one's values.
    parser.add_argument("--import", action="append", dest="imports_first", default=[], metavar="MODULE",
                        help="import MODULE first (as the commands' --import)")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="show the traceback of an error")
    common.add_argument("--import", action="append", dest="imports", default=[], metavar="MODULE",
                        help="import MODULE first (package.module or path/to/file.py; repeatable), e.g. the "
                             "module declaring the gv.defop ops a graph file or --ops names")

    check = commands.add_parser(
        "gradcheck", parents=[common], help="check gradients of a TARGET, or of every registered op",
        description="Compare analytic gradients with central differences (gv.check_gradients). With no TARGET, "
                    "check every registered op on its samples and print per-op coverage.")
    check.add_argument("target", nargs="?", metavar="TARGET",
                       help="a graph file, path/to/file.py:function or package.module:function "
                            "(the function returns (graph, placeholders))")
    check.add_argument("--eps", type=_positive(float), help="finite-difference step (default 1e-5)")
    check.add_argument("--max-rel-error", type=_non_negative(float), help="largest relative error that passes "
                       "(default 1e-5)")
    check.add_argument("--min-abs-error", type=_non_negative(float), help="absolute errors below this always pass (default 1e-6)")
    check.add_argument("--wrt", type=_names, metavar="NAME,...", help="variables to check (default: every "
                       "trainable floating-point variable)")
    check.add_argument("--skip", type=_names, metavar="NAME,...", help="variables not to check")
    check.add_argument("--max-per-param", type=_positive(int), metavar="N", help="check at most N elements "
                       "of each variable")
    check.add_argument("--subset", choices=("random", "every_n"), help="which elements --max-per-param picks")
    check.add_argument("--seed", type=_non_negative(int), help="seed of the random subset")
    check.add_argument("--exit-on-first-failure", action="store_true", help="stop at the first failure")
    check.add_argument("--fast", action="store_true", help="one random projection per input; a full check "
                       "explains any failure")
    check.add_argument("--no-validate-inplace", action="store_true", help="do not attach the non-inplace "
                       "validation listener")
    check.add_argument("--activations", action="store_true", help="also check gradients of intermediate values")
    check.add_argument("--inputs", metavar="FILE.npz", help="placeholder values by name (over those stored "
                       "in a graph file)")
    check.add_argument("--loss", metavar="NAME", help="for a graph without a loss (an ONNX model): check the sum "
                       "of output NAME (default for an ONNX model: its first output)")
    check.add_argument("--ops", type=_names, metavar="NAME,...", help="only these ops (built-in suite only)")
    check.add_argument("--jobs", type=_positive(int), metavar="N", help="processes sharing the op suite's "
                       "families (default: one per core and per 200 samples, at most 8; built-in suite only)")
    check.add_argument("--max-failures", type=_non_negative(int), default=DEFAULT_MAX_FAILURES, metavar="N",
                       help="list at most N failures per variable in --json and --junit, then their count "
                            f"(default {DEFAULT_MAX_FAILURES})")
    check.add_argument("--json", type=_writable_path, metavar="PATH", help="write the report as JSON")
    check.add_argument("--junit", type=_writable_path, metavar="PATH", help="write JUnit XML for CI")
    check.add_argument("--quiet", action="store_true", help="only the verdict line; no progress bar")
    check.set_defaults(func=_gradcheck)

    summary = commands.add_parser("summary", parents=[common], help="print the variables of a TARGET's graph",
                                  description="Print g.summary() of a graph file or a function target.")
    summary.add_argument("target", metavar="TARGET")
    summary.add_argument("--params", action="store_true",
                         help="the layers instead: output shape and parameter count of each, and the totals")
    summary.set_defaults(func=_summary)

    listing = commands.add_parser("ops", parents=[common], help="list every registered op",
                                  description="Every registered op: family, differentiable, in-place, view, "
                                              "samples and gradient-check coverage.")
    listing.set_defaults(func=_ops)

    convert = commands.add_parser("convert", parents=[common], help="convert between graph files and ONNX",
                                  description="Convert an ONNX model to a graph file (model.onnx model.gvz), or "
                                              "a graph file or function TARGET to ONNX (model.gvz model.onnx "
                                              "--outputs logits).")
    convert.add_argument("source", metavar="SOURCE")
    convert.add_argument("destination", type=_writable_path, metavar="DESTINATION")
    convert.add_argument("--outputs", type=_names, metavar="NAME,...", help="the graph outputs an ONNX file gets "
                         "(needed when writing ONNX)")
    convert.add_argument("--opset", type=_positive(int), default=17, help="ONNX opset to write (default 17)")
    convert.set_defaults(func=_convert)

    dot = commands.add_parser("dot", parents=[common], help="print a TARGET's graph as Graphviz DOT",
                              description="Graphviz DOT of a graph; views and in-place writes are marked.")
    dot.add_argument("target", metavar="TARGET")
    dot.set_defaults(func=_dot)

    adr = add_adr_command(commands)
    adr.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    return parser


def main(argv=None):
    """Run the ``graphview`` command with ``argv`` (default ``sys.argv[1:]``); return the exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    debug = "--debug" in argv
    search_path = list(sys.path)  # targets and --import modules put their folders first, as Python would
    prog = "graphview"            # every error line starts "graphview[ COMMAND]: error: ", as argparse's do
    try:
        parser = build_parser()
        args, extras = parser.parse_known_args(argv)
        if args.command is None:
            raise UsageError("graphview: error: give a command: gradcheck, summary, convert, ops, dot or adr (see graphview --help)")
        prog = f"graphview {args.command}"
        if extras:
            raise UsageError(unrecognized(chosen_parser(parser, args), extras))
        args.imports = args.imports_first + getattr(args, "imports", [])
        _import_modules(args)
        return int(args.func(args) or 0)
    except SystemExit as exit:  # --help, --version and sub-commands that call sys.exit
        return exit.code if isinstance(exit.code, int) else (0 if exit.code is None else USAGE)
    except KeyboardInterrupt:
        print("graphview: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `graphview ops | head`: the reader left; say nothing more
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
    except Exception as error:  # noqa: BLE001 - every failure becomes one line and exit status 2
        if debug:
            traceback.print_exc()
        print(_one_line(error, prog), file=sys.stderr)
        return USAGE
    finally:
        sys.path[:] = search_path


def _import_modules(args):
    """Import each ``--import MODULE`` (so that the ops it declares with gv.defop are registered)."""
    for module in getattr(args, "imports", ()):
        with _progress(args, f"importing {module}"):
            try:
                import_module(module)
            except TargetError as error:
                raise TargetError(f"--import {module}: {error}") from error


def _one_line(error, prog):
    """``error`` as one line starting ``prog: error: `` (``prog``: "graphview" and the command)."""
    text = " ".join(str(error).split())
    if isinstance(error, UsageError) and text.startswith("graphview"):
        return text                                          # already says which command
    if isinstance(error, (UsageError, TargetError, GraphviewError)):
        return f"{prog}: error: {text}"
    if isinstance(error, OSError):
        return f"{prog}: error: {error.strerror or text}: {error.filename or ''}".rstrip(": ")
    return f"{prog}: internal error: {type(error).__name__}: {text} (run with --debug for the traceback)"


# --- convert -------------------------------------------------------------------------

def _convert(args):
    if args.destination.endswith(".onnx"):
        if not args.outputs:
            raise UsageError("graphview convert: error: writing ONNX needs --outputs NAME,... (the outputs the "
                             "ONNX graph gives, e.g. --outputs logits)")
        graph, _ = load_target(args.source)
        export_onnx(graph, args.destination, args.outputs, opset=args.opset)   # checks the outputs itself
    elif args.destination.endswith(".gvz"):
        if not args.source.endswith(".onnx"):
            raise UsageError("graphview convert: error: a graph file (.gvz) is written from an ONNX model (.onnx)")
        graph, _ = load_target(args.source)
        graph.save(args.destination)
    else:
        raise UsageError(f"graphview convert: error: {args.destination}: write a .gvz graph file or a .onnx model")
    print(f"{args.source} -> {args.destination}")
    return PASSED


# --- summary, ops, dot -------------------------------------------------------------

def _load(args, **options):
    with _progress(args, f"loading {args.target}"):
        return load_target(args.target, **options)


def _summary(args):
    graph, placeholders = _load(args)
    print(graph.summary(params=args.params))
    if graph.losses:
        print(f"losses: {', '.join(v.name for v in graph.losses)}")
    if placeholders:
        print(f"stored placeholder values: {', '.join(sorted(placeholders))}")
    return PASSED


def _dot(args):
    graph, _ = _load(args)
    sys.stdout.write(to_dot(graph))
    return PASSED


def _ops(args):
    rows, refused = [], []
    for definition in registry.definitions():
        samples = list(definition.samples()) if definition.samples else []
        checkable = sum(sample.gradcheck for sample in samples)
        if definition.differentiable is False:
            coverage = "-"
        elif not definition.has_gradient:
            coverage = "NO GRADIENT RULE"
        else:
            coverage = f"{checkable}/{len(samples)} samples"
        inplace = ",".join(map(str, definition.inplace)) if definition.inplace else "no"
        differentiable = {True: "yes", False: "no", None: "undeclared"}[definition.differentiable]
        if definition.no_gradient:
            differentiable = "refused"
            refused.append(f"  {definition.name}: {definition.no_gradient}")
        rows.append((definition.name, definition.family, differentiable, inplace,
                     "yes" if definition.view else "no", len(samples), coverage))
    print(cli_report.table(("op", "family", "differentiable", "in-place", "view", "samples", "gradcheck"), rows))
    if refused:
        print("\ndifferentiation refused (gradients cannot pass through these ops):")
        print("\n".join(refused))
    print(f"{len(rows)} ops; `graphview gradcheck` runs the gradient checks "
          "(`--ops NAME,...` for some of them)")
    return PASSED


# --- gradcheck -----------------------------------------------------------------------

OPTION_NAMES = ("eps", "max_rel_error", "min_abs_error", "max_per_param", "subset", "seed")
FLAGS = ("exit_on_first_failure", "fast", "activations")


def check_options(args):
    """The ``gv.check_gradients`` keyword arguments the user gave (the engine keeps its own defaults)."""
    options = {name: getattr(args, name) for name in OPTION_NAMES if getattr(args, name) is not None}
    options.update({name: True for name in FLAGS if getattr(args, name)})
    if args.no_validate_inplace:
        options["validate_inplace"] = False
    return options


def effective_options(options):
    """``options`` with the engine's defaults for the rest, read from ``check_gradients``'s signature:
    what the JSON report records, so a report says which eps and tolerances judged it."""
    parameters = inspect.signature(check_gradients).parameters
    effective = {name: parameters[name].default for name in OPTION_NAMES + FLAGS + ("validate_inplace",)}
    effective.update(options)
    return _jsonable(effective)


def _gradcheck(args):
    """Under ``mpiexec -n N`` every rank checks its share (see check_gradients); rank 0 alone prints the
    report, shows progress and writes --json and --junit, and every rank exits with the same status."""
    args.rank = init().rank if launched() else 0
    if args.rank == 0:
        return _gradcheck_here(args)
    with open(os.devnull, "w", encoding="utf-8") as devnull, contextlib.redirect_stdout(devnull):
        return _gradcheck_here(args)


def _gradcheck_here(args):
    options = check_options(args)
    if args.target is None:
        for flag, value in (("--wrt", args.wrt), ("--skip", args.skip), ("--inputs", args.inputs)):
            if value is not None:
                raise UsageError(f"graphview gradcheck: error: {flag} needs a TARGET (the op suite checks every "
                                 "floating-point input of every sample)")
        document, junit, passed = _check_suite(args, options)
    else:
        if args.ops is not None:
            raise UsageError("graphview gradcheck: error: --ops is for the built-in op suite, not a TARGET")
        document, junit, passed = _check_target(args, options)
    if args.rank != 0:
        return PASSED if passed else FAILED
    if args.json:
        cli_report.write_json(args.json, document)
    if args.junit:
        with open(args.junit, "w", encoding="utf-8") as stream:
            stream.write(junit)
    return PASSED if passed else FAILED


def _progress(args, description, **settings):
    mode = shown(args)
    return activity(mode, description, delay=STATUS_LINES_DELAY if mode == "lines" else PROGRESS_DELAY, **settings)


def _check_target(args, options):
    with _progress(args, f"gradcheck {args.target}", total=0, unit="element") as bar:
        bar.doing("building the graph")
        graph, placeholders = _load_for_check(args)
        if args.wrt is not None:
            options["wrt"] = args.wrt
        if args.skip is not None:
            options["skip"] = tuple(args.skip)
        bar.doing("")
        start = time.perf_counter()
        try:
            report = check_gradients(graph, placeholders, progress=bar.advance, **options)
        except InplaceModificationError as error:
            print(f"FAILED: the non-inplace validation listener stopped the check: {error}")
            document = {"target": args.target, "passed": False, "options": effective_options(options),
                        "variables": [], "failures": [], "violations": [str(error)]}
            testcase = (f"gradcheck.{args.target}", "non-inplace validation", 0.0, "failure", str(error), "")
            return document, cli_report.junit(f"graphview.gradcheck.{args.target}", [testcase]), False
    seconds = time.perf_counter() - start
    passed = bool(report.passed)
    if not args.quiet:
        print(str(report))
    verdict = "PASSED" if passed else "FAILED"
    print(f"{verdict}: gradient check of {args.target} (graph {graph.name!r}) in {seconds:.2f}s")
    document = cli_report.target_json(args.target, report, effective_options(options), args.max_failures)
    junit = cli_report.junit(f"graphview.gradcheck.{args.target}",
                             cli_report.target_testcases(args.target, report, args.max_failures), seconds)
    return document, junit, passed


def _load_for_check(args):
    graph, placeholders = load_target(args.target, need_loss=True, loss=args.loss)
    names = [node.name for node in graph.nodes()]
    for flag, given in (("--wrt", args.wrt), ("--skip", args.skip)):
        for name in given or ():
            if name not in graph:
                raise TargetError(f"{flag} {name}: graph {graph.name!r} has no variable named {name!r}"
                                  f"{did_you_mean(name, names)}")
    if not args.inputs and args.target.endswith(".onnx"):
        needed = graph.ancestors([loss.name for loss in graph.losses])
        wanted = [node for node in graph.nodes() if node.kind is Kind.PLACEHOLDER and node.name in needed]
        if wanted:
            listed = ", ".join(f"{node.name} ({', '.join('?' if d is None else str(d) for d in node.shape)}) "
                               f"{node.dtype}" for node in wanted)
            raise TargetError(f"{args.target}: an ONNX model stores no input values; give its inputs ({listed}) "
                              "as an .npz file of arrays by name: --inputs FILE.npz")
    if args.inputs:
        inputs = read_inputs(args.inputs)
        known = [node.name for node in graph.nodes() if node.kind is Kind.PLACEHOLDER]
        for name in inputs:
            if name not in known:
                raise TargetError(f"--inputs {args.inputs}: {name!r} is not a placeholder of graph "
                                  f"{graph.name!r}{did_you_mean(name, known)}; its placeholders are: "
                                  f"{', '.join(known) or 'none'}")
        placeholders.update(inputs)
    return graph, placeholders


def _check_suite(args, options):
    try:
        definitions = opsuite.selected_ops(args.ops)
    except Exception as error:
        raise UsageError(f"graphview gradcheck: error: {error}") from error
    rows, cases = opsuite.plan(definitions)
    start = time.perf_counter()
    jobs = cli_suite.jobs_for(args.jobs, cases, options)
    with _progress(args, "gradcheck ops", total=len(cases), unit="sample") as bar:
        if jobs > 1:
            bar.doing(f"{jobs} processes")
            cli_suite.run(cases, options, jobs, args.imports, bar.update)
        else:
            for case, sample in cases:
                bar.doing(f"{case.op}[{case.index}]")
                opsuite.run_case(case, sample, options)
                bar.update()
                if options.get("exit_on_first_failure") and case.status in ("failed", "error"):
                    break
    for case, _ in cases:
        if case.status == "pending":
            case.status, case.reason = "skipped", "not run: --exit-on-first-failure stopped the suite"
    seconds = time.perf_counter() - start
    passed = not any(row.failed for row in rows)
    if not args.quiet:
        print(cli_report.coverage_table(rows))
        for row in rows:
            for case in row.cases:
                if case.status in ("failed", "error"):
                    print(f"\n{case.name}: {case.status.upper()}" + (f": {case.reason}" if case.reason else ""))
                    if case.report is not None:
                        print(str(case.report))
        print()
    print(cli_report.coverage_summary(rows))
    print(f"{'PASSED' if passed else 'FAILED'}: gradient checks of {len(rows)} ops in {seconds:.2f}s")
    document = cli_report.suite_json(rows, effective_options(options), args.max_failures)
    junit = cli_report.junit("graphview.gradcheck.ops", cli_report.suite_testcases(rows, args.max_failures), seconds)
    return document, junit, passed


def _jsonable(options):
    return {key: (list(value) if isinstance(value, tuple) else value) for key, value in options.items()}


if __name__ == "__main__":
    sys.exit(main())
