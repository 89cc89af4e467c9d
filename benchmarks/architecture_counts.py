"""Architecture counts for issue 15 (ADR 0017): the "before/after" figures of the redesign.

Reads the source of graphview/ and kernels/ with ``ast`` (nothing is imported, standard library only)
and prints: import cycles among graphview modules (module-level and function-level imports both; each
strongly connected component and one shortest cycle through each of its modules), function-level
imports (total, and per file without those that cut an optional dependency), cross-module reads of
underscore names, the places that call an op definition's shape or dtype rule, lines of code and files
over 500 lines. Run: python benchmarks/architecture_counts.py [REPOSITORY_ROOT]
"""
import ast
import collections
import os
import pathlib
import sys

OPTIONAL = {"matplotlib", "tqdm", "sklearn", "threadpoolctl", "scipy", "mpi4py", "onnx", "torch", "jax"}
PACKAGES = {"graphview": "graphview", "kernels": "graphview_kernels"}   # folder -> import name
LONG = 500


def modules(root):
    """{module name: path} for every .py file under the packages' folders."""
    found = {}
    for folder, package in PACKAGES.items():
        base = os.path.join(root, folder)
        for directory, subdirectories, files in os.walk(base):
            subdirectories[:] = sorted(d for d in subdirectories if d != "__pycache__")
            for file in sorted(files):
                if not file.endswith(".py"):
                    continue
                path = os.path.join(directory, file)
                parts = os.path.relpath(path, base)[:-3].split(os.sep)
                if parts[-1] == "__init__":
                    parts = parts[:-1]
                found[".".join([package] + parts)] = path
    return found


def function_level(tree):
    """The ids of import statements inside a function body (at any depth)."""
    inside = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            for child in ast.walk(node):
                if isinstance(child, (ast.Import, ast.ImportFrom)):
                    inside.add(id(child))
    return inside


def imported(module, is_package, node, known):
    """[(target module or external top-level name, imported name or None)] for one import statement."""
    if isinstance(node, ast.Import):
        return [(alias.name, None) for alias in node.names]
    if node.level:   # relative: resolve against the importing module's package
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[:len(base) - (node.level - 1)]
        source = ".".join(base + ([node.module] if node.module else []))
    else:
        source = node.module or ""
    result = []
    for alias in node.names:
        candidate = f"{source}.{alias.name}"
        result.append((candidate if candidate in known else source, alias.name))
    return result


def internal(target, known):
    """The known module an import names (the longest known prefix), or None for an outside module."""
    parts = target.split(".")
    while parts:
        name = ".".join(parts)
        if name in known:
            return name
        parts.pop()
    return None


def analyse(root):
    known = modules(root)
    trees = {}
    for module, path in known.items():
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        trees[module] = (ast.parse(text, path), text, path)
    edges = collections.defaultdict(dict)           # importer -> {imported: [(line, "module"|"function")]}
    function_imports = collections.Counter()        # path -> count (all)
    function_required = collections.Counter()       # path -> count, without optional dependencies
    private_imports, private_attrs = [], []
    for module, (tree, _, path) in trees.items():
        inside = function_level(tree)
        is_package = path.endswith("__init__.py")
        aliases = {}
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            level = "function" if id(node) in inside else "module"
            targets = imported(module, is_package, node, known)
            if level == "function":
                function_imports[path] += 1
                if not any(t.split(".")[0] in OPTIONAL for t, _ in targets):
                    function_required[path] += 1
            for target, name in targets:
                inner = internal(target, known)
                if inner is None or inner == module:
                    continue
                edges[module].setdefault(inner, []).append((node.lineno, level))
                if name and name.startswith("_") and not name.startswith("__"):
                    private_imports.append((path, node.lineno, f"from {target} import {name}"))
            if isinstance(node, ast.Import):
                for alias in node.names:
                    top = alias.name.split(".")[0]
                    if alias.asname and alias.name in known:
                        aliases[alias.asname] = alias.name
                    elif not alias.asname and top in known:
                        aliases[top] = top
            else:
                for (target, name), alias in zip(targets, node.names):
                    if target in known and target.endswith("." + name):
                        aliases[alias.asname or name] = target
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute) or not node.attr.startswith("_") or node.attr.startswith("__"):
                continue
            owner = node.value
            if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
                continue
            if isinstance(owner, ast.Name) and owner.id in aliases:
                kind = f"module {aliases[owner.id]}"
            else:
                kind = "object"
            private_attrs.append((path, node.lineno, f"{ast.unparse(owner)}.{node.attr}", kind))
    return known, trees, edges, function_imports, function_required, private_imports, private_attrs


