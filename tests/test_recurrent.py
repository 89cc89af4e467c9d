"""g.nn.lstm and g.nn.gru (fused recurrent ops, ADR 0020) against PyTorch, finite differences and their errors."""

import numpy as np
import pytest

import graphview as gv
from graphview_kernels import blas
from graphview import registry
from graphview.ops.recurrent import recurrent_inputs

torch = pytest.importorskip("torch")

NAMES = {"lstm": ["x", "h0", "c0", "w_ih", "w_hh", "b_ih", "b_hh"], "gru": ["x", "h0", "w_ih", "w_hh", "b_ih", "b_hh"]}
GATES = {"lstm": 4, "gru": 3}
TOLERANCE = {np.float32: dict(rtol=1e-5, atol=1e-6), np.float64: dict(rtol=1e-10, atol=1e-12)}


def inputs(kind, dtype=np.float64, batch=3, steps=5, features=4, hidden=6, seed=0):
    return recurrent_inputs(GATES[kind], batch, steps, features, hidden, dtype, seed, states=2 if kind == "lstm" else 1)


def torch_results(kind, values, lengths=None, layout="btf"):
    """PyTorch's (outputs, h_n[, c_n]) and the leaf tensors, one sequence at a time (each stops at its length)."""
    leaves = [torch.tensor(v, requires_grad=True) for v in values]
    x, states, weights = leaves[0], leaves[1:len(leaves) - 4], leaves[-4:]
    batch_first = x if layout == "btf" else x.transpose(0, 1)
    batch, steps, features = batch_first.shape
    hidden = weights[1].shape[1]
    module = (torch.nn.LSTM if kind == "lstm" else torch.nn.GRU)(features, hidden, batch_first=True)
    module = module.to(x.dtype)
    parameters = dict(zip(["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"], weights))
    lengths = [steps] * batch if lengths is None else list(lengths)
    outputs, finals = [], [[] for _ in states]
    for b in range(batch):
        state = tuple(s[b][None, None] for s in states)
        state = state if kind == "lstm" else state[0]
        if lengths[b] == 0:
            sequence = torch.zeros(0, hidden, dtype=x.dtype)
            last = state if kind == "lstm" else (state,)
        else:
            out, last = torch.func.functional_call(module, parameters, (batch_first[b:b + 1, :lengths[b]], state))
            sequence = out[0]
            last = last if kind == "lstm" else (last,)
        outputs.append(torch.cat([sequence, torch.zeros(steps - lengths[b], hidden, dtype=x.dtype)]))
        for k, final in enumerate(last):
            finals[k].append(final[0, 0])
    outputs = torch.stack(outputs)
    outputs = outputs if layout == "btf" else outputs.transpose(0, 1)
    return (outputs,) + tuple(torch.stack(f) for f in finals), leaves


def build(kind, values, lengths=None, layout="btf", variables=True):
    g = gv.Graph(kind)
    made = [g.var(n, v) if variables else v for n, v in zip(NAMES[kind], values)]
    return g, getattr(g.nn, kind)(*made, lengths=lengths, layout=layout)


def to_layout(values, layout):
    return values if layout == "btf" else (np.ascontiguousarray(values[0].transpose(1, 0, 2)),) + values[1:]


