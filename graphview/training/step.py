"""One training step's arithmetic: the loss, every gradient and the state updates from a single executor run.

The gradient graph (``g.gradient_graph(wrt)``, ADR 0005)
holds the forward nodes and the backward nodes together, and reads variable
values from the forward graph's store at run time; asking its executor for the
loss nodes and the gradient nodes at once computes the forward pass once.

State updates (ADR 0019): a graph records, for each non-trainable variable that
training changes (batch norm's running statistics), the in-place node giving its
value after a step (``g.state_updates``). No loss depends on them, so the step
adds those nodes to the gradient graph and asks for them with the loss and the
gradients: they run in the same executor run, with the same batch, under
``runstate.training``. The executor writes each into a private copy of the
variable (copy on write, ADR 0009); :meth:`GradientStep.commit_state` then
writes the new values into the variables' stored buffers, in place, as the
updaters write trained variables.
"""
from graphview import dtypes, runstate
from graphview.autodiff import gradient_graph
from graphview.errors import GraphviewError
from graphview.execution import executor_of
from graphview.variable import Kind
from graphview_kernels.elementwise import copy as copy_kernel


class GradientStep:
    """``step(placeholders) -> (loss, {name: gradient})`` for the graph's losses and ``wrt`` (default:
    every trainable floating-point VARIABLE); each call also runs the graph's state updates."""

    def __init__(self, graph, wrt=None):
        if wrt is None:
            wrt = [n.name for n in graph.nodes() if graph.is_trainable(n.name) and dtypes.is_float(n.dtype)]
            if not wrt:
                raise GraphviewError(f"GradientStep: graph {graph.name!r} has no trainable floating-point VARIABLE")
        self.forward = graph
        self.gradient = gradient_graph(graph, wrt)
        self.losses = list(self.gradient.losses)
        self.wrt = list(self.gradient.wrt)
        self.gradient_nodes = [self.gradient.gradients[name].name for name in self.wrt]
        self.state = state_updates(graph, self.gradient.graph)
        self.outputs = self.losses + self.gradient_nodes + [node for _, node in self.state]
        self.executor = executor_of(self.gradient.graph)
        self.wrt_of = {}                    # gradient node -> the wrt names whose gradient it is
        for name, node in zip(self.wrt, self.gradient_nodes):
            self.wrt_of.setdefault(node, []).append(name)
        self.calls = 0
        self.new_state = {}

    def __call__(self, placeholders, listeners=(), step=None, commit_state=True, stream=0, ready=None):
        """``step`` numbers the training step (dropout draws a new mask per step); by default this
        object counts its own calls. The state updates' new values are written into the variables at
        once, or with ``commit_state=False`` kept in ``new_state`` until :meth:`commit_state` (fit
        commits only after checking the loss). ``ready(name, gradient)`` is called for each variable
        whose gradient is final while the rest of the run goes on (see ``Executor.run``); gradients
        the run does not compute (a constant zero) come only in the returned dict."""
        feeds = self.gradient.feeds(placeholders)
        watching = list(self.forward.listeners) + list(listeners)
        if step is None:
            step, self.calls = self.calls, self.calls + 1
        reporting = None
        if ready is not None:
            def reporting(node, value):
                for name in self.wrt_of.get(node, ()):
                    ready(name, value)
        with runstate.training(step, stream):
            values = self.executor.run(feeds, self.outputs, watching, mode="training", ready=reporting)
        loss = 0.0
        for name in self.losses:
            loss += float(values[name])
        self.new_state = {name: values[node] for name, node in self.state}
        if commit_state:
            self.commit_state()
        # Two names may share one gradient array; the updaters only read gradients, so that is safe.
        return loss, {name: values[node] for name, node in zip(self.wrt, self.gradient_nodes)}

    def gradient_order(self):
        """``wrt`` in the order a run computes their gradients (the schedule's, the same in every process
        for the same graph); gradients no step computes come last."""
        position = {node.name: index for index, node in enumerate(self.executor.schedule(self.outputs).order)}
        last = len(position)
        return sorted(self.wrt, key=lambda name: position.get(self.gradient.gradients[name].name, last))

    def commit_state(self):
        """Write the last step's state-update values into the variables' stored buffers (in place)."""
        new, self.new_state = self.new_state, {}
        for name, value in new.items():
            target = self.forward.stored(name)
            copy_kernel(value.reshape(target.shape), target)


def state_updates(forward, gradient):
    """``[(variable, node)]``: ``forward``'s state updates, whose nodes (and any ancestors the gradient
    graph lacks) are added to ``gradient`` under the same names, so one run computes them with the
    gradients. The gradient graph only grows (its other plans are unchanged), under its lock."""
    pairs = list(forward.state_updates.items())
    if not pairs:
        return []
    needed = forward.ancestors([node for _, node in pairs])
    with gradient.lock:
        for node in forward.nodes():
            if node.name not in needed:
                continue
            if node.name in gradient:
                present = gradient.node(node.name)
                if (present.op, present.inputs, present.attrs) != (node.op, node.inputs, node.attrs):
                    raise GraphviewError(f"GradientStep: the gradient graph of {forward.name!r} has its own node "
                                         f"{node.name!r}, so the state updates cannot read the forward one; "
                                         "rename it")
                continue
            gradient.add_node(node.name, node.kind, node.op, node.inputs, node.attrs, node.shape, node.dtype)
            if node.kind is not Kind.ARRAY and node.name not in gradient.store:
                gradient.store[node.name] = forward.stored(node.name)
    return pairs
