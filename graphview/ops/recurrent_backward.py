"""The backward ops of the fused recurrent ops (graphview/ops/recurrent.py, ADR 0020): backpropagation through
time over all steps (``lstm_backward``, ``gru_backward``, which give x's gradient too) and the weight gradients
of all steps (``*_weight_gradients``). Dedicated kernels, not differentiable; the gradient rules in
graphview/gradients/recurrent.py use them.
"""
import numpy as np

from graphview import attributes, dtypes
from graphview.errors import ShapeError
from graphview.registry import defop
from graphview.shapes import format_shape
from graphview.testing import Sample
from graphview.ops.recurrent import GRU_SECTIONS, LAYOUT, LSTM_SECTIONS, checked_lengths, gru_op, lengths_dtype, \
    lengths_spec, lstm_op, sections_of, sizes_of, time_major, x_pattern
from graphview_kernels import recurrent as kernels

_c = np.ascontiguousarray
# False when h0 has no gradient to give (a constant): the first step's product with w_hh, which only dh0 needs,
# is skipped and dh0 is 0.
H0_GRADIENT = {"h0_gradient": attributes.Bool()}


def _valid(packed, lengths):
    return np.full(packed.shape[1], packed.shape[0] - 1) if not lengths else np.asarray(lengths[0])


# --- backpropagation through time: dedicated kernels, not differentiable ---------------------------

_NOT_DIFFERENTIABLE = ("Not differentiable: a dedicated backward kernel, so second derivatives of lstm and gru "
                       "are not available.")


def _packed_pattern(sections):
    return ((1, "steps", 1), "batch", (sections, "hidden", 0))


def _grad_pattern(sections, states, grad, packed, w_hh):
    """grad's pattern: the gradient of every section of the packed result, of its state columns alone (the
    gates' gradients are then 0), or of the steps' h rows alone (T, B, H: the outputs', the final states'
    gradients 0 too), as its width and rows say (graphview/gradients/recurrent.py gives the last two)."""
    hidden = w_hh[1] if len(w_hh) == 2 and w_hh[1] is not None else \
        packed[2] // sections if len(packed) == 3 and packed[2] is not None else None
    count = len(states)
    if len(grad) != 3 or hidden is None or grad[2] not in (hidden, count * hidden):
        return _packed_pattern(sections)
    rows_known = grad[0] is not None and len(packed) == 3 and packed[0] is not None
    if grad[2] == hidden and (count > 1 or rows_known and grad[0] == packed[0] - 1):
        return ((1, "steps", 0), "batch", "hidden")
    return _packed_pattern(count)


def _backward_sizes(op, sections, gates, grad, packed, states, w_hh, w_ih, lengths):
    """(T + 1, B, 4H + F) as packed and w_ih give them: each step's gate gradients, then x's. grad is checked
    once the others agree, so that its error can name every gradient shape the op takes."""
    packed_spec = ("packed", packed, _packed_pattern(sections))
    others = (*((label, state, ("batch", "hidden")) for label, state in states),
              ("w_hh", w_hh, ((gates, "hidden", 0), "hidden")), ("w_ih", w_ih, ((gates, "hidden", 0), "features")),
              *lengths_spec(op, lengths))
    sizes_of(packed_spec, *others)
    try:
        sizes = sizes_of(packed_spec, ("grad", grad, _grad_pattern(sections, states, grad, packed, w_hh)), *others)
    except ShapeError as error:
        columns = f"{len(states)}*hidden" if len(states) > 1 else "hidden"
        raise ShapeError(f"{error}; the gradient of every section, of the state columns (steps + 1, batch, "
                         f"{columns}) or of the steps' h (steps, batch, hidden) is taken") from None
    hidden, features = sizes.get("hidden"), sizes.get("features")
    return (packed[0], packed[1], None if hidden is None or features is None else 4 * hidden + features)


