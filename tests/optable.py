"""Helpers shared by the table-driven op tests: build a graph for one op sample and run it."""
import numpy as np

import graphview as gv
from graphview import registry


def all_samples():
    """(op name, sample index, sample) for every sample of every registered op."""
    cases = []
    for definition in registry.definitions():
        for index, sample in enumerate(definition.samples() if definition.samples else ()):
            cases.append((definition.name, index, sample))
    return cases


def case_id(case):
    name, index, sample = case
    return f"{name}-{index}-{sample.label or 'sample'}".replace(" ", "_")


def build(name, sample, graph=None):
    """A graph with the sample's arrays as placeholders (keeping their strides) and the op applied."""
    graph = graph or gv.Graph(f"{name}-sample")
    inputs, feeds = [], {}
    for position, value in enumerate(sample.inputs):
        if isinstance(value, np.ndarray):
            placeholder = graph.placeholder(f"input{position}", value.shape, value.dtype)
            inputs.append(placeholder)
            feeds[placeholder.name] = value
        else:
            inputs.append(value)
    token = registry.default_graph.set(graph)
    try:
        output = registry.op(name)(*inputs, **sample.attrs)
    finally:
        registry.default_graph.reset(token)
    return graph, output, feeds


def tolerance(dtype):
    return dict(rtol=2e-6, atol=1e-6) if np.dtype(dtype) == np.float32 else dict(rtol=1e-12, atol=1e-12)
