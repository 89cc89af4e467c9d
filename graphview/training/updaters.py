"""Updaters: SGD (momentum, Nesterov), Adam, AdamW and RMSProp, run as in-place Numba kernels.

An updater changes a graph's VARIABLE values by writing into the arrays the
graph stores for them (``g.store``), through the kernels in
``kernels/updaters.py`` (each declares what it writes in ``WRITES``). Besides
``g.set_value``, this is the one sanctioned way a variable's value changes: it
keeps each parameter in one buffer for the whole of training, so a step
allocates no parameter arrays, and every executor plan (which reads the
stored arrays when it runs) sees the new values. See ADR 0013.

State (momentum, moments) is one array per parameter, created on the first
step in the parameter's dtype, and can be saved with :meth:`Updater.state_dict`.
"""
import numpy as np

from graphview.errors import GraphviewError, ShapeError
from graphview.training.schedules import as_schedule
from graphview.variable import Kind
from graphview_kernels import updaters as kernels

_EMPTY = {np.dtype(np.float32): np.empty(0, np.float32), np.dtype(np.float64): np.empty(0, np.float64)}


class Updater:
    """Base class: ``step(graph, gradients)`` updates every parameter named in ``gradients`` in place."""

    kernel = None
    state_names = ()

    def __init__(self, learning_rate, weight_decay=0.0):
        self.schedule = as_schedule(learning_rate)
        if weight_decay < 0:
            raise GraphviewError(f"{type(self).__name__}: weight_decay must be >= 0, not {weight_decay}")
        self.weight_decay = float(weight_decay)
        self.iteration = 0      # optimisation steps taken
        self.epoch = 0          # the epoch in progress, set by fit
        self.epochs_done = 0    # epochs completed; fit continues from here
        self.state = {}         # parameter name -> tuple of state arrays

    @property
    def learning_rate(self):
        """The learning rate the next step will use."""
        return float(self.schedule(self.iteration, self.epoch))

    def step(self, graph, gradients):
        """Apply one update to each named VARIABLE of ``graph`` from its gradient, in place; a variable
        made with ``trainable=False`` is skipped (its gradient is ignored)."""
        rate = self.begin_step()
        for name, grad in gradients.items():
            if name in graph.non_trainable:
                continue
            param = _parameter(graph, name)
            flat_grad = _flat_gradient(name, param, grad)
            state = self.state.get(name)
            if state is None or state[0].shape != (param.size,):
                state = self.state[name] = self._new_state(param)
            self._update(param.reshape(-1), flat_grad, state, rate)

    def begin_step(self):
        """Count one optimisation step and return its learning rate (what :meth:`step` does first; a
        sharded data-parallel update calls it, then :meth:`update_slice` on its chunks)."""
        rate = self.learning_rate
        self.iteration += 1
        return rate

    def new_state(self, size, dtype):
        """Zeroed state for ``size`` parameter values of ``dtype`` (a chunk's, for :meth:`update_slice`)."""
        return self._new_state(np.empty(size, dtype))

    def update_slice(self, param, grad, state, rate):
        """Update flat, C-contiguous ``param`` (a chunk of the parameters) from ``grad`` with its own
        ``state`` (from :meth:`new_state`), at learning rate ``rate``: element-wise, so the chunks of a
        parameter updated apart equal it updated whole."""
        self._update(param, grad, state, rate)

    def _new_state(self, param):
        return tuple(np.zeros(param.size, param.dtype) for _ in self.state_names)

    def _update(self, param, grad, state, rate):
        raise NotImplementedError

    # --- saving and restoring --------------------------------------------------

    def state_dict(self):
        """The updater's state as a flat dict of arrays (for an ``.npz`` file): counters and per-parameter state."""
        out = {"iteration": np.asarray(self.iteration, np.int64), "epoch": np.asarray(self.epoch, np.int64),
               "epochs_done": np.asarray(self.epochs_done, np.int64)}
        for name, arrays in self.state.items():
            for label, array in zip(self.state_names, arrays):
                out[f"state/{label}/{name}"] = array.copy()
        return out

    def load_state_dict(self, state):
        """Restore what :meth:`state_dict` returned (copies the arrays)."""
        self.iteration = int(state["iteration"])
        self.epoch = int(state["epoch"])
        self.epochs_done = int(state["epochs_done"])
        per_param = {}
        for key in state:
            if not key.startswith("state/"):
                continue
            _, label, name = key.split("/", 2)
            if label not in self.state_names:
                raise GraphviewError(f"{type(self).__name__}: saved state {label!r} belongs to another updater "
                                     f"(this one keeps {', '.join(self.state_names) or 'no state'})")
            per_param.setdefault(name, {})[label] = np.array(state[key], copy=True)
        self.state = {name: tuple(labels[label] for label in self.state_names) for name, labels in per_param.items()}

    def __repr__(self):
        return f"{type(self).__name__}(learning_rate={self.schedule!r}, weight_decay={self.weight_decay})"