def _lstm_backward_shape(grad, packed, h0, c0, w_hh, w_ih, *lengths, h0_gradient=True):
    return _backward_sizes("lstm_backward", LSTM_SECTIONS, 4, grad, packed, (("h0", h0), ("c0", c0)), w_hh, w_ih, lengths)


def _gru_backward_shape(grad, packed, h0, w_hh, w_ih, *lengths, h0_gradient=True):
    return _backward_sizes("gru_backward", GRU_SECTIONS, 3, grad, packed, (("h0", h0),), w_hh, w_ih, lengths)


def _lstm_backward_kernel(grad, packed, h0, c0, w_hh, w_ih, *rest, h0_gradient=True):
    *lengths, out = rest
    lengths = checked_lengths("lstm_backward", lengths, packed.shape[1], packed.shape[0] - 1)
    kernels.lstm_backward(_c(grad), _c(packed), _c(h0), _c(c0), _c(w_hh), _c(w_ih), lengths, h0_gradient, out)


def _gru_backward_kernel(grad, packed, h0, w_hh, w_ih, *rest, h0_gradient=True):
    *lengths, out = rest
    lengths = checked_lengths("gru_backward", lengths, packed.shape[1], packed.shape[0] - 1)
    kernels.gru_backward(_c(grad), _c(packed), _c(h0), _c(w_hh), _c(w_ih), lengths, h0_gradient, out)


def _widened(grad, packed):
    """grad as the gradient of every section of ``packed``: 0 past the rows and columns it has."""
    wide = np.zeros(packed.shape)
    wide[:grad.shape[0], :, :grad.shape[2]] = grad
    return wide


def _lstm_backward_reference(grad, packed, h0, c0, w_hh, w_ih, *lengths, h0_gradient=True):
    g, p = sections_of(_widened(grad, packed), LSTM_SECTIONS), sections_of(packed.astype(np.float64), LSTM_SECTIONS)
    steps, hidden, valid = p.shape[1] - 1, p.shape[3], _valid(packed, lengths)
    dh, dc = g[0, -1].copy(), g[1, -1].copy()
    out = np.zeros((steps + 1, p.shape[2], 4 * hidden + w_ih.shape[1]))
    for t in reversed(range(steps)):
        _, cell, i, f, gate, o = p[:, t]
        previous = c0 if t == 0 else p[1, t - 1]
        squashed = np.tanh(cell)
        dh_t = dh + g[0, t]
        dc_t = dc + g[1, t] + dh_t * o * (1 - squashed ** 2)
        live = (t < valid)[:, None]
        gates = np.where(live, np.concatenate([
            (dc_t * gate + g[2, t]) * i * (1 - i), (dc_t * previous + g[3, t]) * f * (1 - f),
            (dc_t * i + g[4, t]) * (1 - gate ** 2), (dh_t * squashed + g[5, t]) * o * (1 - o)], axis=1), 0.0)
        out[t] = np.concatenate([gates, gates @ w_ih.astype(np.float64)], axis=1)
        dc = np.where(live, dc_t * f, dc)
        dh = np.where(live, gates @ w_hh.astype(np.float64), dh)
    out[-1, :, :hidden], out[-1, :, hidden:2 * hidden] = dh * h0_gradient, dc
    return out.astype(grad.dtype)


def _gru_backward_reference(grad, packed, h0, w_hh, w_ih, *lengths, h0_gradient=True):
    g, p = sections_of(_widened(grad, packed), GRU_SECTIONS), sections_of(packed.astype(np.float64), GRU_SECTIONS)
    steps, hidden, valid = p.shape[1] - 1, p.shape[3], _valid(packed, lengths)
    dh = g[0, -1].copy()
    out = np.zeros((steps + 1, p.shape[2], 4 * hidden + w_ih.shape[1]))
    for t in reversed(range(steps)):
        _, r, z, hn, n = p[:, t]
        previous = h0 if t == 0 else p[0, t - 1]
        dh_t = dh + g[0, t]
        dn = (dh_t * (1 - z) + g[4, t]) * (1 - n ** 2)
        dz = (dh_t * (previous - n) + g[2, t]) * z * (1 - z)
        dr = (dn * hn + g[1, t]) * r * (1 - r)
        dhn = dn * r + g[3, t]
        live = (t < valid)[:, None]
        hidden_side = np.where(live, np.concatenate([dr, dz, dhn], axis=1), 0.0)
        input_side = np.where(live, np.concatenate([dr, dz, dn], axis=1), 0.0)
        out[t] = np.concatenate([hidden_side, input_side[:, 2 * hidden:], input_side @ w_ih.astype(np.float64)], axis=1)
        dh = np.where(live, dh_t * z + hidden_side @ w_hh.astype(np.float64), dh)
    out[-1, :, :hidden] = dh * h0_gradient
    return out.astype(grad.dtype)