Import = collections.namedtuple("Import", "importer target line level commented")
Import.__doc__ = """One module's import of ``target`` (a module of graphview/ or kernels/, or an outside top-level
package) at ``line``; ``level`` "module" or "function"; ``commented``: a comment on the statement's
lines or on the line just above it."""


def import_records(root):
    """[Import] for every import statement of graphview/ and kernels/ (a module importing itself left out)."""
    known = modules(root)
    records = []
    for module, path in known.items():
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        tree, lines = ast.parse(text, path), text.splitlines()
        inside = function_level(tree)
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            level = "function" if id(node) in inside else "module"
            own = lines[node.lineno - 1:node.end_lineno]
            above = lines[node.lineno - 2].strip() if node.lineno > 1 else ""
            commented = any("#" in line for line in own) or above.startswith("#")
            for target, _ in imported(module, path.endswith("__init__.py"), node, known):
                inner = internal(target, known)
                if inner != module:
                    records.append(Import(module, inner or target.split(".")[0], node.lineno, level, commented))
    return records


PrivateRead = collections.namedtuple("PrivateRead", "reader line kind name owner text")
PrivateRead.__doc__ = """A module's use of another module's underscore name: ``kind`` "import" (``from x import
_name``), "module" (``x._name`` through an imported module) or "member" (``<expr>._name`` where ``_name`` is a
member only other modules' classes define; ``owner`` names them)."""


def private_reads(root):
    """[PrivateRead] across the modules of graphview/ and kernels/. ``<expr>`` is anything but self, cls and
    super(); a name the reader's own classes also define is taken as its own."""
    known, trees, _, _, _, private_imports, private_attrs = analyse(root)
    module_of = {path: module for module, (_, _, path) in trees.items()}
    members = {module: class_members(tree) for module, (tree, _, _) in trees.items()}
    reads = []
    for path, line, text in private_imports:
        source, name = text[len("from "):].split(" import ")
        reads.append(PrivateRead(module_of[path], line, "import", name, source, text))
    for path, line, text, kind in private_attrs:
        reader, name = module_of[path], text.rsplit(".", 1)[1]
        if kind.startswith("module "):
            if kind[len("module "):] != reader:
                reads.append(PrivateRead(reader, line, "module", name, kind[len("module "):], text))
            continue
        if text.startswith("super()."):
            continue
        owners = sorted(f"{module}.{cls}" for module, defined in members.items() if module != reader
                        for cls, names in defined.items() if name in names)
        own = any(name in names for names in members[reader].values())
        if owners and not own:
            reads.append(PrivateRead(reader, line, "member", name, ", ".join(owners), text))
    return reads


def class_members(tree):
    """{class name: the underscore names it defines}: methods, class-level assignments, ``__slots__``
    entries and ``self._x`` attributes set or read in its methods (dunder names left out)."""
    found = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef):
            continue
        names = set()
        for statement in node.body:
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
                names.add(statement.name)
            targets = (statement.targets if isinstance(statement, ast.Assign)
                       else [statement.target] if isinstance(statement, ast.AnnAssign) else [])
            for target in targets:
                if isinstance(target, ast.Name):
                    names.add(target.id)
                    if target.id == "__slots__":
                        names.update(c.value for c in ast.walk(statement.value)
                                     if isinstance(c, ast.Constant) and isinstance(c.value, str))
        for child in ast.walk(node):
            if (isinstance(child, ast.Attribute) and isinstance(child.value, ast.Name)
                    and child.value.id == "self"):
                names.add(child.attr)
        found[node.name] = {n for n in names if n.startswith("_") and not n.startswith("__")}
    return found


