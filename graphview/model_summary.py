"""``g.summary(params=True)``: a Keras-style table of a graph's layers (ADR 0023)."""
import math

from graphview.shapes import format_shape
from graphview.variable import Kind


def _size(graph, name):
    return math.prod(graph.node(name).shape)


def _output_shape(graph, record):
    shapes = {format_shape(graph.node(call["output"]).shape) for call in record["calls"]}
    if not shapes:
        return "-"
    return shapes.pop() if len(shapes) == 1 else "multiple"


def layer_table(graph):
    """One row per layer that contains no other layer or has variables of its own (name, type, output
    shape, parameters: its own), then the totals: trainable, not trainable (running statistics), and the
    VARIABLEs made outside any layer. The rows add up to the total. A graph built without layers (an
    ONNX model, whose parameters are its initializers) gets one row per VARIABLE instead."""
    if not graph.layers:
        return _variable_table(graph)
    parents = {record["parent"] for record in graph.layers.values()}
    rows = [("layer (type)", "output shape", "params")]
    for name, record in graph.layers.items():
        if name in parents and not record["variables"]:
            continue
        rows.append((f"{name} ({record['type']})", _output_shape(graph, record),
                     f"{sum(_size(graph, v) for v in record['variables']):,}"))
    in_layers = {v for record in graph.layers.values() for v in record["variables"]}
    variables = [node.name for node in graph.nodes() if node.kind is Kind.VARIABLE]
    trainable = sum(_size(graph, v) for v in variables if v in in_layers and graph.is_trainable(v))
    frozen = sum(_size(graph, v) for v in variables if v in in_layers and not graph.is_trainable(v))
    outside = [v for v in variables if v not in in_layers]
    lines = [f"graph {graph.name!r}: {len(rows) - 1} layer{'' if len(rows) == 2 else 's'}", *_rows(rows)]
    lines.append(f"total params: {trainable + frozen:,} (trainable {trainable:,}, not trainable {frozen:,})")
    if outside:
        size = sum(_size(graph, v) for v in outside)
        lines.append(f"variables outside layers: {len(outside)} ({size:,} values): {', '.join(outside[:5])}"
                     + (", ..." if len(outside) > 5 else ""))
    return "\n".join(lines)


def _rows(rows):
    """``rows`` (the header first) as aligned lines between rules: names and shapes left, counts right."""
    widths = [max(len(row[i]) for row in rows) for i in range(3)]

    def line(row):
        return f"{row[0].ljust(widths[0])}  {row[1].ljust(widths[1])}  {row[2].rjust(widths[2])}"
    rule = "-" * len(line(rows[0]))
    return [line(rows[0]), rule, *(line(row) for row in rows[1:]), rule]


def _variable_table(graph):
    variables = [node for node in graph.nodes() if node.kind is Kind.VARIABLE]
    rows = [("variable", "shape", "params")]
    rows += [(node.name, format_shape(node.shape), f"{_size(graph, node.name):,}") for node in variables]
    trainable = sum(_size(graph, v.name) for v in variables if graph.is_trainable(v.name))
    frozen = sum(_size(graph, v.name) for v in variables if not graph.is_trainable(v.name))
    count = f"{len(variables)} variable{'' if len(variables) == 1 else 's'}"
    return "\n".join([f"graph {graph.name!r}: no layers (built without gv.layers, as an ONNX model's graph is); "
                      f"its {count}, for an ONNX model its initializers:", *_rows(rows),
                      f"total params: {trainable + frozen:,} (trainable {trainable:,}, not trainable {frozen:,})"])
