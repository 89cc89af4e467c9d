"""Graphviz DOT for a graph: ``graphview dot TARGET`` and :func:`to_dot`.

Placeholders are ellipses, variables filled boxes, constants grey boxes, op
outputs rounded boxes labelled with op, shape and dtype; losses have a double
border. Views (ops declared ``view=True``) are dashed and blue, with a dashed
"view of" edge to the array they alias; in-place ops are red, with a bold red
"writes" edge to each input they overwrite.
"""
from graphview.registry import get as get_op
from graphview.shapes import format_shape
from graphview.variable import Kind

STYLES = {
    Kind.PLACEHOLDER: 'shape=ellipse, style=filled, fillcolor="#fff2cc"',
    Kind.VARIABLE: 'shape=box, style=filled, fillcolor="#d5e8d4"',
    Kind.CONSTANT: 'shape=box, style=filled, fillcolor="#eeeeee"',
    Kind.ARRAY: 'shape=box, style=rounded',
}


def quote(text):
    """A DOT string literal."""
    return '"' + str(text).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def to_dot(graph):
    """The graph as a Graphviz ``digraph``, one statement per line."""
    losses = {v.name for v in graph.losses}
    lines = [f"digraph {quote(graph.name)} {{", "  rankdir=TB;", '  node [fontname="Helvetica", fontsize=10];',
             '  edge [fontname="Helvetica", fontsize=9];']
    for node in graph.nodes():
        description = f"{format_shape(node.shape)} {node.dtype.name}"
        style = STYLES[node.kind]
        if node.kind is Kind.ARRAY:
            definition = get_op(node.op)
            label = f"{node.name}\n{node.op} {description}"
            if definition.view:
                label += "\n(view)"
                style = 'shape=box, style="rounded,dashed", color=blue, fontcolor=blue'
            elif definition.inplace:
                label += "\n(in-place)"
                style = 'shape=box, style="rounded,bold", color=red, fontcolor=red'
        else:
            label = f"{node.name}\n{node.kind.value.lower()} {description}"
        if node.name in losses:
            style += ", peripheries=2"
        lines.append(f"  {quote(node.name)} [label={quote(label)}, {style}];")
    for node in graph.nodes():
        if node.kind is not Kind.ARRAY:
            continue
        definition = get_op(node.op)
        for position, source in enumerate(node.inputs):
            attributes = []
            if position in definition.inplace:
                attributes.append('color=red, style=bold, label="writes", fontcolor=red')
            elif definition.view and position == 0:
                attributes.append('color=blue, style=dashed, label="view of", fontcolor=blue')
            if len(node.inputs) > 1:
                attributes.append(f'taillabel="{position}"')
            suffix = f" [{', '.join(attributes)}]" if attributes else ""
            lines.append(f"  {quote(source)} -> {quote(node.name)}{suffix};")
    lines.append("}")
    return "\n".join(lines) + "\n"