def components(graph, nodes):
    """Tarjan's strongly connected components with more than one module (or a self-loop)."""
    index, low, on_stack, stack, result = {}, {}, set(), [], []
    counter = [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in graph.get(v, ()):
                result.append(sorted(component))
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return sorted(result, key=lambda c: (-len(c), c))


def shortest_cycle(graph, start, within):
    """The shortest import cycle from ``start`` back to it, staying inside ``within``."""
    previous, queue = {start: None}, collections.deque([start])
    while queue:
        v = queue.popleft()
        for w in sorted(graph.get(v, ())):
            if w not in within:
                continue
            if w == start:
                path = [v]
                while previous[path[-1]] is not None:
                    path.append(previous[path[-1]])
                return list(reversed(path)) + [start]
            if w not in previous:
                previous[w] = v
                queue.append(w)
    return None


def shape_rule_calls(trees):
    """(path, function, line, text) of each call of an op definition's shape or dtype rule.

    Matches ``X.shape(...)`` / ``X.dtype(...)`` with X not NumPy, and calls of a name bound to one:
    a local (``rule = definition.shape``, also in an enclosing function) or a parameter of a function
    of the same file that is called with one (``_run_time_shape(node, rule, ...)``)."""
    found = set()
    for _, (tree, _, path) in trees.items():
        functions = {n.name: n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        parameters = collections.defaultdict(dict)   # function name -> {parameter: "shape" or "dtype"}
        nested = _nested(tree)
        for _ in range(3):   # propagate through calls of functions of this file
            for function in functions.values():
                if function in nested:
                    continue
                _visit(function, set(), functions, parameters, path, found)
    return sorted(found)


def _nested(tree):
    return {child for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            for child in ast.walk(node) if child is not node
            and isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))}


def _visit(function, inherited, functions, parameters, path, found):
    bound = dict(inherited)   # name -> "shape" or "dtype"
    bound.update(parameters[function.name])
    body = []
    stack = list(ast.iter_child_nodes(function))
    while stack:   # this function's own nodes, nested functions visited on their own
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        body.append(node)
        stack.extend(ast.iter_child_nodes(node))
    for node in body:
        if isinstance(node, ast.Assign):
            pairs = []
            for target in node.targets:
                if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
                    pairs += list(zip(target.elts, node.value.elts))
                else:
                    pairs.append((target, node.value))
            bound.update({t.id: v.attr for t, v in pairs if isinstance(t, ast.Name) and _is_rule(v)})
    for node in body:
        if not isinstance(node, ast.Call):
            continue
        if _is_rule(node.func):
            found.add((path, function.name, node.lineno, ast.unparse(node.func), node.func.attr))
        elif isinstance(node.func, ast.Name) and node.func.id in bound:
            found.add((path, function.name, node.lineno, node.func.id, bound[node.func.id]))
        if isinstance(node.func, ast.Name) and node.func.id in functions:
            callee = functions[node.func.id]
            names = [a.arg for a in callee.args.posonlyargs + callee.args.args]
            for position, argument in enumerate(node.args):
                if position < len(names) and _is_rule(argument):
                    parameters[callee.name][names[position]] = argument.attr
                elif position < len(names) and isinstance(argument, ast.Name) and argument.id in bound:
                    parameters[callee.name][names[position]] = bound[argument.id]
    for node in _direct_children(function):
        _visit(node, bound, functions, parameters, path, found)


