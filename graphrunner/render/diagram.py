"""The neutral description of a drawing: nodes with a kind, label and run state; edges with a
kind, label, line style and whether the run took them. Mermaid, DOT and SVG are written from it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

NodeKind = Literal[
    "action", "gate", "foreach", "subgraph", "parallel", "pause", "return", "start", "end", "missing", "more"
]
EdgeKind = Literal["start", "next", "on_error", "end", "dynamic"]
LineStyle = Literal["solid", "dashed", "dotted"]
START = "$start"  # the entry marker drawn before `config.start` (a sentinel, never a node name)
MORE = "$more"  # the node that stands for the nodes not drawn
MISSING_PREFIX = "$missing:"  # a node named by an edge but not in the graph
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


@dataclass(frozen=True)
class DiagramNode:
    """One box: a graph node, or the start, end, missing-node or more-nodes marker."""

    name: str
    kind: NodeKind
    lines: tuple[str, ...]
    title: str
    visits: int = 0
    current: bool = False
    failed: bool = False

    @property
    def element_id(self) -> str:
        """The node's element id: `node-NAME`; `graph-start`, `graph-end`, `graph-more`; `missing-NAME`."""
        if self.kind in ("start", "end", "more"):
            return f"graph-{self.kind}"
        if self.kind == "missing":
            return "missing-" + safe_id(self.name.removeprefix(MISSING_PREFIX))
        return "node-" + safe_id(self.name)

    @property
    def classes(self) -> tuple[str, ...]:
        """CSS classes: `node`, the kind, then `visited`, `current`, `failed` as the run sets them."""
        flags = (("visited", self.visits > 0), ("current", self.current), ("failed", self.failed))
        return ("node", self.kind, *(name for name, on in flags if on))


@dataclass(frozen=True)
class DiagramEdge:
    """One arrow from `source` to `target` (node names, or the markers' names); its `element_id`
    is given once every edge of the graph is known (`build`)."""

    source: str
    target: str
    kind: EdgeKind
    label: str | None = None
    title: str = ""
    taken: bool = False
    element_id: str = ""

    @property
    def style(self) -> LineStyle:
        """Dashed for on_error, dotted for routes only a run shows (a routing function's)."""
        if self.kind == "on_error":
            return "dashed"
        return "dotted" if self.kind == "dynamic" else "solid"

    @property
    def classes(self) -> tuple[str, ...]:
        """CSS classes: `edge`, the kind, then `taken` when the run went this way."""
        return ("edge", self.kind, *(("taken",) if self.taken else ()))


@dataclass(frozen=True)
class RunInfo:
    """The run painted on a diagram."""

    run_id: str
    status: str


@dataclass(frozen=True)
class Diagram:
    """A graph as a drawing: nodes in drawing order, edges, the run painted on it, notes."""

    graph_id: str
    nodes: tuple[DiagramNode, ...]
    edges: tuple[DiagramEdge, ...]
    run: RunInfo | None = None
    notes: tuple[str, ...] = ()  # what was left out (nodes, branches) and why
    by_name: Mapping[str, DiagramNode] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "by_name", {n.name: n for n in self.nodes})

    def node(self, name: str) -> DiagramNode:
        """The node drawn for `name`; raises `KeyError`."""
        return self.by_name[name]

    def to_dict(self) -> dict[str, Any]:
        """The diagram as JSON data (what `graphrunner render --json` prints)."""
        return {
            "graph_id": self.graph_id,
            "run": None if self.run is None else {"run_id": self.run.run_id, "status": self.run.status},
            "nodes": [_node_dict(n) for n in self.nodes],
            "edges": [_edge_dict(e) for e in self.edges],
            "notes": list(self.notes),
        }


def _node_dict(node: DiagramNode) -> dict[str, Any]:
    return {
        "name": node.name,
        "id": node.element_id,
        "kind": node.kind,
        "label": list(node.lines),
        "classes": list(node.classes),
        "visits": node.visits,
        "current": node.current,
        "failed": node.failed,
    }


def _edge_dict(edge: DiagramEdge) -> dict[str, Any]:
    return {
        "id": edge.element_id,
        "source": edge.source,
        "target": edge.target,
        "kind": edge.kind,
        "label": edge.label,
        "style": edge.style,
        "classes": list(edge.classes),
        "taken": edge.taken,
    }


def safe_id(name: str) -> str:
    """A name as it goes into an element id (node names are already safe; stored names may not be)."""
    return _UNSAFE.sub("_", name) or "_"