def _weight_gradients_shape(sections, gates_count, biases):
    """(gates_count * H, F + H + biases): dW_ih, dW_hh and the bias gradients side by side, H as packed
    and F as x give them (as graph files record them)."""
    def rule(gates, x, h0, packed, layout="btf"):
        sizes = sizes_of(("packed", packed, _packed_pattern(sections)), ("x", x, x_pattern(layout)),
                         ("gates", gates, ((1, "steps", 1), "batch", "columns")), ("h0", h0, ("batch", "hidden")))
        hidden, features, columns = sizes.get("hidden"), sizes.get("features"), sizes.get("columns")
        if None not in (hidden, features, columns) and columns != 4 * hidden + features:
            raise ShapeError(f"gates has shape {format_shape(gates)}; it must be (steps + 1, batch, 4*hidden + "
                             f"features) = {format_shape(gates[:2] + (4 * hidden + features,))} (hidden {hidden} "
                             f"from packed, features {features} from x)")
        size = None if hidden is None else gates_count * hidden
        return (size, None if features is None or hidden is None else features + hidden + biases)
    return rule


def _weight_gradients_kernel(kernel):
    def launch(gates, x, h0, packed, out, layout="btf"):
        kernel(_c(gates), time_major(x, layout), _c(h0), _c(packed), out)
    return launch


def _weight_gradients_reference(gru):
    def reference(gates, x, h0, packed, layout="btf"):
        xs = time_major(x, layout).astype(np.float64)
        steps, batch, features = xs.shape
        hidden = h0.shape[1]
        flat = gates[:steps, :, :4 * hidden].astype(np.float64).reshape(steps * batch, 4 * hidden)
        states = sections_of(packed, GRU_SECTIONS if gru else LSTM_SECTIONS)[0]
        previous = np.concatenate([h0[None], states[:max(steps - 1, 0)]])[:steps].reshape(-1, hidden)
        input_side = np.concatenate([flat[:, :2 * hidden], flat[:, 3 * hidden:]], axis=1) if gru else flat
        hidden_side = flat[:, :3 * hidden] if gru else flat
        columns = [input_side.T @ xs.reshape(-1, features), hidden_side.T @ previous, input_side.sum(0)[:, None]]
        if gru:
            columns.append(hidden_side.sum(0)[:, None])
        return np.concatenate(columns, axis=1).astype(gates.dtype)
    return reference


def _backward_samples(forward, gru):
    def samples():
        result = []
        for sample in forward.definition.samples():
            if sample.label in ("reversed x", "transposed weights"):
                continue
            packed = forward.definition.reference(*sample.inputs, **sample.attrs)
            grad = np.random.default_rng(21).normal(size=packed.shape).astype(packed.dtype)
            x, h0 = sample.inputs[0], sample.inputs[1]
            w_ih, w_hh = sample.inputs[2 if gru else 3], sample.inputs[3 if gru else 4]
            extra = sample.inputs[6 if gru else 7:]
            states = (h0,) if gru else (h0, sample.inputs[2])
            inputs = (grad, packed) + states + (w_hh, w_ih) + extra
            gates = (_gru_backward_reference if gru else _lstm_backward_reference)(*inputs)
            result.append((sample.label, inputs, (gates, x, h0, packed), sample.attrs))
        return result
    return samples