def _direct_children(function):
    """Functions defined in ``function``'s body, at any depth of statements but not inside another function."""
    result, stack = set(), list(ast.iter_child_nodes(function))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            result.add(node)
            continue
        stack.extend(ast.iter_child_nodes(node))
    return result


def _is_rule(node):
    return (isinstance(node, ast.Attribute) and node.attr in ("shape", "dtype")
            and not (isinstance(node.value, ast.Name) and node.value.id in ("np", "numpy")))


def graphview_cycles(known, edges):
    """The strongly connected components of graphview's import graph (module- and function-level)."""
    graphview = {m for m in known if m.split(".")[0] == "graphview"}
    inner = {v: {w for w in ws if w in graphview} for v, ws in edges.items() if v in graphview}
    return components(inner, graphview)


def graph_private_reads(trees, private_attrs):
    """Reads of Graph's underscore members outside graph.py."""
    graph_private = _private_members(trees["graphview.graph"][0])
    return [a for a in private_attrs if a[3] == "object" and not a[0].endswith(os.path.join("graphview", "graph.py"))
            and a[2].rsplit(".", 1)[1] in graph_private]


def long_files(trees):
    return sorted((trees[m][1].count("\n"), trees[m][2]) for m in trees if trees[m][1].count("\n") > LONG)


def long_support_files(root):
    """(lines, path) of each tests/, examples/ or benchmarks/ Python file over LONG lines."""
    found = []
    for folder in ("tests", "examples", "benchmarks"):
        for path in sorted(pathlib.Path(root, folder).rglob("*.py")):
            lines = path.read_text(encoding="utf-8").count("\n")
            if lines > LONG:
                found.append((lines, str(path.relative_to(root))))
    return found


def summary(root):
    """The figures tests/test_architecture.py holds to a ceiling (ADR 0017's ratchet)."""
    known, trees, edges, _, function_required, private_imports, private_attrs = analyse(root)
    return {
        "import cycles": len(graphview_cycles(known, edges)),
        "function-level imports of required modules": sum(function_required.values()),
        "underscore imports": len(private_imports),
        "reads of Graph's private members outside graph.py": len(graph_private_reads(trees, private_attrs)),
        "places calling a shape rule": sum(1 for c in shape_rule_calls(trees) if c[4] == "shape"),
        "kernels modules importing graphview": sum(1 for m in known if m.startswith("graphview_kernels")
                                                   for w in edges.get(m, ()) if w.split(".")[0] == "graphview"),
        "files over 500 lines": len(long_files(trees)),
        "test, example and benchmark files over 500 lines": len(long_support_files(root)),
    }


