"""One training step's arithmetic: the loss and every gradient from a single executor run.

The gradient graph (``g.gradient_graph(wrt)``, ADR 0005)
holds the forward nodes and the backward nodes together, and reads variable
values from the forward graph's store at run time; asking its executor for the
loss nodes and the gradient nodes at once computes the forward pass once.
"""
from graphview import runstate
from graphview.autodiff import gradient_graph
from graphview.execution import executor_of


class GradientStep:
    """``step(placeholders) -> (loss, {name: gradient})`` for the graph's losses and ``wrt``."""

    def __init__(self, graph, wrt):
        self.forward = graph
        self.gradient = gradient_graph(graph, wrt)
        self.losses = list(self.gradient.losses)
        self.wrt = list(self.gradient.wrt)
        self.gradient_nodes = [self.gradient.gradients[name].name for name in self.wrt]
        self.outputs = self.losses + self.gradient_nodes
        self.executor = executor_of(self.gradient.graph)
        self.calls = 0

    def __call__(self, placeholders, listeners=(), step=None):
        """``step`` numbers the training step (dropout draws a new mask per step); by default this
        object counts its own calls."""
        feeds = self.gradient.feeds(placeholders)
        watching = list(self.forward.listeners) + list(listeners)
        if step is None:
            step, self.calls = self.calls, self.calls + 1
        with runstate.training(step):
            values = self.executor.run(feeds, self.outputs, watching, mode="training")
        loss = 0.0
        for name in self.losses:
            loss += float(values[name])
        # Two names may share one gradient array; the updaters only read gradients, so that is safe.
        return loss, {name: values[node] for name, node in zip(self.wrt, self.gradient_nodes)}
