"""Generated Numba kernels for fused element-wise groups, cached on disk as real modules (ADR 0024).

A fused group is a list of members, each a scalar function of ``graphview_kernels.elementwise`` applied
to the group's inputs or to earlier members, with the member's dtype. :func:`source` writes one kernel
for it, ``kernel(*inputs, out, lo, hi)``: one loop over C-contiguous operands, each input of the
output's size or a single element (read once, before the loop). (A 4-D strided form for broadcast and
strided inputs measured slower than the ops one by one; such groups run unfused.) Each member's
result is converted to its dtype as its buffer would have stored it, so a fused group computes exactly
what its ops compute one by one.

Numba cannot cache a function compiled from ``exec``'d text (numba issue 3501), so :func:`load` writes
the source to ``<cache_dir>/fused/gv_fused_<hash>.py`` and imports that file as a module whose kernels
say ``cache=True``: a later process imports it and loads the compiled code from Numba's cache beside it.
The hash covers the source, the scalar functions' file and Numba's version, so an edit recompiles. The
folder keeps at most ``gv.config.max_cached_kernels`` kernels (the least recently used go first). When it
cannot be written, one warning says so and kernels are compiled in memory, per process.
"""
import functools
import hashlib
import importlib.util
import os
import sys
import threading
import warnings

import numba

from graphview.config import config
from graphview_kernels import elementwise, reduce

FORMAT = 1                                  # bump when the generated text changes meaning
JIT = "cache={cache}, nogil=True, error_model='numpy'"
PREFIX = "gv_fused_"

_lock = threading.Lock()
_loaded = {}                                # hash -> module, per process
_folders = {}                               # cache folder -> itself when writable, else None


@functools.cache
def _salt():
    """What a kernel's hash covers besides its text, read on the first kernel (not at import): the files of
    the compiled functions it calls (Numba's cache of a generated module checks only that module's file)."""
    digest = hashlib.sha256()
    for module in (elementwise, reduce):
        with open(module.__file__, "rb") as file:
            digest.update(file.read())
    return f"format {FORMAT}; numba {numba.__version__}; kernels {digest.hexdigest()}"


def _expression(member, names):
    function, arguments, dtype = member
    return f"{function}({', '.join(names[a] for a in arguments)})", dtype


def source(members, inputs, single=()):
    """The module text of one kernel named ``kernel``. ``members``: ``(scalar function name, argument
    references, dtype name)`` in run order, a reference being an input position (int) or ``("t", k)``,
    member k's value; the last member is the output. ``inputs``: the number of inputs; ``single``: the
    input positions holding one element."""
    lines = _header(members) + [f"def kernel({_arguments(inputs)}, out, lo, hi):",
                                "    z = out.reshape(out.size)[lo:hi]"]
    lines += _loop(members, inputs, single, "[lo:hi]", "range(hi - lo)", "z[i]")
    return "\n".join(lines) + "\n"


def reduction_source(members, inputs, single=()):
    """The module text of one kernel ``kernel(*inputs, lo, hi, zero)`` returning the sum of the group's
    values (the last member, stored in its dtype) at flat positions [lo, hi) in the type of ``zero``,
    computed in exactly the order of ``graphview_kernels.reduce.pairwise_sum`` (blocks of ``BLOCK``
    values from ``lo``, each summed by ``block_sum``, merged by the same binary counter), so a fused
    sum equals the unfused one bit for bit (tests/test_fusion.py checks it). The counter is written out
    here rather than shared: calling a helper per block made pairwise_sum 5-10% slower. The values go
    through one block-sized buffer, not memory."""
    arguments = _arguments(inputs)
    lines = _header(members, "from graphview_kernels.reduce import BLOCK, block_sum")
    lines.append(f"def fill({arguments}, buffer, start, stop):")
    lines += _loop(members, inputs, single, "", "range(start, stop)", "buffer[i - start]")
    lines += ["", "", "@njit({jit})",
              f"def kernel({arguments}, lo, hi, zero):",
              f"    buffer = np.empty(BLOCK, np.{members[-1][2]})",
              "    if hi - lo <= BLOCK:",
              f"        fill({arguments}, buffer, lo, hi)",
              "        return block_sum(buffer, np.int64(0), hi - lo, zero)",
              "    partial = np.full(64, zero)",
              "    filled = 0",
              "    count = 0",
              "    start = lo",
              "    while start < hi:",
              "        stop = min(start + BLOCK, hi)",
              f"        fill({arguments}, buffer, start, stop)",
              "        value = block_sum(buffer, np.int64(0), stop - start, zero)",
              "        start = stop",
              "        level = 0",
              "        while count & (1 << level):",
              "            value += partial[level]",
              "            level += 1",
              "        partial[level] = value",
              "        count += 1",
              "        if level + 1 > filled:",
              "            filled = level + 1",
              "    total = zero",
              "    for level in range(filled):",
              "        if count & (1 << level):",
              "            total += partial[level]",
              "    return total"]
    return "\n".join(lines) + "\n"


