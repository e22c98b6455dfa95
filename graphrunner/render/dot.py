"""A `Diagram` as Graphviz DOT; `id` and `class` attributes carry over into Graphviz's own SVG."""

from __future__ import annotations

from graphrunner.render.diagram import Diagram, DiagramEdge, DiagramNode
from graphrunner.render.labels import TIMES

FONT = "Helvetica,Arial,sans-serif"
GRAPH = {"rankdir": "TB", "fontname": FONT, "labelloc": "t"}
NODE = {"fontname": FONT, "fontsize": "11", "fillcolor": "#ffffff", "color": "#475569"}
EDGE = {"fontname": FONT, "fontsize": "9", "color": "#64748b"}
DARK = {"style": "filled", "fillcolor": "#1e293b", "fontcolor": "#ffffff", "fixedsize": "true"}
SHAPES: dict[str, dict[str, str]] = {  # Graphviz node attributes by kind
    "action": {"shape": "box", "style": "rounded,filled"},
    "gate": {"shape": "hexagon", "style": "filled"},
    "foreach": {"shape": "parallelogram", "style": "filled"},
    "parallel": {"shape": "trapezium", "style": "filled"},
    "subgraph": {"shape": "box", "peripheries": "2", "style": "filled"},
    "pause": {"shape": "octagon", "style": "filled"},
    "return": {"shape": "box", "style": "rounded,filled,bold"},
    "start": {"shape": "circle", "width": "0.5", **DARK},
    "end": {"shape": "doublecircle", "width": "0.45", **DARK},
    "missing": {"shape": "box", "style": "dashed", "color": "#dc2626", "fontcolor": "#b91c1c"},
    "more": {"shape": "note", "style": "filled", "fillcolor": "#f1f5f9", "color": "#94a3b8"},
}
PAINT = {  # the run's paint, strongest last (a failed current node is drawn as failed)
    "visited": {"fillcolor": "#dbeafe", "color": "#2563eb"},
    "current": {"fillcolor": "#fef3c7", "color": "#d97706", "penwidth": "3"},
    "failed": {"fillcolor": "#fee2e2", "color": "#dc2626", "penwidth": "2.5"},
}
MARKER_PAINT = {"visited": {"fillcolor": "#2563eb", "color": "#2563eb"}}  # the end marker, reached
ON_ERROR = {"color": "#b91c1c", "fontcolor": "#b91c1c", "style": "dashed"}
TAKEN = {"color": "#2563eb", "penwidth": "2.5"}


def to_dot(diagram: Diagram) -> str:
    """The diagram as a DOT `digraph` that Graphviz lays out top to bottom."""
    lines = [
        f"digraph {quote(diagram.graph_id)} {{",
        f"    graph [{_attrs({**GRAPH, 'label': _title(diagram)})}];",
        f"    node [{_attrs(NODE)}];",
        f"    edge [{_attrs(EDGE)}];",
    ]
    lines += [f"    {_node(n)};" for n in diagram.nodes]
    lines += [f"    {_edge(e)};" for e in diagram.edges]
    lines += [f"    // {' '.join(note.split())}" for note in diagram.notes]
    return "\n".join([*lines, "}"]) + "\n"


def _title(diagram: Diagram) -> str:
    if diagram.run is None:
        return diagram.graph_id
    return f"{diagram.graph_id} · run {diagram.run.run_id} ({diagram.run.status})"


def _node(node: DiagramNode) -> str:
    label = "\n".join(node.lines) + (f"\n{TIMES}{node.visits}" if node.visits > 1 else "")
    attrs = {
        "id": node.element_id,
        "class": " ".join(node.classes),
        "label": label,
        "tooltip": node.title,
        **SHAPES[node.kind],
    }
    paint = MARKER_PAINT if node.kind in ("start", "end") else PAINT
    for name in node.classes:
        attrs |= paint.get(name, {})
    return f"{quote(node.name)} [{_attrs(attrs)}]"


def _edge(edge: DiagramEdge) -> str:
    attrs = {"id": edge.element_id, "class": " ".join(edge.classes), "tooltip": edge.title}
    if edge.label:
        attrs["label"] = edge.label
    if edge.style != "solid":
        attrs["style"] = edge.style
    if edge.kind == "on_error":
        attrs |= ON_ERROR
    if edge.taken:
        attrs |= TAKEN
    return f"{quote(edge.source)} -> {quote(edge.target)} [{_attrs(attrs)}]"


def _attrs(attrs: dict[str, str]) -> str:
    return ", ".join(f"{key}={quote(value)}" for key, value in attrs.items())


def quote(text: str) -> str:
    """`text` as a DOT double-quoted string: backslashes and quotes escaped, newlines as `\\n`."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + escaped.replace("\r", "").replace("\n", "\\n") + '"'
