"""Fused recurrent ops: ``g.nn.lstm`` and ``g.nn.gru`` (PyTorch's gates and weight shapes), ADR 0020.

Each is one op over all time steps whose single output packs what the caller and the backward pass
need, time-major, the sections of a step side by side: ``lstm`` gives (T + 1, B, 6H) whose rows are
[h | c | i | f | g | o]; ``gru`` gives (T + 1, B, 5H) with [h | r | z | W_hn h + b_hn | n]. Rows 0..T-1
are the steps (0 past a sequence's length), row T the final states (then 0). The public functions return
views of it (``outputs``, ``h_n``, ``c_n``), all through one view of its state columns, so nothing is
copied and their gradients reach the gradient rule as that view's (graphview/gradients/recurrent.py).
Backpropagation through time is an op of its own (``lstm_backward``, ``gru_backward``, which gives x's
gradient too), and the weight gradients of all steps one more (``*_weight_gradients``): dedicated
kernels, not differentiable, in graphview/ops/recurrent_backward.py.
"""

import numpy as np

from graphview import attributes, dtypes, indexing
from graphview.errors import ExecutionError, ShapeError
from graphview.layouts import table
from graphview.registry import defop, graph_of, public
from graphview.shapes import format_shape
from graphview.testing import Sample, transposed
from graphview.ops.shape import permute
from graphview.ops.view import entries_for
from graphview.variable import Variable
from graphview_kernels import masked, recurrent as kernels

LAYOUTS = ("btf", "tbf")
LSTM_SECTIONS, GRU_SECTIONS = 6, 5


LAYOUT = {"layout": attributes.OneOf(LAYOUTS)}


# --- shape and dtype rules ------------------------------------------------------------------------

def _spelled(terms):
    """A pattern as the sizes' names: ``(4*hidden, hidden)``."""
    def term(item):
        if isinstance(item, int):
            return str(item)
        factor, name, offset = item
        return (f"{factor}*" if factor != 1 else "") + name + (f" + {offset}" if offset else "")
    return "(" + ", ".join(map(term, terms)) + ("," if len(terms) == 1 else "") + ")"


def sizes_of(*specs):
    """The sizes that every input's shape agrees on. Each spec is (label, shape, pattern); a pattern item
    is an int (that size), a name, or (factor, name, offset): factor * size + offset. The first known
    dim names a size; a shape of another rank, or a dim that disagrees with a size already named, is a
    ShapeError naming the input, what it must be and the inputs that gave the sizes."""
    sizes, sources = {}, {}
    for label, shape, pattern in specs:
        terms = [(1, item, 0) if isinstance(item, str) else item for item in pattern]
        if len(shape) != len(terms):
            raise ShapeError(f"{label} has shape {format_shape(shape)}; it must be {len(terms)}-D {_spelled(terms)}")
        plain_first = sorted(zip(shape, terms), key=lambda pair: isinstance(pair[1], int) or pair[1][0] != 1)
        for dim, term in plain_first:
            if dim is None:
                continue
            if isinstance(term, int):
                agrees = dim == term
            elif term[1] in sizes:
                agrees = dim == term[0] * sizes[term[1]] + term[2]
            else:
                agrees = dim >= term[2] and (dim - term[2]) % term[0] == 0
                if agrees:
                    sizes[term[1]], sources[term[1]] = (dim - term[2]) // term[0], label
            if not agrees:
                wanted = tuple(t if isinstance(t, int) else None if t[1] not in sizes else t[0] * sizes[t[1]] + t[2]
                               for t in terms)
                named = dict.fromkeys(t[1] for t in terms if not isinstance(t, int) and t[1] in sizes)
                given = ", ".join(f"{name} {sizes[name]} from {sources[name]}" for name in named)
                raise ShapeError(f"{label} has shape {format_shape(shape)}; it must be {_spelled(terms)} = "
                                 f"{format_shape(wanted)}" + (f" ({given})" if given else ""))
    return sizes


def x_pattern(layout):
    return ("batch", "steps", "features") if layout == "btf" else ("steps", "batch", "features")


def lengths_spec(op, lengths):
    if len(lengths) > 1:
        raise ShapeError(f"{op} takes one lengths input, not {len(lengths)}")
    return tuple(("lengths", shape, ("batch",)) for shape in lengths)


