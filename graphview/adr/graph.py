"""The links between records as a networkx graph, and that graph as Graphviz DOT."""
import networkx as nx


def link_graph(folder):
    """A DiGraph with a node per record and an edge per link that points at an existing record:
    ``new -> old`` (kind "supersedes") for ``Superseded by`` and ``Supersedes:``, ``a -> b`` (kind "relates to")
    for ``Relates to``."""
    graph = nx.DiGraph()
    records = dict(folder.records())
    for number, record in records.items():
        graph.add_node(number, title=record.title, status=record.status_text or "")
    for number, record in records.items():
        for newer in record.superseded_by:
            if newer in records and newer != number:
                graph.add_edge(newer, number, kind="supersedes")
        for _, older in record.supersedes:
            if older in records and older != number:
                graph.add_edge(number, older, kind="supersedes")
        for _, target in record.relates_to:
            if target in records and target != number and not graph.has_edge(number, target):
                graph.add_edge(number, target, kind="relates to")
    return graph


def _quote(text):
    return '"' + str(text).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def to_dot(graph):
    """Graphviz DOT text for a graph from link_graph: superseded and rejected records are drawn dashed,
    "relates to" edges dotted."""
    lines = ["digraph adr {", "  rankdir=LR;", "  node [shape=box];"]
    for number, data in sorted(graph.nodes(data=True)):
        style = ", style=dashed" if data["status"].lower().startswith(("superseded", "rejected")) else ""
        label = f"{number:04d} {data['title']}\n{data['status']}"
        lines.append(f"  {_quote(f'{number:04d}')} [label={_quote(label)}{style}];")
    for source, target, data in sorted(graph.edges(data=True)):
        style = "" if data["kind"] == "supersedes" else ", style=dotted"
        lines.append(f"  {_quote(f'{source:04d}')} -> {_quote(f'{target:04d}')} "
                     f"[label={_quote(data['kind'])}{style}];")
    lines.append("}")
    return "\n".join(lines) + "\n"