def _header(members, *imports):
    functions = sorted({m[0] for m in members})
    return ["# Generated by graphview (graphview/fused_kernels.py); safe to delete.",
            "import numpy as np", "from numba import njit",
            f"from graphview_kernels.elementwise import {', '.join(functions)}", *imports, "", "",
            "@njit({jit})"]


def _arguments(inputs):
    return ", ".join(f"a{i}" for i in range(inputs))


def _loop(members, inputs, single, window, loop, target):
    """The lines reading the inputs (flat, ``window`` applied; a single element once, before the loop)
    and the loop computing the members in turn, each converted to its dtype, the last into ``target``."""
    lines, names = [], {}
    for i in range(inputs):
        if i in single:
            lines.append(f"    v{i} = a{i}.reshape(a{i}.size)[0]")
            names[i] = f"v{i}"
        else:
            lines.append(f"    x{i} = a{i}.reshape(a{i}.size){window}")
            names[i] = f"x{i}[i]"
    lines.append(f"    for i in {loop}:")
    for k, member in enumerate(members):
        expression, dtype = _expression(member, {**names, **{("t", j): f"t{j}" for j in range(k)}})
        if k == len(members) - 1:
            lines.append(f"        {target} = {expression}")
        else:
            lines.append(f"        t{k} = np.{dtype}({expression})")
    return lines


def load(text):
    """The ``kernel`` of the module with this text (from :func:`source`), from the process's modules,
    the cache folder, or written there now; compiled in memory when the folder cannot be written."""
    key = hashlib.sha256((_salt() + "\n" + text).encode()).hexdigest()[:24]
    with _lock:
        module = _loaded.get(key)
        if module is None:
            module = _loaded[key] = _import(key, text)
    return module.kernel


def loaded():
    """The kernels this process has loaded, by hash (their ``.stats`` tell Numba's cache hits)."""
    with _lock:
        return {key: module.kernel for key, module in _loaded.items()}


def _folder():
    """The cache folder, checked writable once per process (None, after one warning, when it is not)."""
    folder = os.path.join(os.fspath(config.cache_dir), "fused")
    if folder not in _folders:
        _folders[folder] = _writable(folder)
    return _folders[folder]


def _writable(folder):
    try:
        os.makedirs(folder, exist_ok=True)
        probe = os.path.join(folder, f".probe-{os.getpid()}")
        with open(probe, "w", encoding="utf-8"):
            pass
        os.remove(probe)
        return folder
    except OSError as error:
        warnings.warn(f"graphview: cannot write generated kernels to {folder} ({error.strerror or error}); "
                      "compiling them in memory in this process (set GRAPHVIEW_CACHE_DIR or "
                      "gv.config.cache_dir to a writable folder to cache them)", RuntimeWarning, stacklevel=5)
        return None


def _import(key, text):
    folder = _folder()
    if folder is None:
        namespace = {}
        exec(compile(text.replace("{jit}", JIT.format(cache=False)), f"<graphview fused {key}>", "exec"), namespace)
        return type("InMemory", (), {"kernel": staticmethod(namespace["kernel"])})
    name = PREFIX + key
    path = os.path.join(folder, name + ".py")
    if os.path.exists(path):
        os.utime(path)                      # recently used: evicted last
    else:
        temporary = f"{path}.{os.getpid()}.tmp"
        with open(temporary, "w", encoding="utf-8") as file:
            file.write(text.replace("{jit}", JIT.format(cache=True)))
        os.replace(temporary, path)         # atomic: another process sees all of it or nothing
        _evict(folder)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    # Importable by name: Numba's cache pickles the module's name and imports it when loading.
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _evict(folder):
    """Remove the least recently used kernels (and Numba's cache files of them) beyond the cap."""
    kernels = sorted((entry for entry in os.scandir(folder) if entry.name.startswith(PREFIX)
                      and entry.name.endswith(".py")), key=lambda entry: entry.stat().st_mtime)
    cache = os.path.join(folder, "__pycache__")
    for entry in kernels[:max(0, len(kernels) - config.max_cached_kernels)]:
        stem = entry.name[:-3]
        try:
            os.remove(entry.path)
            if os.path.isdir(cache):
                for compiled in os.scandir(cache):
                    if compiled.name.startswith(stem):
                        os.remove(compiled.path)
        except OSError:
            pass                            # another process removed it first
