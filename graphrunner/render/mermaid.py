"""A `Diagram` as a Mermaid flowchart (what GitHub, GitLab and most Markdown viewers draw)."""

from __future__ import annotations

import json

from graphrunner.render.diagram import Diagram, DiagramEdge, DiagramNode
from graphrunner.render.labels import TIMES

SHAPES = {  # Mermaid's node shapes by kind: (opening, closing)
    "action": ("[", "]"),
    "gate": ("{{", "}}"),
    "foreach": ("[/", "/]"),
    "parallel": ("[/", "\\]"),
    "subgraph": ("[[", "]]"),
    "pause": (">", "]"),
    "return": ("([", "])"),
    "start": ("((", "))"),
    "end": ("(((", ")))"),
    "missing": ("[", "]"),
    "more": ("[", "]"),
}
ARROWS = {"solid": "-->", "dashed": "-.->", "dotted": "-.->"}
CLASS_DEFS = (
    "classDef terminal fill:#1e293b,stroke:#1e293b,color:#fff",
    "classDef missing fill:#fff,stroke:#dc2626,stroke-dasharray:4 3,color:#b91c1c",
    "classDef more fill:#f1f5f9,stroke:#94a3b8,color:#475569",
    "classDef visited fill:#dbeafe,stroke:#2563eb",
    "classDef reached fill:#2563eb,stroke:#2563eb,color:#fff",
    "classDef failed fill:#fee2e2,stroke:#dc2626,stroke-width:2px",
    "classDef current fill:#fef3c7,stroke:#d97706,stroke-width:3px",
)
MERMAID_CLASS = {"start": "terminal", "end": "terminal"}  # `end` is a Mermaid keyword
TAKEN_STYLE = "stroke:#2563eb,stroke-width:3px"
ON_ERROR_STYLE = "stroke:#b91c1c"


def to_mermaid(diagram: Diagram) -> str:
    """The diagram as Mermaid `flowchart TD` text: node classes paint a run, linkStyle its edges."""
    ids = {node.name: f"n{i}" for i, node in enumerate(diagram.nodes)}
    lines = ["---", f"title: {json.dumps(_title(diagram), ensure_ascii=False)}", "---", "flowchart TD"]
    lines += [f"    {ids[n.name]}{_shape(n)}" for n in diagram.nodes]
    lines += [f"    {_edge(e, ids)}" for e in diagram.edges]
    lines += [f"    {d}" for d in CLASS_DEFS]
    lines += _classes(diagram, ids)
    lines += _link_styles(diagram.edges)
    lines += [f"    %% {_comment(note)}" for note in diagram.notes]
    return "\n".join(lines) + "\n"


def _title(diagram: Diagram) -> str:
    title = diagram.graph_id
    if diagram.run is not None:
        title += f" · run {diagram.run.run_id} ({diagram.run.status})"
    return " ".join(title.split())


def _shape(node: DiagramNode) -> str:
    opening, closing = SHAPES[node.kind]
    text = "<br/>".join(_text(line) for line in node.lines)
    if node.visits > 1:
        text += f"<br/>{TIMES}{node.visits}"
    return f'{opening}"{text}"{closing}'


def _edge(edge: DiagramEdge, ids: dict[str, str]) -> str:
    arrow = ARROWS[edge.style]
    label = f'|"{_text(edge.label)}"|' if edge.label else ""
    return f"{ids[edge.source]} {arrow}{label} {ids[edge.target]}"


def _classes(diagram: Diagram, ids: dict[str, str]) -> list[str]:
    """`class n0,n3 visited` lines: by kind for the markers, then the run's paint."""
    by_class: dict[str, list[str]] = {}
    for node in diagram.nodes:
        terminal = node.kind in ("start", "end")
        for name in node.classes[1:]:
            name = "reached" if terminal and name == "visited" else MERMAID_CLASS.get(name, name)
            by_class.setdefault(name, []).append(ids[node.name])
    wanted = [d.split()[1] for d in CLASS_DEFS]
    return [f"    class {','.join(by_class[c])} {c}" for c in wanted if c in by_class]


def _link_styles(edges: tuple[DiagramEdge, ...]) -> list[str]:
    """linkStyle by edge index (Mermaid numbers links in the order they are written)."""
    out = []
    on_error = [str(i) for i, e in enumerate(edges) if e.kind == "on_error" and not e.taken]
    taken = [str(i) for i, e in enumerate(edges) if e.taken]
    if on_error:
        out.append(f"    linkStyle {','.join(on_error)} {ON_ERROR_STYLE}")
    if taken:
        out.append(f"    linkStyle {','.join(taken)} {TAKEN_STYLE}")
    return out


def _text(text: str) -> str:
    """Text safe inside a quoted Mermaid label: quotes, entities and HTML written as entity codes."""
    return (
        text.replace("#", "#35;")
        .replace('"', "#quot;")
        .replace("<", "#lt;")
        .replace(">", "#gt;")
        .replace("`", "#96;")
    )


def _comment(text: str) -> str:
    """Text on one line for a comment or the title."""
    return " ".join(_text(text).split())