def main(root):
    known, trees, edges, function_imports, function_required, private_imports, private_attrs = analyse(root)
    relative = lambda path: os.path.relpath(path, root)   # noqa: E731
    graph = {v: set(targets) for v, targets in edges.items()}
    graphview = {m for m in known if m.split(".")[0] == "graphview"}
    print(f"# Architecture counts for {os.path.abspath(root)}\n")

    print("## Import cycles among graphview modules (module-level and function-level imports)")
    inner = {v: {w for w in ws if w in graphview} for v, ws in graph.items() if v in graphview}
    cycles = graphview_cycles(known, edges)
    module_only = {v: {w for w in ws if w in graphview and any(lv == "module" for _, lv in edges[v][w])}
                   for v, ws in graph.items() if v in graphview}
    print(f"strongly connected components (each one or more cycles): {len(cycles)}")
    for component in components(module_only, graphview):
        print(f"  one of them with module-level imports alone (a cycle at import time): {', '.join(component)}")
    for number, component in enumerate(cycles, 1):
        members = set(component)
        print(f"\n{number}. {len(component)} modules: {', '.join(component)}")
        seen = set()
        for start in component:
            cycle = shortest_cycle(inner, start, members)
            if cycle is None:
                continue
            key = frozenset(zip(cycle, cycle[1:]))
            if key in seen:
                continue
            seen.add(key)
            steps = []
            for a, b in zip(cycle, cycle[1:]):
                levels = sorted({lv for _, lv in edges[a][b]})
                steps.append(f"{a} -[{'/'.join(levels)} l.{edges[a][b][0][0]}]-> ")
            print("   cycle: " + "".join(steps) + cycle[-1])
    kernels_up = [(relative(trees[m][2]), w) for m in known if m.startswith("graphview_kernels")
                  for w in graph.get(m, ()) if w in graphview]
    print(f"\nkernels/ importing graphview: {len(kernels_up)} {kernels_up or ''}")

    print("\n## Function-level imports")
    total, required = sum(function_imports.values()), sum(function_required.values())
    print(f"total: {total}; without those cutting an optional dependency ({', '.join(sorted(OPTIONAL))}): "
          f"{required}")
    for path, count in sorted(function_required.items(), key=lambda item: (-item[1], item[0])):
        print(f"  {count:4d}  {relative(path)}")

    print("\n## Cross-module reads of underscore names")
    print(f"`from x import _name` of a graphview module: {len(private_imports)}")
    for path, line, text in private_imports:
        print(f"  {relative(path)}:{line}: {text}")
    through_module = [a for a in private_attrs if a[3].startswith("module")]
    print(f"`module._name` through an imported graphview module: {len(through_module)}")
    for path, line, text, kind in through_module:
        print(f"  {relative(path)}:{line}: {text} ({kind})")
    objects = [a for a in private_attrs if a[3] == "object"]
    print(f"`<expr>._name` on anything but self/cls (approximation: includes a module's own objects "
          f"and writes): {len(objects)}")
    per_file = collections.Counter(relative(a[0]) for a in objects)
    for path, count in sorted(per_file.items(), key=lambda item: (-item[1], item[0])):
        names = collections.Counter(a[2].rsplit(".", 1)[1] for a in objects if relative(a[0]) == path)
        print(f"  {count:4d}  {path}: {', '.join(f'{n} x{c}' for n, c in names.most_common(6))}")
    graph_members = collections.Counter(a[2].rsplit(".", 1)[1] for a in objects if not a[0].endswith("graph.py"))
    graph_private = _private_members(trees["graphview.graph"][0])
    outside = graph_private_reads(trees, private_attrs)
    print(f"reads of Graph's private members outside graph.py: {len(outside)} in "
          f"{len({a[0] for a in outside})} files "
          f"({', '.join(f'{n} x{c}' for n, c in graph_members.most_common() if n in graph_private)})")

    print("\n## Places that call an op definition's shape or dtype rule")
    calls = shape_rule_calls(trees)
    for rule in ("shape", "dtype"):
        mine = [c for c in calls if c[4] == rule]
        print(f"{rule} rule: {len(mine)}")
        for path, function, line, text, _ in mine:
            print(f"  {relative(path)}:{line} in {function}: {text}(...)")

    print("\n## Lines of code")
    for folder in PACKAGES:
        paths = [p for m, (_, _, p) in trees.items() if os.path.relpath(p, root).split(os.sep)[0] == folder]
        lines = sum(trees[m][1].count("\n") for m in trees if trees[m][2] in paths)
        code = sum(_code_lines(trees[m][1]) for m in trees if trees[m][2] in paths)
        print(f"{folder}/: {len(paths)} files, {lines} lines ({code} neither blank nor comment)")
    long = [(n, relative(path)) for n, path in long_files(trees)]
    print(f"files over {LONG} lines: {len(long)} {', '.join(f'{p} ({n})' for n, p in long)}")


def _private_members(tree):
    """Underscore names a module's classes define (methods and self._x attributes)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("_"):
            names.add(node.name)
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"
                and node.attr.startswith("_") and not node.attr.startswith("__")):
            names.add(node.attr)
    return {n for n in names if not n.startswith("__")}


def _code_lines(text):
    return sum(1 for line in text.splitlines() if line.strip() and not line.strip().startswith("#"))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