def _backward_op_samples(source, states):
    """Each source case, and some with the gradient of the state columns alone (the public results') or of the
    steps' h alone (the outputs')."""
    def samples():
        result = []
        for label, inputs, _, _ in source():
            result.append(Sample(inputs, label=label))
            if label in ("float64", "float32", "lengths 4, 0, 1", "no steps"):
                grad, packed = inputs[:2]
                hidden = packed.shape[2] // (states + 4)          # the states' sections, then the 4 gates'
                for part, narrow in (("state columns", grad[:, :, :states * hidden]), ("steps' h", grad[:-1, :, :hidden])):
                    result.append(Sample((np.ascontiguousarray(narrow),) + inputs[1:], label=f"{label}, {part}"))
                result.append(Sample(inputs, {"h0_gradient": False}, label=f"{label}, no dh0"))
        return result
    return samples


def _weight_op_samples(source):
    return lambda: [Sample(inputs, attrs, label=label) for label, _, inputs, attrs in source()]


_LSTM_SOURCE = _backward_samples(lstm_op, False)
_GRU_SOURCE = _backward_samples(gru_op, True)

lstm_backward = defop("lstm_backward", shape=_lstm_backward_shape, dtype=lengths_dtype(6), kernel=_lstm_backward_kernel,
                      no_gradient=_NOT_DIFFERENTIABLE, promote="float", promote_inputs=tuple(range(6)), accepts=dtypes.FLOATS,
                      samples=_backward_op_samples(_LSTM_SOURCE, 2), reference=_lstm_backward_reference,
                      family="recurrent", attrs=H0_GRADIENT, doc="lstm's backpropagation through time: (T+1, B, 4H+F), "
                      "each step's gate pre-activation gradients then x's, dh0 (0 without h0_gradient) and dc0 in row T. "
                      + _NOT_DIFFERENTIABLE)
gru_backward = defop("gru_backward", shape=_gru_backward_shape, dtype=lengths_dtype(5), kernel=_gru_backward_kernel,
                     no_gradient=_NOT_DIFFERENTIABLE, promote="float", promote_inputs=tuple(range(5)), accepts=dtypes.FLOATS,
                     samples=_backward_op_samples(_GRU_SOURCE, 1), reference=_gru_backward_reference,
                     family="recurrent", attrs=H0_GRADIENT, doc="gru's backpropagation through time: (T+1, B, 4H+F), "
                     "each step's r, z, W_hn h + b_hn and n gradients then x's, dh0 (0 without h0_gradient) in row T. "
                     + _NOT_DIFFERENTIABLE)
lstm_weight_gradients = defop(
    "lstm_weight_gradients", shape=_weight_gradients_shape(LSTM_SECTIONS, 4, 1),
    kernel=_weight_gradients_kernel(kernels.lstm_weight_gradients), no_gradient=_NOT_DIFFERENTIABLE, promote="float",
    accepts=dtypes.FLOATS, samples=_weight_op_samples(_LSTM_SOURCE), reference=_weight_gradients_reference(False),
    family="recurrent", attrs=LAYOUT,
    doc="lstm's weight gradients over all steps, (4H, F+H+1): dW_ih | dW_hh | db. " + _NOT_DIFFERENTIABLE)
gru_weight_gradients = defop(
    "gru_weight_gradients", shape=_weight_gradients_shape(GRU_SECTIONS, 3, 2),
    kernel=_weight_gradients_kernel(kernels.gru_weight_gradients), no_gradient=_NOT_DIFFERENTIABLE, promote="float",
    accepts=dtypes.FLOATS, samples=_weight_op_samples(_GRU_SOURCE), reference=_weight_gradients_reference(True),
    family="recurrent", attrs=LAYOUT,
    doc="gru's weight gradients over all steps, (3H, F+H+2): dW_ih | dW_hh | db_ih | db_hh. " + _NOT_DIFFERENTIABLE)