def _check(op, gates, x, states, w_ih, w_hh, b_ih, b_hh, lengths, layout):
    """(batch, steps, hidden) after checking every input's shape against the others: batch and steps as
    x gives them, as graph files record them."""
    if len(w_hh) != 2 or None in w_hh:
        raise ShapeError(f"w_hh has shape {format_shape(w_hh)}; it must be ({gates}*hidden, hidden), known when built")
    hidden = w_hh[1]
    if w_hh[0] != gates * hidden:
        raise ShapeError(f"w_hh has shape {format_shape(w_hh)}; with hidden size {hidden} it must be "
                         f"({gates * hidden}, {hidden})")
    gated = (gates, "hidden", 0)
    sizes_of(("w_hh", w_hh, (gated, "hidden")), ("x", x, x_pattern(layout)), ("w_ih", w_ih, (gated, "features")),
             ("b_ih", b_ih, (gated,)), ("b_hh", b_hh, (gated,)),
             *((label, state, ("batch", "hidden")) for label, state in states), *lengths_spec(op, lengths))
    return (x[0], x[1], hidden) if layout == "btf" else (x[1], x[0], hidden)


def _packed(sections, batch, steps, hidden):
    return (None if steps is None else steps + 1, batch, sections * hidden)


def _lstm_shape(x, h0, c0, w_ih, w_hh, b_ih, b_hh, *lengths, layout="btf"):
    batch, steps, hidden = _check("lstm", 4, x, (("h0", h0), ("c0", c0)), w_ih, w_hh, b_ih, b_hh, lengths, layout)
    return _packed(LSTM_SECTIONS, batch, steps, hidden)


def _gru_shape(x, h0, w_ih, w_hh, b_ih, b_hh, *lengths, layout="btf"):
    batch, steps, hidden = _check("gru", 3, x, (("h0", h0),), w_ih, w_hh, b_ih, b_hh, lengths, layout)
    return _packed(GRU_SECTIONS, batch, steps, hidden)


def lengths_dtype(count):
    def rule(*kinds, **attrs):
        if len(kinds) > count and not dtypes.is_integer(kinds[count]):
            raise dtypes.DTypeError(f"lengths have dtype {kinds[count].name}; they must be int32 or int64")
        return kinds[0]
    return rule


# --- kernels ----------------------------------------------------------------------------------------

def time_major(x, layout):
    """x as a C-contiguous (T, B, F) array."""
    return np.ascontiguousarray(x.transpose(1, 0, 2) if layout == "btf" else x)


def checked_lengths(op, lengths, batch, steps):
    """The lengths as int64 (all ``steps`` when none were given), refused before any kernel reads them."""
    if not lengths:
        return np.full(batch, steps, np.int64)
    found = np.ascontiguousarray(lengths[0], dtype=np.int64)
    if found.shape != (batch,):
        raise ExecutionError(f"{op}: lengths have shape {format_shape(found.shape)} for a batch of {batch}")
    bad = masked.first_bad_length(found, steps)
    if bad >= 0:
        raise ExecutionError(f"{op}: length {int(found[bad])} of sequence {bad} is outside [0, {steps}] "
                             f"(the time axis has {steps} steps)")
    return found


_c = np.ascontiguousarray


def _lstm_kernel(x, h0, c0, w_ih, w_hh, b_ih, b_hh, *rest, layout="btf"):
    *lengths, out = rest
    x = time_major(x, layout)
    lengths = checked_lengths("lstm", lengths, x.shape[1], x.shape[0])
    kernels.lstm_forward(x, _c(h0), _c(c0), _c(w_ih), _c(w_hh), _c(b_ih), _c(b_hh), lengths, out)


def _gru_kernel(x, h0, w_ih, w_hh, b_ih, b_hh, *rest, layout="btf"):
    *lengths, out = rest
    x = time_major(x, layout)
    lengths = checked_lengths("gru", lengths, x.shape[1], x.shape[0])
    kernels.gru_forward(x, _c(h0), _c(w_ih), _c(w_hh), _c(b_ih), _c(b_hh), lengths, out)


# --- NumPy references (float64, step by step) -------------------------------------------------------

def _sigmoid(a):
    return 1.0 / (1.0 + np.exp(-a))


def side_by_side(sections):
    """(sections, T + 1, B, H) as the packed layout (T + 1, B, sections * H)."""
    count, rows, batch, hidden = sections.shape
    return np.ascontiguousarray(sections.transpose(1, 2, 0, 3)).reshape(rows, batch, count * hidden)