@pytest.mark.parametrize("kind", ["lstm", "gru"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("layout", ["btf", "tbf"])
def test_values_match_pytorch(kind, dtype, layout):
    values = to_layout(inputs(kind, dtype), layout)
    g, results = build(kind, values, layout=layout)
    got = g.output({}, list(results))
    expected, _ = torch_results(kind, values, layout=layout)
    full, _ = torch_results(kind, values, layout=layout)
    for result, want in zip(results, expected):
        assert got[result.name].dtype == dtype
        np.testing.assert_allclose(got[result.name], want.detach().numpy(), **TOLERANCE[dtype])
    # the per-sequence reference agrees with PyTorch's whole-batch module
    module = (torch.nn.LSTM if kind == "lstm" else torch.nn.GRU)(values[0].shape[2], values[-3].shape[1],
                                                                  batch_first=layout == "btf").to(full[0].dtype)
    with torch.no_grad():
        for parameter, value in zip(module.parameters(), values[-4:]):
            parameter.copy_(torch.tensor(value))
        states = tuple(torch.tensor(v)[None] for v in values[1:len(values) - 4])
        out, _ = module(torch.tensor(values[0]), states if kind == "lstm" else states[0])
    np.testing.assert_allclose(got[results[0].name], out.numpy(), **TOLERANCE[dtype])


def poisoned_entries(kind, values):
    """(input's position, index) of an entry in every gate's rows of each weight and bias, and of two entries
    of x and of each state."""
    gates, hidden, features = GATES[kind], values[-3].shape[1], values[-4].shape[1]
    entries = [(0, (0, 0, 0)), (0, (values[0].shape[0] - 1, 3, features - 1))]
    for position in range(1, len(values) - 4):
        entries += [(position, (0, 0)), (position, (1, hidden - 1))]
    for position in range(len(values) - 4, len(values)):
        rows = [k * hidden + k % hidden for k in range(gates)]
        entries += [(position, (row,) if values[position].ndim == 1 else (row, row % values[position].shape[1]))
                    for row in rows]
    return entries


@pytest.mark.parametrize("kind", ["lstm", "gru"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("poison", [np.nan, np.inf, -np.inf])
def test_a_non_finite_entry_of_any_input_gives_pytorchs_nans_and_infinities(kind, dtype, poison):
    """NaN or an infinity in any input gives NaN, infinities and finite values where PyTorch's nn.LSTM or nn.GRU
    gives them (sigmoid(-inf) is exactly 0: with an infinite h, a GRU's r * (W_hn h + b_hn) is 0 * inf = NaN),
    and the packed result (gates and states) agrees with the op's NumPy reference, NaN for NaN."""
    base = inputs(kind, dtype)
    for position, index in poisoned_entries(kind, base):
        values = list(base)
        values[position] = values[position].copy()
        values[position][index] = poison
        g, results = build(kind, tuple(values))
        packed = next(node.name for node in g.nodes() if node.op == kind)
        got = g.output({}, list(results) + [packed])
        expected, _ = torch_results(kind, values)
        where = f"{poison} at {NAMES[kind][position]}{list(index)}"
        for result, want in zip(results, expected):
            np.testing.assert_allclose(got[result.name], want.detach().numpy(), **TOLERANCE[dtype],
                                       err_msg=f"{result.name}, {where}")
        np.testing.assert_allclose(got[packed], registry.get(kind).reference(*values), **TOLERANCE[dtype],
                                   err_msg=f"packed result against the reference, {where}")


@pytest.mark.parametrize("kind", ["lstm", "gru"])
@pytest.mark.parametrize("layout", ["btf", "tbf"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_lengths_stop_each_sequence(kind, layout, dtype):
    values = to_layout(inputs(kind, dtype, batch=4), layout)
    lengths = np.array([5, 0, 1, 3])
    g, results = build(kind, values, lengths=lengths, layout=layout)
    got = g.output({}, list(results))
    expected, _ = torch_results(kind, values, lengths, layout)
    for result, want in zip(results, expected):
        np.testing.assert_allclose(got[result.name], want.detach().numpy(), **TOLERANCE[dtype])
    outputs = got[results[0].name] if layout == "btf" else got[results[0].name].transpose(1, 0, 2)
    assert not outputs[1].any() and not outputs[2, 1:].any() and not outputs[3, 3:].any()
    np.testing.assert_array_equal(got[results[1].name][1], values[1][1])   # length 0: h_n = h0


def test_lengths_match_pack_padded_sequence():
    values = inputs("lstm")
    lengths = np.array([5, 2, 4])
    g, (outputs, h_n, c_n) = build("lstm", values, lengths=[5, 2, 4])   # a list is taken as an array
    got = g.output({}, [outputs, h_n, c_n])
    module = torch.nn.LSTM(4, 6, batch_first=True).double()
    with torch.no_grad():
        for parameter, value in zip(module.parameters(), values[3:]):
            parameter.copy_(torch.tensor(value))
        packed = torch.nn.utils.rnn.pack_padded_sequence(torch.tensor(values[0]), torch.tensor(lengths),
                                                         batch_first=True, enforce_sorted=False)
        out, (h, c) = module(packed, (torch.tensor(values[1])[None], torch.tensor(values[2])[None]))
        padded, _ = torch.nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=5)
    np.testing.assert_allclose(got[outputs.name], padded.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got[h_n.name], h[0].numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got[c_n.name], c[0].numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
@pytest.mark.parametrize("lengths", [None, np.array([5, 0, 1])], ids=["full", "lengths 5 0 1"])
@pytest.mark.parametrize("layout", ["btf", "tbf"])
def test_gradients_of_every_input_match_pytorch(kind, lengths, layout):
    values = to_layout(inputs(kind), layout)
    g, results = build(kind, values, lengths=lengths, layout=layout)
    r = np.random.default_rng(3)
    weights = [r.normal(size=v.shape) for v in results]
    loss = None
    for result, weight in zip(results, weights):
        term = g.math.sum(g.math.mul(result, weight))
        loss = term if loss is None else g.math.add(loss, term)
    g.set_loss(loss)
    got = g.calculate_gradients({}, NAMES[kind])
    expected, leaves = torch_results(kind, values, lengths, layout)
    sum((e * torch.tensor(w)).sum() for e, w in zip(expected, weights)).backward()
    for name, leaf in zip(NAMES[kind], leaves):
        np.testing.assert_allclose(got[name], leaf.grad.numpy(), rtol=1e-10, atol=1e-12, err_msg=name)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_gradients_match_pytorch_when_dx_product_goes_through_several_blocks(kind):
    """dx = d_gates @ W_ih over all steps is 305 x 16 x (4H or 2H) with H = 128: above SMALL, it runs as blocks
    of 122 (LSTM) or 244 (GRU) rows, the last one partial."""
    batch, steps, features, hidden = 61, 5, 16, 128
    assert steps * batch * features * 2 * hidden > blas.SMALL   # GRU's dx: 2H gate columns, the smaller
    values = inputs(kind, batch=batch, steps=steps, features=features, hidden=hidden, seed=4)
    g, results = build(kind, values)
    weight = np.random.default_rng(5).normal(size=results[0].shape)
    g.set_loss(g.math.sum(g.math.mul(results[0], weight)))
    got = g.calculate_gradients({}, NAMES[kind])
    expected, leaves = torch_results(kind, values)
    (expected[0] * torch.tensor(weight)).sum().backward()
    for name, leaf in zip(NAMES[kind], leaves):
        np.testing.assert_allclose(got[name], leaf.grad.numpy(), rtol=1e-10, atol=1e-12, err_msg=name)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_gradients_match_finite_differences_through_the_views(kind):
    values = inputs(kind, batch=2, steps=3, features=2, hidden=3)
    g = gv.Graph(kind)
    made = [g.var(n, v) for n, v in zip(NAMES[kind], values)]
    lengths = g.placeholder("lengths", (2,), "int64")
    results = getattr(g.nn, kind)(*made, lengths=lengths)
    total = g.math.sum(g.math.square(results[0]))
    for final in results[1:]:
        total = g.math.add(total, g.math.sum(g.math.sin(final)))
    g.set_loss(total)
    report = gv.check_gradients(g, {"lengths": np.array([3, 1])})
    assert report.passed, str(report)
    assert set(report.variables) == set(NAMES[kind])


def test_lengths_come_from_the_time_dim():
    time = gv.Dim("time")
    g = gv.Graph("dims")
    seq = g.placeholder("seq", dims=(gv.batch_dim, time, gv.Dim("feature", 4)), lengths={time: "seq_len"})
    values = inputs("lstm")
    outputs, h_n, c_n = g.nn.lstm(seq, *values[1:])
    assert gv.dims_of(outputs)[:2] == (gv.batch_dim, time) and gv.dims_of(h_n)[0] == gv.batch_dim
    lengths = np.array([5, 2, 0])
    got = g.output({"seq": values[0], "seq_len": lengths}, [outputs, h_n])
    expected, _ = torch_results("lstm", values, lengths)
    np.testing.assert_allclose(got[outputs.name], expected[0].detach().numpy(), rtol=1e-10, atol=1e-12)
    pooled = g.math.sum(outputs, axis=time)   # masked downstream too: outputs keep the time dim
    assert g.output({"seq": values[0], "seq_len": lengths}, [pooled])[pooled.name].shape == (3, 6)
    with gv.unmasked():
        plain, _, _ = g.nn.lstm(seq, *values[1:])
    full, _ = torch_results("lstm", values)
    np.testing.assert_allclose(g.output({"seq": values[0], "seq_len": lengths}, [plain])[plain.name],
                               full[0].detach().numpy(), rtol=1e-10, atol=1e-12)


def test_results_are_views_of_one_fused_op():
    g, (outputs, h_n, c_n) = build("lstm", inputs("lstm"))
    ops = [node.op for node in g.nodes()]
    assert ops.count("lstm") == 1
    plan = g.explain([outputs, h_n, c_n])
    assert plan.count("kernel ") == 1 and "kernel   lstm = lstm(" in plan and plan.count("view  ") == 5


def test_backward_kernels_are_not_differentiable_and_say_why():
    for name in ("lstm_backward", "gru_backward", "lstm_weight_gradients", "gru_weight_gradients"):
        definition = registry.get(name)
        assert definition.differentiable is False
        assert "dedicated backward kernel" in definition.doc


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_save_and_load(kind, tmp_path):
    values = inputs(kind)
    g = gv.Graph(kind)
    x = g.placeholder("x", (None, None, 4))
    lengths = g.placeholder("lengths", (None,), "int64")
    results = getattr(g.nn, kind)(x, *values[1:], lengths=lengths, layout="btf")
    feeds = {"x": values[0], "lengths": np.array([5, 1, 0])}
    before = g.output(feeds, list(results))
    g.save(tmp_path / "rnn.gv")
    loaded = gv.load(tmp_path / "rnn.gv")
    after = loaded.output(feeds, [r.name for r in results])
    for result in results:
        np.testing.assert_array_equal(after[result.name], before[result.name])


# --- errors -------------------------------------------------------------------------------------------

def test_errors_when_built():
    values = inputs("lstm")
    g = gv.Graph("errors")
    x, h0, c0, w_ih, w_hh, b_ih, b_hh = values
    with pytest.raises(gv.ShapeError, match=r"lstm.*w_hh has shape \(24, 5\)"):
        g.nn.lstm(x, h0, c0, w_ih, w_hh[:, :5], b_ih, b_hh)
    with pytest.raises(gv.ShapeError, match=r"w_ih has shape \(24, 3\); it must be \(4\*hidden, features\) = \(24, 4\) "
                       r"\(hidden 6 from w_hh, features 4 from x\)"):
        g.nn.lstm(x, h0, c0, w_ih[:, :3], w_hh, b_ih, b_hh)
    with pytest.raises(gv.ShapeError, match=r"b_hh has shape \(23,\); it must be \(4\*hidden,\) = \(24,\)"):
        g.nn.lstm(x, h0, c0, w_ih, w_hh, b_ih, b_hh[:23])
    with pytest.raises(gv.ShapeError, match=r"c0 has shape \(2, 6\); it must be \(batch, hidden\) = \(3, 6\) \(batch 3 from x"):
        g.nn.lstm(x, h0, c0[:2], w_ih, w_hh, b_ih, b_hh)
    with pytest.raises(gv.ShapeError, match=r"gru.*w_hh has shape \(24, 6\); with hidden size 6 it must be \(18, 6\)"):
        g.nn.gru(x, h0, w_ih, w_hh, b_ih, b_hh)
    with pytest.raises(gv.OpArgumentError, match=r"lstm: attribute 'layout': 'bft' is not one of 'btf', 'tbf'"):
        g.nn.lstm(x, h0, c0, w_ih, w_hh, b_ih, b_hh, layout="bft")
    with pytest.raises(gv.DTypeError, match=r"lengths have dtype float64"):
        g.nn.lstm(x, h0, c0, w_ih, w_hh, b_ih, b_hh, lengths=np.array([1.0, 2.0, 3.0]))
    with pytest.raises(gv.ShapeError, match=r"lengths has shape \(2,\); it must be \(batch,\) = \(3,\)"):
        g.nn.lstm(x, h0, c0, w_ih, w_hh, b_ih, b_hh, lengths=np.array([1, 2]))
    with pytest.raises(gv.ShapeError, match=r"x has shape \(3, 4\); it must be 3-D \(batch, steps, features\)"):
        g.nn.lstm(x[:, 0], h0, c0, w_ih, w_hh, b_ih, b_hh)


@pytest.mark.parametrize("bad", [6, -1])
@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_lengths_outside_the_time_axis_fail_before_the_kernel(kind, bad):
    values = inputs(kind)
    g = gv.Graph("run-time")
    lengths = g.placeholder("lengths", (3,), "int64")
    results = getattr(g.nn, kind)(*values, lengths=lengths)
    with pytest.raises(gv.ExecutionError, match=rf"{kind}: length {bad} of sequence 1 is outside \[0, 5\]"):
        g.output({"lengths": np.array([2, bad, 1])}, [results[0]])