def _parameter(graph, name):
    node = graph.node(name)
    if node.kind is not Kind.VARIABLE:
        raise GraphviewError(f"updater: {name!r} is a {node.kind}; only VARIABLEs are trained")
    param = graph.stored(name)
    if not param.flags.c_contiguous or not param.flags.writeable:
        # Never expected (the graph stores C-contiguous copies); checked so a write can never be lost.
        raise GraphviewError(f"updater: the stored value of {name!r} is not a writable C-contiguous array")
    if param.dtype not in _EMPTY:
        raise GraphviewError(f"updater: {name!r} has dtype {param.dtype.name}; only float32 and float64 are trained")
    return param


def _flat_gradient(name, param, grad):
    grad = np.asarray(grad)
    if grad.shape != param.shape:
        raise ShapeError(f"updater: the gradient of {name!r} has shape {grad.shape}, the variable {param.shape}")
    if grad.dtype != param.dtype or not grad.flags.c_contiguous:
        grad = np.ascontiguousarray(grad, dtype=param.dtype)
    return grad.reshape(-1)


class SGD(Updater):
    """Stochastic gradient descent, optionally with (Nesterov) momentum and L2 weight decay."""

    state_names = ("velocity",)

    def __init__(self, learning_rate=0.01, momentum=0.0, nesterov=False, weight_decay=0.0):
        super().__init__(learning_rate, weight_decay)
        if not 0.0 <= momentum < 1.0:
            raise GraphviewError(f"SGD: momentum must be in [0, 1), not {momentum}")
        if nesterov and momentum == 0:
            raise GraphviewError("SGD: nesterov=True needs a momentum > 0")
        self.momentum, self.nesterov = float(momentum), bool(nesterov)
        if self.momentum == 0.0:
            self.state_names = ()

    def _new_state(self, param):
        if self.momentum == 0.0:
            return (_EMPTY[param.dtype],)
        return super()._new_state(param)

    def _update(self, param, grad, state, rate):
        kernels.sgd(param, grad, state[0], rate, self.momentum, self.nesterov, self.weight_decay)


class Adam(Updater):
    """Adam (Kingma and Ba) with bias correction; ``weight_decay`` is L2 added to the gradient."""

    state_names = ("first_moment", "second_moment")
    decoupled = False

    def __init__(self, learning_rate=1e-3, beta1=0.9, beta2=0.999, epsilon=1e-8, weight_decay=0.0):
        super().__init__(learning_rate, weight_decay)
        for label, beta in (("beta1", beta1), ("beta2", beta2)):
            if not 0.0 <= beta < 1.0:
                raise GraphviewError(f"{type(self).__name__}: {label} must be in [0, 1), not {beta}")
        self.beta1, self.beta2, self.epsilon = float(beta1), float(beta2), float(epsilon)

    def _update(self, param, grad, state, rate):
        kernels.adam(param, grad, state[0], state[1], rate, self.beta1, self.beta2, self.epsilon,
                     float(self.iteration), self.weight_decay, self.decoupled)


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov and Hutter): param *= 1 - lr*weight_decay each step."""

    decoupled = True

    def __init__(self, learning_rate=1e-3, beta1=0.9, beta2=0.999, epsilon=1e-8, weight_decay=0.01):
        super().__init__(learning_rate, beta1, beta2, epsilon, weight_decay)


class RMSProp(Updater):
    """RMSProp: divide by a running root mean square of the gradient; optional momentum and L2 decay."""

    state_names = ("mean_square", "momentum_buffer")

    def __init__(self, learning_rate=0.01, alpha=0.99, epsilon=1e-8, momentum=0.0, weight_decay=0.0):
        super().__init__(learning_rate, weight_decay)
        if not 0.0 <= alpha < 1.0:
            raise GraphviewError(f"RMSProp: alpha must be in [0, 1), not {alpha}")
        self.alpha, self.epsilon, self.momentum = float(alpha), float(epsilon), float(momentum)

    def _update(self, param, grad, state, rate):
        kernels.rmsprop(param, grad, state[0], state[1], rate, self.alpha, self.epsilon, self.momentum,
                        self.weight_decay)