def sections_of(packed, count):
    """The packed layout (T + 1, B, count * H) as (count, T + 1, B, H)."""
    rows, batch, width = packed.shape
    return packed.reshape(rows, batch, count, width // count).transpose(2, 0, 1, 3)


def reference_lengths(x, lengths, layout):
    steps, batch = time_major(x, layout).shape[:2]
    return np.full(batch, steps) if not lengths else np.asarray(lengths[0])


def _lstm_reference(x, h0, c0, w_ih, w_hh, b_ih, b_hh, *lengths, layout="btf"):
    xs = time_major(x, layout).astype(np.float64)
    valid = reference_lengths(x, lengths, layout)
    h, c = h0.astype(np.float64), c0.astype(np.float64)
    out = np.zeros((LSTM_SECTIONS, xs.shape[0] + 1) + h.shape)
    for t in range(xs.shape[0]):
        pre = xs[t] @ w_ih.T.astype(np.float64) + b_ih + h @ w_hh.T.astype(np.float64) + b_hh
        i, f, g, o = np.split(pre, 4, axis=1)
        i, f, g, o = _sigmoid(i), _sigmoid(f), np.tanh(g), _sigmoid(o)
        live = (t < valid)[:, None]
        c = np.where(live, f * c + i * g, c)
        h = np.where(live, o * np.tanh(c), h)
        out[:, t] = np.where(live, np.stack([h, c, i, f, g, o]), 0.0)
    out[0, -1], out[1, -1] = h, c
    return side_by_side(out).astype(x.dtype)


def _gru_reference(x, h0, w_ih, w_hh, b_ih, b_hh, *lengths, layout="btf"):
    xs = time_major(x, layout).astype(np.float64)
    valid = reference_lengths(x, lengths, layout)
    h = h0.astype(np.float64)
    out = np.zeros((GRU_SECTIONS, xs.shape[0] + 1) + h.shape)
    for t in range(xs.shape[0]):
        xr, xz, xn = np.split(xs[t] @ w_ih.T.astype(np.float64) + b_ih, 3, axis=1)
        hr, hz, hn = np.split(h @ w_hh.T.astype(np.float64) + b_hh, 3, axis=1)
        r, z = _sigmoid(xr + hr), _sigmoid(xz + hz)
        n = np.tanh(xn + r * hn)
        live = (t < valid)[:, None]
        h = np.where(live, (1 - z) * n + z * h, h)
        out[:, t] = np.where(live, np.stack([h, r, z, hn, n]), 0.0)
    out[0, -1] = h
    return side_by_side(out).astype(x.dtype)


# --- samples ----------------------------------------------------------------------------------------

def recurrent_inputs(gates, batch=3, steps=4, features=2, hidden=3, dtype=np.float64, seed=20, states=1):
    """x (btf), the states and the weights, PyTorch-sized (uniform in +-1/sqrt(hidden))."""
    r = np.random.default_rng(seed)
    scale = 1 / np.sqrt(hidden)

    def uniform(*shape):
        return r.uniform(-scale * 2, scale * 2, shape).astype(dtype)
    x = r.normal(size=(batch, steps, features)).astype(dtype)
    return (x,) + tuple(uniform(batch, hidden) for _ in range(states)) + (
        uniform(gates * hidden, features), uniform(gates * hidden, hidden), uniform(gates * hidden),
        uniform(gates * hidden))


def _samples(gates, states):
    def samples():
        def inputs(**kwargs):
            return recurrent_inputs(gates, states=states, **kwargs)
        base = inputs()
        tbf = (np.ascontiguousarray(base[0].transpose(1, 0, 2)),) + base[1:]
        lengths_at = 1 + states + 4
        integer = tuple(range(lengths_at, lengths_at + 1))
        return [Sample(base, label="float64"),
                Sample(inputs(dtype=np.float32), label="float32"),
                Sample(tbf, {"layout": "tbf"}, label="time-major"),
                Sample(inputs(steps=1), label="one step"),
                Sample((base[0][:, ::-1],) + base[1:], label="reversed x"),
                Sample(base[:1 + states] + tuple(transposed(w) if w.ndim == 2 else w for w in base[1 + states:]),
                       label="transposed weights"),
                Sample(base + (np.array([4, 0, 1]),), label="lengths 4, 0, 1", constant_inputs=integer),
                Sample(tbf + (np.array([2, 3, 0], np.int32),), {"layout": "tbf"}, label="time-major int32 lengths",
                       constant_inputs=integer),
                Sample(inputs(steps=0), label="no steps"),
                Sample(inputs(batch=0), label="empty batch", gradcheck=False)]
    return samples


lstm_op = defop("lstm", shape=_lstm_shape, dtype=lengths_dtype(7), kernel=_lstm_kernel, promote="float",
                promote_inputs=tuple(range(7)), accepts=dtypes.FLOATS, samples=_samples(4, 2),
                reference=_lstm_reference, family="recurrent", attrs=LAYOUT,
                doc="LSTM over all steps, fused: packed (T+1, B, 6H), rows [h | c | i | f | g | o]; row T holds "
                "h_n, c_n.")
gru_op = defop("gru", shape=_gru_shape, dtype=lengths_dtype(6), kernel=_gru_kernel, promote="float",
               promote_inputs=tuple(range(6)), accepts=dtypes.FLOATS, samples=_samples(3, 1),
               reference=_gru_reference, family="recurrent", attrs=LAYOUT,
               doc="GRU over all steps, fused: packed (T+1, B, 5H), rows [h | r | z | W_hn h + b_hn | n]; row T "
               "holds h_n.")


# --- public functions -------------------------------------------------------------------------------

def _lengths_of_time_dim(x, layout):
    """The lengths of x's time dim when the graph knows them and masking is on, else None."""
    if not isinstance(x, Variable) or not table.masking_enabled():
        return None
    time_dim = table.dims_of(x)[1 if layout == "btf" else 0]
    return table.lengths_of(x.graph, time_dim)


def _descriptors(key):
    """The descriptors create_view records for the static 3-D ``key`` (entries_for's normalization)."""
    descriptors, _ = indexing.from_numpy_key(key, 3)
    return entries_for(None, descriptors, "recurrent results")[0]


def state_columns(width):
    """The descriptors of the view of the packed result's first ``width`` columns in every row: the states
    ([h | c] for lstm, [h] for gru), which the public results read through this one view. Their gradients
    then reach the op as one scatter of these columns, whose values the gradient rule takes in place of the
    packed result's gradient (graphview/gradients/recurrent.py)."""
    return _descriptors((slice(None), slice(None), slice(0, width)))


def step_rows(hidden):
    """The descriptors of the outputs' view of the state columns: the steps' rows of h, (T, B, H)."""
    return _descriptors((slice(None, -1), slice(None), slice(0, hidden)))


def _results(packed, x, layout, states, sections):
    """The views of the packed result: outputs in ``layout``, then each final state (B, H), all through
    the view of the state columns (state_columns)."""
    hidden = packed.shape[2] // sections
    columns = packed[:, :, :states * hidden]                      # state_columns(states * hidden)
    steps = columns[:-1, :, :hidden]                              # step_rows(hidden)
    outputs = permute(steps, (1, 0, 2)) if layout == "btf" else steps
    finals = tuple(columns[-1, :, k * hidden:(k + 1) * hidden] for k in range(states))
    if isinstance(x, Variable):
        dims = table.dims_of(x)
        batch_dim, time_dim = (dims[0], dims[1]) if layout == "btf" else (dims[1], dims[0])
        table.set_dims(outputs, (batch_dim, time_dim, None) if layout == "btf" else (time_dim, batch_dim, None))
        for final in finals:
            table.set_dims(final, (batch_dim, None))
    return (outputs,) + finals


def _run(op, x, inputs, lengths, layout, name, states, sections):
    graph_of((x,) + inputs, op.definition.name)
    if isinstance(lengths, (list, tuple)):
        lengths = np.asarray(lengths)
    if lengths is None:
        lengths = _lengths_of_time_dim(x, layout)
    extra = () if lengths is None else (lengths,)
    packed = op(x, *inputs, *extra, name=name, layout=layout)
    return _results(packed, x, layout, states, sections)


@public("nn")
def lstm(x, h0, c0, w_ih, w_hh, b_ih, b_hh, lengths=None, layout="btf", *, name=None):
    """LSTM over all time steps as one fused op (PyTorch's gates i, f, g, o and weight shapes):
    ``(outputs, h_n, c_n)``, outputs in ``layout`` ('btf' or 'tbf'), h_n and c_n (batch, hidden).
    With ``lengths`` (given, or those of x's time dim) each sequence stops at its length: outputs past
    it are 0 and h_n, c_n are its last valid step's states (h0, c0 for a length of 0)."""
    return _run(lstm_op, x, (h0, c0, w_ih, w_hh, b_ih, b_hh), lengths, layout, name, 2, LSTM_SECTIONS)


@public("nn")
def gru(x, h0, w_ih, w_hh, b_ih, b_hh, lengths=None, layout="btf", *, name=None):
    """GRU over all time steps as one fused op (PyTorch's gates r, z, n with n = tanh(W_in x + b_in +
    r * (W_hn h + b_hn)), and its weight shapes): ``(outputs, h_n)``; lengths as for lstm."""
    return _run(gru_op, x, (h0, w_ih, w_hh, b_ih, b_hh), lengths, layout, name, 1, GRU_SECTIONS)
