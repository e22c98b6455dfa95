"""`build_diagram`: a graph (and optionally a run's trace) to the neutral `Diagram`.

Huge graphs stay drawable: at most `max_nodes` nodes are drawn (those the run visited first,
then in the order a run from `start` reaches them), the rest stand behind one "more" node;
a node draws at most `max_branches` of its branches (every branch the run took is kept).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import replace

from graphrunner.model import END, AnyNode, GraphSpec, ReturnNode
from graphrunner.render.diagram import (
    MISSING_PREFIX,
    MORE,
    START,
    Diagram,
    DiagramEdge,
    DiagramNode,
    RunInfo,
    safe_id,
)
from graphrunner.render.labels import MAX_TITLE, TIMES, clip, condition_text, node_detail
from graphrunner.render.trace import ENDED, RunTrace

MAX_NODES = 200  # graph nodes drawn; Mermaid's own limit is 500 edges
MAX_BRANCHES = 16  # branches of one node drawn


def build_diagram(
    spec: GraphSpec,
    trace: RunTrace | None = None,
    *,
    max_nodes: int = MAX_NODES,
    max_branches: int = MAX_BRANCHES,
) -> Diagram:
    """The drawing of `spec`, with `trace` painted on it when given."""
    edges = _numbered([*_static_edges(spec), *_dynamic_edges(spec, trace)])
    edges = [_to_missing(_mark(e, spec, trace), spec) for e in edges]
    notes: list[str] = []
    edges = _cap_branches(edges, max_branches, notes)
    shown = _shown_nodes(spec, edges, trace, max_nodes, notes)
    edges = _redirect(edges, spec, shown)
    nodes = _nodes(spec, shown, edges, trace)
    run = None if trace is None else RunInfo(trace.run_id, trace.status)
    if trace is not None and not trace.complete:
        notes.append(f"only the first {trace.records_read} transcript records were read")
    return Diagram(spec.id, nodes, tuple(edges), run, tuple(notes))


def _static_edges(spec: GraphSpec) -> list[DiagramEdge]:
    """The start edge, then every node's branches, on_error and end edges, in spec order."""
    out = (
        [DiagramEdge(START, spec.config.start, "start", title="the run begins")] if spec.config.start else []
    )
    for name, node in spec.nodes.items():
        out.extend(_node_edges(name, node))
    return out


def _node_edges(name: str, node: AnyNode) -> list[DiagramEdge]:
    if isinstance(node, ReturnNode):
        return [DiagramEdge(name, END, "end", title=f"{name} returns: the run ends")]
    out = []
    if node.next is None:
        out.append(DiagramEdge(name, END, "end", title=f"{name} has no next: the run ends"))
    elif node.next.branches:
        conditional = any(b.when is not None for b in node.next.branches)
        for b in node.next.branches:
            cond = condition_text(b.when) if b.when is not None else None
            label = clip(cond) if cond is not None else ("default" if conditional else None)
            title = f"{name} → {b.to}" + (f" when {clip(cond, MAX_TITLE)}" if cond else "")
            out.append(DiagramEdge(name, b.to, "next", label, title))
    on_error = getattr(node, "on_error", None)
    if on_error:
        out.append(DiagramEdge(name, on_error, "on_error", "on_error", f"{name} fails → {on_error}"))
    return out


def _dynamic_edges(spec: GraphSpec, trace: RunTrace | None) -> list[DiagramEdge]:
    """Transitions the run took that no static edge explains (a routing function's choices)."""
    if trace is None:
        return []
    static = {(e.source, e.target) for e in _static_edges(spec)}
    seen = sorted({(a, b) for a, b, kind in trace.transitions if kind is not None} - static)
    title = "{} → {}, chosen as the run ran"
    return [DiagramEdge(a, b, "dynamic", None, title.format(a, b)) for a, b in seen if a in spec.nodes]


def _to_missing(edge: DiagramEdge, spec: GraphSpec) -> DiagramEdge:
    """An edge to a name that is no node, pointed at the missing-node marker of that name."""
    if edge.target in spec.nodes or edge.target == END:
        return edge
    return replace(edge, target=MISSING_PREFIX + edge.target)


def _mark(edge: DiagramEdge, spec: GraphSpec, trace: RunTrace | None) -> DiagramEdge:
    """`edge`, marked taken if the run went along it."""
    return replace(edge, taken=_taken(edge, spec, trace)) if trace is not None else edge


def _taken(edge: DiagramEdge, spec: GraphSpec, trace: RunTrace) -> bool:
    if edge.kind == "start":
        return trace.visits.get(edge.target, 0) > 0
    if edge.kind == "on_error":
        return trace.taken(edge.source, edge.target, "error")
    if edge.kind == "next":  # an error under error_mode: continue follows next too
        on_error = getattr(spec.nodes[edge.source], "on_error", None)
        errored = on_error != edge.target and trace.taken(edge.source, edge.target, "error")
        return errored or trace.taken(edge.source, edge.target, "ok")
    return trace.taken(edge.source, edge.target, None)


