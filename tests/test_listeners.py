"""Listeners: the non-inplace validation listener (and its fingerprint kernel), profiling and debugging."""
import io
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, strategies as st
from numba import njit, types
from numba.core.errors import TypingError

import graphview as gv
from graphview import registry
from graphview.gradcheck import build_sample
from graphview.testing import strided, transposed
from graphview_kernels import checksum
from graphview_kernels.launch import Elementwise, Signatures


def _bump_first_then_copy(x, out):
    x[(0,) * x.ndim] += 1.0
    np.copyto(out, x)


def _poke_then_copy(x, out):
    x[1, 2] = 99.0
    np.copyto(out, x)


def _poke_late_then_copy(x, out):
    x[x.shape[0] - 2, x.shape[1] // 2] = 99.0
    np.copyto(out, x)


def _nudge_middle_then_add(x, out):
    flat = x.reshape(-1)
    flat[x.size // 2 + 1] = np.nextafter(flat[x.size // 2 + 1], np.inf)
    np.add(x, 1.0, out=out)


def _add_into_base(base, value):
    base += value
    return base


def _add_into_both(base, value):
    base += value
    value *= 2.0
    return base


@pytest.fixture(scope="module", autouse=True)
def faulty_ops():
    """Ops with buggy or in-place kernels, registered for this module only (the op table never sees them)."""
    global writes_input, pokes_input, pokes_late, writes_middle, declared_inplace, inplace_and_more
    writes_input = gv.defop("test_writes_input", shape=lambda x: x, kernel=_bump_first_then_copy)
    pokes_input = gv.defop("test_pokes_input", shape=lambda x: x, kernel=_poke_then_copy)
    pokes_late = gv.defop("test_pokes_late", shape=lambda x: x, kernel=_poke_late_then_copy)
    writes_middle = gv.defop("test_writes_middle", shape=lambda x: x, kernel=_nudge_middle_then_add)
    declared_inplace = gv.defop("test_declared_inplace", shape=lambda b, v: b, kernel=_add_into_base, inplace=(0,))
    inplace_and_more = gv.defop("test_inplace_and_more", shape=lambda b, v: b, kernel=_add_into_both, inplace=(0,))
    yield
    for name in ("test_writes_input", "test_pokes_input", "test_pokes_late", "test_writes_middle",
                 "test_declared_inplace", "test_inplace_and_more"):
        registry._REGISTRY.pop(name, None)
        registry._CALLABLES.pop(name, None)


def run_with(listener, build, feeds):
    g = gv.Graph()
    output = build(g)
    return g.output(feeds, [output], listeners=[listener])[output.name]


def test_an_op_writing_its_input_raises_naming_op_node_input_and_element():
    x = np.arange(12.0).reshape(3, 4)
    with pytest.raises(gv.InplaceModificationError,
                       match=r"op test_writes_input \(node 'culprit'\), input 0 \('x'\).*first differing element "
                             r"is \[0, 0\] \(it now holds 1.0\)"):
        run_with(gv.NonInplaceValidationListener(), lambda g: writes_input(g.placeholder("x", (3, 4)), name="culprit"),
                 {"x": x})
    assert issubclass(gv.InplaceModificationError, gv.GraphviewError)


@pytest.mark.parametrize("layout", [lambda a: a, transposed, strided, lambda a: a[:, ::-1]],
                         ids=["contiguous", "transposed", "strided", "reversed"])
def test_modifications_of_strided_inputs_are_found_at_the_right_element(layout):
    x = layout(np.arange(12.0).reshape(3, 4))
    with pytest.raises(gv.InplaceModificationError, match=r"first differing element is \[1, 2\] \(it now holds 99.0\)"):
        run_with(gv.NonInplaceValidationListener(), lambda g: pokes_input(g.placeholder("x", (3, 4))), {"x": x})


@pytest.mark.parametrize("layout", [transposed, strided, lambda a: a[::-1, ::-1], lambda a: np.repeat(a, 3, axis=1)[:, 1::3]],
                         ids=["transposed", "strided", "reversed", "stepped columns"])
def test_modifications_of_large_strided_inputs_are_found_at_the_right_element(layout):
    # 60 x 70 elements: fingerprinted in blocks (not kept as bytes), the layout read in logical order.
    x = layout(np.arange(4200.0).reshape(60, 70))
    assert not x.flags.c_contiguous
    with pytest.raises(gv.InplaceModificationError, match=r"first differing element is \[58, 35\] \(it now holds 99.0\)"):
        run_with(gv.NonInplaceValidationListener(), lambda g: pokes_late(g.placeholder("x", (60, 70))), {"x": x})


@pytest.mark.parametrize("rows", [4, 80], ids=["kept as bytes", "fingerprinted"])
def test_a_write_through_a_strided_view_of_a_computed_tensor_is_found(rows):
    g = gv.Graph()
    t = g.math.exp(g.placeholder("x", (rows, 60)), name="t")
    view = t[1::2, ::-2]                                        # (rows / 2, 30): 1200 elements at 80 rows
    poked = pokes_late(view, name="poker")
    listener = gv.NonInplaceValidationListener(raise_errors=False)
    g.output({"x": np.zeros((rows, 60))}, [poked], listeners=[listener])
    [violation] = listener.violations
    assert (violation.op, violation.node, violation.position, violation.index, violation.value) == \
        ("test_pokes_late", "poker", 0, (rows // 2 - 2, 15), 99.0)


@pytest.mark.parametrize("size", [16, 5000], ids=["kept as bytes", "fingerprinted"])
def test_a_cheap_op_chain_catches_a_kernel_writing_its_input_in_the_middle(size):
    # +1 and *0.5 alternating, the culprit (a user op moving one element of its input up by one ulp,
    # then adding 1) as op 10 of 20: only it is reported, at the exact element.
    g = gv.Graph()
    value = g.placeholder("x", (size,))
    for i in range(20):
        value = writes_middle(value, name="culprit") if i == 10 else (value + 1.0 if i % 2 == 0 else value * 0.5)
    listener = gv.NonInplaceValidationListener(raise_errors=False)
    x = np.random.default_rng(2).normal(size=size)
    result = g.output({"x": x}, [value], listeners=[listener])[value.name]
    [violation] = listener.violations
    culprit_input = g.node("culprit").inputs[0]
    assert (violation.op, violation.node, violation.input_name, violation.index) == \
        ("test_writes_middle", "culprit", culprit_input, (size // 2 + 1,))
    assert listener.checked_ops == 20
    expected = x.copy()
    for i in range(20):
        if i == 10:
            expected[size // 2 + 1] = np.nextafter(expected[size // 2 + 1], np.inf)   # then its +1
        expected = expected + 1.0 if i % 2 == 0 else expected * 0.5
    np.testing.assert_allclose(result, expected, rtol=1e-12)
    with pytest.raises(gv.InplaceModificationError, match=rf"test_writes_middle \(node 'culprit'\).*element is "
                                                          rf"\[{size // 2 + 1}\]"):
        g.output({"x": x}, [value], listeners=[gv.NonInplaceValidationListener()])


def test_an_input_passed_twice_is_read_once_and_reported_at_both_positions(monkeypatch):
    listener = gv.NonInplaceValidationListener(raise_errors=False, fingerprint_all=True)   # mul: element-wise
    x = np.arange(3000.0)
    snapshots = []
    monkeypatch.setattr(checksum, "snapshot", lambda array, kept=checksum.snapshot: snapshots.append(array) or kept(array))
    listener.pre_op(None, fake("mul", ("x", "x")), [x, x])
    assert len(snapshots) == 1 and snapshots[0] is x
    x[2999] = np.nan
    listener.post_op(None, fake("mul", ("x", "x")), [x, x], [np.zeros(3000)])
    assert [(v.position, v.index) for v in listener.violations] == [(0, (2999,)), (1, (2999,))]


def test_findings_can_be_collected_instead_of_raised():
    listener = gv.NonInplaceValidationListener(raise_errors=False)
    run_with(listener, lambda g: writes_input(g.placeholder("x", (2, 2)), name="w"), {"x": np.ones((2, 2))})
    [violation] = listener.violations
    assert (violation.kind, violation.op, violation.node, violation.position, violation.index) == \
        ("modified", "test_writes_input", "w", 0, (0, 0))


def test_the_declared_written_input_of_an_inplace_op_is_exempt_but_its_other_inputs_are_checked():
    feeds = {"b": np.ones(3), "v": np.full(3, 2.0)}
    result = run_with(gv.NonInplaceValidationListener(),
                      lambda g: declared_inplace(g.placeholder("b", (3,)), g.placeholder("v", (3,))), dict(feeds))
    np.testing.assert_array_equal(result, [3.0, 3.0, 3.0])
    with pytest.raises(gv.InplaceModificationError, match=r"test_inplace_and_more.*input 1 \('v'\)"):
        run_with(gv.NonInplaceValidationListener(),
                 lambda g: inplace_and_more(g.placeholder("b", (3,)), g.placeholder("v", (3,))),
                 {"b": np.ones(3), "v": np.full(3, 2.0)})


NUMPY_UPDATE = {"assign_": lambda view, value: view.__setitem__(Ellipsis, value), "add_": np.ndarray.__iadd__,
                "sub_": np.ndarray.__isub__, "mul_": np.ndarray.__imul__, "div_": np.ndarray.__itruediv__}


@pytest.mark.parametrize("op", sorted(NUMPY_UPDATE))
@pytest.mark.parametrize("overlap", ["shifted", "same element"])
def test_in_place_ops_whose_value_overlaps_the_written_view_raise_nothing(op, overlap):
    g = gv.Graph()
    t = g.math.exp(g.placeholder("x", (5,)))
    target, value = (slice(1, None), slice(None, -1)) if overlap == "shifted" else (0, 0)
    written = getattr(g, op)(t[target], t[value])
    listener = gv.NonInplaceValidationListener()
    result = g.output({"x": np.arange(5.0) + 0.5}, [written], listeners=[listener])[written.name]
    expected = np.exp(np.arange(5.0) + 0.5)
    NUMPY_UPDATE[op](expected[target:target + 1] if overlap == "same element" else expected[target],
                     expected[value].copy())
    np.testing.assert_allclose(result, expected, rtol=1e-15)
    assert listener.violations == [] and listener.checked_ops >= 2


def test_listeners_see_the_private_copy_of_an_aliased_value_and_still_catch_a_kernel_writing_it():
    g = gv.Graph()
    t = g.math.exp(g.placeholder("x", (3,)), name="t")
    seen = []

    class Recorder(gv.Listener):
        def pre_op(self, ctx, node, inputs):
            seen.append((node.op, list(inputs)))

    legal = declared_inplace(t, t, name="doubled")
    assert "copies input 1 (t) first" in g.explain([legal])
    result = g.output({"x": np.zeros(3)}, [legal], listeners=[Recorder(), gv.NonInplaceValidationListener()])
    np.testing.assert_array_equal(result["doubled"], [2.0, 2.0, 2.0])
    [(op, (base, value))] = [entry for entry in seen if entry[0] == "test_declared_inplace"]
    assert not np.shares_memory(base, value)
    np.testing.assert_array_equal(value, [1.0, 1.0, 1.0])
    with pytest.raises(gv.InplaceModificationError, match=r"test_inplace_and_more \(node 'both'\), input 1 \('t'\)"):
        g.output({"x": np.zeros(3)}, [inplace_and_more(t, t, name="both")],
                 listeners=[gv.NonInplaceValidationListener()])


def fake(op, inputs=("a",)):
    return SimpleNamespace(name=f"{op}_node", op=op, inputs=inputs)


def test_create_view_ops_without_inputs_and_empty_arrays_are_exempt():
    listener = gv.NonInplaceValidationListener()
    base = np.arange(6.0)
    listener.pre_op(None, fake("create_view", ("a", "d")), [base, np.array([1, 2, 1, 0, 3, 1, 1])])
    base[0] = 50.0
    listener.post_op(None, fake("create_view", ("a", "d")), [base], [base[0:3]])
    listener.pre_op(None, fake("uniform", ()), [])
    listener.post_op(None, fake("uniform", ()), [], [np.zeros(3)])
    empty = np.zeros((0, 3))
    listener.pre_op(None, fake("neg"), [empty])
    listener.post_op(None, fake("neg"), [empty], [np.zeros((0, 3))])
    assert listener.violations == []


def test_outputs_aliasing_inputs_are_reported_unless_the_op_is_a_view_or_inplace():
    listener = gv.NonInplaceValidationListener()
    x = np.arange(6.0)
    listener.pre_op(None, fake("neg", ("x",)), [x])
    with pytest.raises(gv.InplaceModificationError, match=r"op neg \(node 'neg_node'\), input 0 \('x'\).*shares memory"):
        listener.post_op(None, fake("neg", ("x",)), [x], [x[::2]])
    for view_op in ("reshape", "transpose"):
        listener.pre_op(None, fake(view_op, ("x",)), [x])
        listener.post_op(None, fake(view_op, ("x",)), [x], [x.reshape(2, 3)])
    listener.pre_op(None, fake("test_declared_inplace", ("b", "v")), [x, np.ones(6)])
    listener.post_op(None, fake("test_declared_inplace", ("b", "v")), [x, np.ones(6)], [x])
    assert len(listener.violations) == 1


def _foreign_pair():
    memory = bytearray(80)
    return np.frombuffer(memory, np.float64)[2:], np.frombuffer(memory, np.float64)   # views of one buffer


@pytest.mark.parametrize("pair", [
    lambda: (lambda x: (x, x))(np.arange(6.0)),                                  # the input itself
    lambda: (lambda base: (base[1:4], base))(np.arange(6.0)),                    # the input's own base
    lambda: (lambda x: (x, x[::2]))(np.arange(6.0)),                             # a view of the input
    lambda: (lambda base: (base[::2], base[1::2].reshape(3, 1)))(np.arange(6.0)),  # siblings, disjoint
    _foreign_pair,                                                              # memory from a buffer
], ids=["itself", "its base", "a view", "disjoint siblings", "a shared buffer"])
def test_an_output_aliasing_an_input_is_found_however_the_memory_is_owned(pair):
    x, output = pair()
    listener = gv.NonInplaceValidationListener(raise_errors=False)
    listener.pre_op(None, fake("neg", ("x",)), [x])
    listener.post_op(None, fake("neg", ("x",)), [x], [output])
    assert [v.kind for v in listener.violations] == (["aliased"] if np.shares_memory(x, output) else [])
    listener.pre_op(None, fake("neg", ("x",)), [x])
    listener.post_op(None, fake("neg", ("x",)), [x], [np.zeros(3)])
    assert len(listener.violations) == int(np.shares_memory(x, output))


def test_real_views_and_a_whole_training_step_raise_nothing():
    g = gv.Graph()
    x = g.placeholder("x", (None, 4))
    w = g.var("w", np.random.default_rng(0).normal(size=(4, 3)))
    h = g.shape.reshape(g.math.transpose(g.nn.sigmoid(x @ w)), (-1,))
    g.set_loss(g.math.sum(g.nn.softmax(g.shape.reshape(h, (3, -1)), axis=0) * g.math.sin(h[2:])[0]))
    listener = gv.NonInplaceValidationListener()
    feeds = {"x": transposed(np.random.default_rng(1).normal(size=(5, 4)))}
    g.calculate_gradients(feeds, ["w"], listeners=[listener])
    g.output(feeds, g.losses, listeners=[listener])
    assert listener.violations == [] and listener.checked_ops > 10


def test_listeners_attached_to_the_graph_run_on_every_call():
    g = gv.Graph()
    x = g.placeholder("x", (2,))
    y = writes_input(x)
    g.listeners.append(gv.NonInplaceValidationListener())
    with pytest.raises(gv.InplaceModificationError):
        g.output({"x": np.zeros(2)}, [y])


def test_profiling_listener_counts_calls_time_and_bytes():
    g = gv.Graph()
    x = g.placeholder("x", (100,))
    y = g.math.exp(g.math.sin(x) + g.math.cos(x))
    profiler = gv.ProfilingListener()
    for _ in range(3):
        g.output({"x": np.ones(100)}, [y], listeners=[profiler])
    rows = {row["op"]: row for row in profiler.rows()}
    assert set(rows) == {"sin", "cos", "add", "exp"}
    assert rows["add"]["calls"] == 3 and rows["add"]["bytes_in"] == 3 * 1600 and rows["add"]["bytes_out"] == 3 * 800
    assert all(row["seconds"] > 0 for row in rows.values())
    assert [r["op"] for r in profiler.rows("op")] == ["add", "cos", "exp", "sin"]
    table = profiler.table()
    assert table.splitlines()[0].split()[:3] == ["op", "calls", "total"] and "exp" in table
    with pytest.raises(ValueError, match="sort must be one of"):
        profiler.rows("colour")


def test_debug_listener_prints_each_op_with_shapes():
    g = gv.Graph()
    x = g.placeholder("x", (2, 3))
    g.math.sum(g.math.cast(x, "float32", name="as32"), axis=1, name="total")
    out = io.StringIO()
    debug = gv.DebugListener(file=out)
    g.output({"x": np.ones((2, 3))}, ["total"], listeners=[debug])
    assert debug.lines == ["as32 = cast((2, 3) float64) -> (2, 3) float32", "total = sum((2, 3) float32) -> (2,) float32"]
    assert out.getvalue().splitlines() == debug.lines


def test_the_listener_base_has_op_iteration_and_epoch_hooks_that_do_nothing():
    listener = gv.Listener()
    for hook in ("pre_op", "post_op", "iteration_start", "iteration_end", "epoch_start", "epoch_end"):
        assert callable(getattr(listener, hook))
    assert listener.iteration_start(None) is None and listener.epoch_end(None, [1.0]) is None


arrays = st.sampled_from([np.float64, np.float32, np.int64, np.int32, np.bool_]).flatmap(
    lambda dtype: st.tuples(st.integers(1, 40), st.integers(1, 40), st.sampled_from(["c", "t", "s", "r"]),
                            st.integers(0, 10_000), st.just(dtype)))


def _layout(rows, cols, kind, dtype):
    base = (np.random.default_rng(rows * 41 + cols).normal(size=(rows, cols)) * 5).astype(dtype)
    return {"c": base, "t": transposed(base), "s": strided(base), "r": base[::-1]}[kind]


@given(arrays)
def test_fingerprints_follow_logical_order_and_locate_a_changed_element(case):
    rows, cols, kind, seed, dtype = case
    array = _layout(rows, cols, kind, dtype)
    hashes, digests = checksum.fingerprint(array, digests=True)
    contiguous_hashes, _ = checksum.fingerprint(np.ascontiguousarray(array))
    np.testing.assert_array_equal(hashes, contiguous_hashes)
    assert checksum.first_change(array, hashes, digests) == -1
    flat = seed % array.size
    index = np.unravel_index(flat, array.shape)
    array[index] = ~array[index] if dtype == np.bool_ else array[index] + 1
    found = checksum.first_change(array, hashes, digests)
    block_start = flat // checksum.BLOCK * checksum.BLOCK
    assert found == flat or (found == block_start and checksum.fingerprint(array, True)[1][flat] == digests[flat])


@pytest.mark.parametrize("size", [1, 1024, 1025, 300_000], ids=["one", "block", "block+1", "parallel"])
def test_snapshots_see_nan_payloads_and_signed_zeros_at_the_exact_element(size):
    array = np.zeros(size)
    array[0] = np.nan
    for flat, bits in ((size - 1, 0x8000000000000000), (0, 0x7FF8000000000001)):
        kept = checksum.snapshot(array)
        assert checksum.first_change_since(array, kept) == -1
        array.view(np.uint64)[flat] = bits                       # -0.0, then a NaN with another payload
        assert checksum.first_change_since(array, kept) == flat


def test_parallel_fingerprints_find_the_first_change_in_any_worker_range():
    array = np.random.default_rng(3).normal(size=300_000)
    assert array.size >= checksum.PARALLEL_THRESHOLD
    hashes, digests = checksum.fingerprint(array, digests=True)
    np.testing.assert_array_equal(hashes, checksum.fingerprint(array[::-1][::-1].copy())[0])
    array[299_999] += 1.0
    assert checksum.first_change(array, hashes, digests) == 299_999
    array[150_001] += 1.0
    assert checksum.first_change(array, hashes, digests) == 150_001


def test_fingerprints_see_bit_changes_that_compare_equal():
    array = np.zeros(5000)
    hashes, digests = checksum.fingerprint(array, digests=True)
    array[4321] = -0.0
    assert checksum.first_change(array, hashes, digests) in (4321, 4096)
    swapped = np.arange(10.0)
    before = checksum.fingerprint(swapped)[0]
    swapped[[3, 7]] = swapped[[7, 3]]
    assert not np.array_equal(before, checksum.fingerprint(swapped)[0])


# --- inputs an op cannot write -------------------------------------------------------------------

def test_inputs_of_element_wise_kernels_are_not_fingerprinted_unless_asked(monkeypatch):
    snapshots = []
    monkeypatch.setattr(checksum, "snapshot", lambda array, kept=checksum.snapshot: snapshots.append(array) or kept(array))
    x = np.arange(3000.0)
    for fingerprint_all, expected in ((False, 0), (True, 1)):
        snapshots.clear()
        listener = gv.NonInplaceValidationListener(raise_errors=False, fingerprint_all=fingerprint_all)
        listener.pre_op(None, fake("sin", ("x",)), [x])
        listener.post_op(None, fake("sin", ("x",)), [x], [np.zeros(3000)])
        assert len(snapshots) == expected and listener.checked_ops == 1
    listener = gv.NonInplaceValidationListener(raise_errors=False)
    listener.pre_op(None, fake("sin", ("x",)), [x])
    listener.post_op(None, fake("sin", ("x",)), [x], [x[::-1]])            # aliasing is still checked
    assert [v.kind for v in listener.violations] == ["aliased"]
    listener.pre_op(None, fake("sum", ("x",)), [x])                       # not element-wise: fingerprinted
    x[5] = -1.0
    listener.post_op(None, fake("sum", ("x",)), [x], [np.zeros(())])
    assert [(v.kind, v.index) for v in listener.violations[1:]] == [("modified", (5,))]


def test_element_wise_kernels_take_every_input_typed_read_only_so_they_cannot_write_one():
    # What lets the listener skip them: every entry point an element-wise op compiled (running its
    # samples) types the inputs read-only, and Numba refuses to compile a store into such an array.
    element_wise = [d for d in registry.definitions() if isinstance(d.kernel, Elementwise)]
    assert {"add", "mul", "sin", "tanh", "where", "relu"} <= {d.name for d in element_wise}
    compiled = 0
    for definition in element_wise:
        for sample in definition.samples() if definition.samples else ():
            graph, output, feeds = build_sample(definition.name, sample)
            graph.output(feeds, [output], listeners=[gv.NonInplaceValidationListener(fingerprint_all=True)])
        for form in (definition.kernel.flat_form, definition.kernel.strided_form):
            for dtypes in form.entries:
                arrays = form.signature(dtypes)[:len(dtypes)]
                assert not any(a.mutable for a in arrays[:-1]) and arrays[-1].mutable, (definition.name, arrays)
                compiled += 1
    assert compiled >= len(element_wise)

    @njit(cache=False)
    def writes_its_input(a, out, lo, hi):
        for i in range(lo, hi):
            a[i] = 0.0
            out[i] = 1.0
    with pytest.raises(TypingError, match="read-?only"):
        Signatures(writes_its_input, 1, "C", (types.int64, types.int64))((np.dtype(np.float64),) * 2)