def _cap_branches(edges: list[DiagramEdge], limit: int, notes: list[str]) -> list[DiagramEdge]:
    """At most `limit` next edges per node, plus the ones the run took."""
    counts: dict[str, int] = {}
    out = []
    for edge in edges:
        if edge.kind == "next":
            counts[edge.source] = counts.get(edge.source, 0) + 1
            if counts[edge.source] > limit and not edge.taken:
                continue
        out.append(edge)
    notes.extend(f"node '{n}': {limit} of its {c} branches drawn" for n, c in counts.items() if c > limit)
    return out


def _shown_nodes(
    spec: GraphSpec, edges: list[DiagramEdge], trace: RunTrace | None, limit: int, notes: list[str]
) -> list[str]:
    """The graph nodes drawn, in spec order: all of them, or the first `limit` by priority."""
    if len(spec.nodes) <= limit:
        return list(spec.nodes)
    order = _reach_order(spec, edges)
    visited = trace.visits if trace is not None else {}
    ranked = sorted(spec.nodes, key=lambda n: (visited.get(n, 0) == 0, order[n]))
    kept = set(ranked[:limit])
    notes.append(f"{limit} of {len(spec.nodes)} nodes drawn; the others stand behind '… more'")
    return [n for n in spec.nodes if n in kept]


def _reach_order(spec: GraphSpec, edges: list[DiagramEdge]) -> dict[str, int]:
    """Nodes numbered in the order a breadth-first walk from `start` meets them, then the rest."""
    succ: dict[str, list[str]] = {}
    for e in edges:
        succ.setdefault(e.source, []).append(e.target)
    order: dict[str, int] = {}
    queue = deque([START])
    while queue:
        name = queue.popleft()
        if name in order or (name not in spec.nodes and name != START):
            continue
        order[name] = len(order)
        queue.extend(succ.get(name, ()))
    for name in spec.nodes:
        order.setdefault(name, len(order))
    return order


def _redirect(edges: list[DiagramEdge], spec: GraphSpec, shown: list[str]) -> list[DiagramEdge]:
    """Edges into graph nodes not drawn go to the more node (one per source); edges out of them go."""
    left_out = set(spec.nodes) - set(shown)
    out: list[DiagramEdge] = []
    into_more: dict[str, int] = {}
    for edge in edges:
        if edge.source in left_out:
            continue
        if edge.target not in left_out:
            out.append(edge)
        elif edge.source not in into_more:
            into_more[edge.source] = len(out)
            title = f"{edge.source} → nodes not drawn"
            out.append(replace(edge, target=MORE, label=None, title=title))
        elif edge.taken:
            i = into_more[edge.source]
            out[i] = replace(out[i], taken=True)
    return out


def _nodes(
    spec: GraphSpec, shown: list[str], edges: list[DiagramEdge], trace: RunTrace | None
) -> tuple[DiagramNode, ...]:
    """The start marker, the drawn graph nodes, missing targets, the more node and the end marker."""
    targets = [e.target for e in edges]
    out = []
    if spec.config.start:  # a graph drawn as written may have none
        out.append(DiagramNode(START, "start", ("start",), f"start: the run begins at {spec.config.start}"))
    out += [_paint(_graph_node(name, spec.nodes[name]), trace) for name in shown]
    out += [_missing(t) for t in dict.fromkeys(targets) if t.startswith(MISSING_PREFIX)]
    if MORE in targets:
        out.append(DiagramNode(MORE, "more", ("… more",), "nodes not drawn"))
    if END in targets:
        out.append(_paint(DiagramNode(END, "end", ("end",), "$end: the run ends"), trace))
    return tuple(out)


def _graph_node(name: str, node: AnyNode) -> DiagramNode:
    lines = [clip(name), node_detail(node)]
    fn = getattr(getattr(node, "next", None), "fn", None)
    if fn:
        lines.append(clip(f"next: fn {fn}"))
    title = f"{name} ({node.type})" + (f": {clip(node.description, MAX_TITLE)}" if node.description else "")
    return DiagramNode(name, node.type, tuple(lines), title)


def _missing(name: str) -> DiagramNode:
    target = clip(name.removeprefix(MISSING_PREFIX))
    return DiagramNode(name, "missing", (target, "not in the graph"), f"{target}: no node of this name")


def _paint(node: DiagramNode, trace: RunTrace | None) -> DiagramNode:
    """`node` with the run's visits, failure and position on it."""
    if trace is None:
        return node
    visits = trace.visits.get(node.name, 0) if node.kind != "end" else int(trace.status in ENDED)
    failed, current = node.name in trace.failed, node.name == trace.current
    title = node.title + (f"; visited {visits}{TIMES}" if visits else "")
    title += ("; failed here" if failed else "") + ("; the run is here" if current else "")
    return replace(node, visits=visits, current=current, failed=failed, title=title)


def _numbered(edges: Iterable[DiagramEdge]) -> list[DiagramEdge]:
    """Edges with their element ids, given before anything is left out so that they stay stable:
    `edge-start`, and `edge-SOURCE-N` for the N-th edge out of SOURCE (a run's own routes last)."""
    counts: dict[str, int] = {}
    out = []
    for e in edges:
        if e.source == START:
            out.append(replace(e, element_id="edge-start"))
            continue
        n = counts.get(e.source, 0)
        counts[e.source] = n + 1
        out.append(replace(e, element_id=f"edge-{safe_id(e.source)}-{n}"))
    return out
