"""A `Diagram` as a self-contained SVG: laid out here (no Graphviz), no fonts, scripts or URLs.

Every node is a `<g id="node-NAME" class="node KIND [visited] [current] [failed]">` and every
edge a `<g id="edge-SOURCE-N" class="edge KIND [taken]">` with `data-source`/`data-target`,
so a page can restyle them; the default look is one `<style>` scoped to `svg.graphrunner-graph`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from graphrunner.render.diagram import Diagram, DiagramEdge, DiagramNode
from graphrunner.render.labels import TIMES, clip
from graphrunner.render.layout import Box, Layout, Point, Route, Size, layered

NAME_CHAR, DETAIL_CHAR, LABEL_CHAR = 7.6, 6.3, 5.9  # average glyph widths (px) of the fonts below
PAD_X, PAD_Y, NAME_LINE, DETAIL_LINE = 12.0, 8.0, 16.0, 14.0
SLANTED = {"gate", "foreach", "parallel", "pause"}  # shapes whose sides cut into the box
SLANT = 10.0
ARROW = 7.0
STYLE = """
svg.graphrunner-graph { font-family: system-ui, -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; }
svg.graphrunner-graph .node .shape { fill: #ffffff; stroke: #475569; stroke-width: 1.4; }
svg.graphrunner-graph .node .inner { fill: none; stroke: #475569; stroke-width: 1; }
svg.graphrunner-graph .node text { fill: #0f172a; text-anchor: middle; }
svg.graphrunner-graph .node .name { font-size: 13px; font-weight: 600; }
svg.graphrunner-graph .node .detail { font-size: 11px; fill: #475569; }
svg.graphrunner-graph .node.gate .shape, svg.graphrunner-graph .node.pause .shape { fill: #f8fafc; }
svg.graphrunner-graph .node.start .shape { fill: #1e293b; stroke: #1e293b; }
svg.graphrunner-graph .node.end .shape { fill: #1e293b; stroke: #1e293b; }
svg.graphrunner-graph .node.start text, svg.graphrunner-graph .node.end text { fill: #ffffff; }
svg.graphrunner-graph .node.missing .shape { stroke: #dc2626; stroke-dasharray: 4 3; }
svg.graphrunner-graph .node.missing text { fill: #b91c1c; }
svg.graphrunner-graph .node.more .shape { fill: #f1f5f9; stroke: #94a3b8; }
svg.graphrunner-graph .node.visited .shape { fill: #dbeafe; stroke: #2563eb; }
svg.graphrunner-graph .node.failed .shape { fill: #fee2e2; stroke: #dc2626; stroke-width: 2.5; }
svg.graphrunner-graph .node.current .shape { fill: #fef3c7; stroke: #d97706; stroke-width: 3; }
svg.graphrunner-graph .node.end.visited .shape { fill: #2563eb; stroke: #2563eb; }
svg.graphrunner-graph .node .visits rect { fill: #2563eb; }
svg.graphrunner-graph .node .visits text { fill: #ffffff; font-size: 10px; font-weight: 600; }
svg.graphrunner-graph .edge .line { fill: none; stroke: #64748b; stroke-width: 1.3; }
svg.graphrunner-graph .edge .arrow { fill: #64748b; }
svg.graphrunner-graph .edge.on_error .line { stroke: #b91c1c; stroke-dasharray: 6 4; }
svg.graphrunner-graph .edge.on_error .arrow { fill: #b91c1c; }
svg.graphrunner-graph .edge.dynamic .line { stroke-dasharray: 2 3; }
svg.graphrunner-graph .edge.taken .line { stroke: #2563eb; stroke-width: 2.6; }
svg.graphrunner-graph .edge.taken .arrow { fill: #2563eb; }
svg.graphrunner-graph .edge .label rect { fill: #ffffff; fill-opacity: 0.92; }
svg.graphrunner-graph .edge .label text { font-size: 10.5px; fill: #334155; text-anchor: middle; }
svg.graphrunner-graph .edge.on_error .label text { fill: #b91c1c; }
svg.graphrunner-graph .caption { font-size: 12px; fill: #475569; }
"""
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
CAPTION = 22.0  # the height of the caption line above the drawing
CAPTION_CHAR = 7.4  # a generous glyph width for the 12px caption: a fallback font is wider, never clip it


def to_svg(diagram: Diagram) -> str:
    """The diagram laid out and drawn as one standalone SVG document."""
    sizes = {n.name: node_size(n) for n in diagram.nodes}
    labels = [label_size(e.label) if e.label else None for e in diagram.edges]
    pairs = [(e.source, e.target) for e in diagram.edges]
    layout = layered(sizes, pairs, labels, last=[n.name for n in diagram.nodes if n.kind == "end"])
    return "\n".join(_document(diagram, layout)) + "\n"


def node_size(node: DiagramNode) -> Size:
    """The box a node needs for its label lines (and its slanted sides)."""
    if node.kind in ("start", "end"):
        return (56.0, 26.0)
    widths = [len(node.lines[0]) * NAME_CHAR, *(len(line) * DETAIL_CHAR for line in node.lines[1:])]
    extra = 2 * SLANT if node.kind in SLANTED else 0.0
    height = 2 * PAD_Y + NAME_LINE + DETAIL_LINE * (len(node.lines) - 1)
    return (max(64.0, max(widths) + 2 * PAD_X + extra), height)


def label_size(label: str) -> Size:
    """The box of an edge label."""
    return (len(label) * LABEL_CHAR + 8, 15.0)


def _document(diagram: Diagram, layout: Layout) -> Iterable[str]:
    caption = clip(_caption(diagram), 160)
    width = max(layout.width, 32 + len(caption) * CAPTION_CHAR)
    height = layout.height + CAPTION
    attrs = {
        "xmlns": "http://www.w3.org/2000/svg",
        "class": "graphrunner-graph",
        "width": _n(width),
        "height": _n(height),
        "viewBox": f"0 0 {_n(width)} {_n(height)}",
        "role": "img",
        "data-graph-id": diagram.graph_id,
    }
    if diagram.run is not None:
        attrs |= {"data-run-id": diagram.run.run_id, "data-run-status": diagram.run.status}
    yield f"<svg{_attrs(attrs)}>"
    yield f"<title>{_esc(_caption(diagram))}</title>"
    yield f"<style>{STYLE}</style>"
    yield f'<text class="caption" x="{_n(16)}" y="{_n(16)}">{_esc(caption)}</text>'
    yield f'<g class="drawing" transform="translate(0 {_n(CAPTION)})">'
    for edge, route in zip(diagram.edges, layout.routes, strict=True):
        yield from _edge(edge, route)
    for node in diagram.nodes:
        yield from _node(node, layout.boxes[node.name])
    yield "</g>"
    for note in diagram.notes:
        yield f"<!-- {_esc(note).replace('--', '- -')} -->"
    yield "</svg>"


def _caption(diagram: Diagram) -> str:
    if diagram.run is None:
        return f"graph {diagram.graph_id}"
    return f"graph {diagram.graph_id} · run {diagram.run.run_id} ({diagram.run.status})"


def _node(node: DiagramNode, box: Box) -> Iterable[str]:
    attrs = {
        "id": node.element_id,
        "class": " ".join(node.classes),
        "data-node": node.name,
        "data-kind": node.kind,
    }
    if node.visits:
        attrs["data-visits"] = str(node.visits)
    yield f"<g{_attrs(attrs)}>"
    yield f"<title>{_esc(node.title)}</title>"
    yield from _shape(node.kind, box)
    yield _label_text(node, box)
    if node.visits > 1 and node.kind not in ("start", "end"):
        yield _badge(node.visits, box)
    yield "</g>"


def _shape(kind: str, box: Box) -> Iterable[str]:
    left, right = box.x - box.width / 2, box.x + box.width / 2
    top, bottom, s = box.y - box.height / 2, box.y + box.height / 2, SLANT
    polygons = {
        "gate": [
            (left + s, top), (right - s, top), (right, box.y),
            (right - s, bottom), (left + s, bottom), (left, box.y),
        ],
        "foreach": [(left + s, top), (right, top), (right - s, bottom), (left, bottom)],
        "parallel": [(left + s, top), (right - s, top), (right, bottom), (left, bottom)],
        "pause": [
            (left + s, top), (right - s, top), (right, top + s), (right, bottom - s),
            (right - s, bottom), (left + s, bottom), (left, bottom - s), (left, top + s),
        ],
    }  # fmt: skip
    if kind in polygons:
        yield f'<polygon class="shape" points="{_points(polygons[kind])}"/>'
        return
    radius = box.height / 2 if kind in ("return", "start", "end") else 6.0
    yield _rect("shape", left, top, box.width, box.height, radius)
    if kind == "subgraph":  # a subroutine: two inner bars
        for x in (left + 7, right - 7):
            yield f'<line class="inner" x1="{_n(x)}" y1="{_n(top)}" x2="{_n(x)}" y2="{_n(bottom)}"/>'


def _label_text(node: DiagramNode, box: Box) -> str:
    lines = node.lines if node.kind not in ("start", "end") else node.lines[:1]
    height = NAME_LINE + DETAIL_LINE * (len(lines) - 1)
    y = box.y - height / 2 + 12.0
    spans = []
    for i, line in enumerate(lines):
        cls = "name" if i == 0 else "detail"
        spans.append(f'<tspan class="{cls}" x="{_n(box.x)}" y="{_n(y)}">{_esc(line)}</tspan>')
        y += NAME_LINE if i == 0 else DETAIL_LINE
    return f"<text>{''.join(spans)}</text>"


def _badge(visits: int, box: Box) -> str:
    text = f"{TIMES}{visits}"
    width = len(text) * 6.5 + 8
    x, y = box.x + box.width / 2 - width / 2, box.y - box.height / 2
    rect = _rect("", x - width / 2, y - 8, width, 16, 8)
    return f'<g class="visits">{rect}<text x="{_n(x)}" y="{_n(y + 3.5)}">{text}</text></g>'


def _edge(edge: DiagramEdge, route: Route) -> Iterable[str]:
    attrs = {
        "id": edge.element_id,
        "class": " ".join(edge.classes),
        "data-source": edge.source,
        "data-target": edge.target,
        "data-kind": edge.kind,
    }
    yield f"<g{_attrs(attrs)}>"
    yield f"<title>{_esc(edge.title)}</title>"
    yield f'<path class="line" d="{_path(route)}"/>'
    yield f'<path class="arrow" d="{_arrow(route)}"/>'
    if edge.label and route.label_at is not None:
        w, h = label_size(edge.label)
        x, y = route.label_at
        yield (
            f'<g class="label">{_rect("", x - w / 2, y - h / 2, w, h, 3)}'
            f'<text x="{_n(x)}" y="{_n(y + 3.5)}">{_esc(edge.label)}</text></g>'
        )
    yield "</g>"


def _path(route: Route) -> str:
    """Straight segments for a loop; else a cubic curve per segment, vertical at both its ends."""
    (x0, y0), rest = route.points[0], route.points[1:]
    out = [f"M{_n(x0)},{_n(y0)}"]
    for x, y in rest:
        if route.loop:
            out.append(f"L{_n(x)},{_n(y)}")
        else:
            mid = (y0 + y) / 2
            out.append(f"C{_n(x0)},{_n(mid)} {_n(x)},{_n(mid)} {_n(x)},{_n(y)}")
        x0, y0 = x, y
    return " ".join(out)


def _arrow(route: Route) -> str:
    """A triangle at the route's end, pointing the way the route arrives."""
    (x1, y1), (x2, y2) = route.points[-2], route.points[-1]
    if not route.loop:
        x1, y1 = x2, (y1 + y2) / 2  # the curve's last control point
    dx, dy = x2 - x1, y2 - y1
    length = (dx * dx + dy * dy) ** 0.5 or 1.0
    ux, uy = dx / length, dy / length
    bx, by = x2 - ux * ARROW, y2 - uy * ARROW
    px, py = -uy * ARROW / 2, ux * ARROW / 2
    return f"M{_n(x2)},{_n(y2)} L{_n(bx + px)},{_n(by + py)} L{_n(bx - px)},{_n(by - py)} Z"


def _rect(cls: str, x: float, y: float, w: float, h: float, r: float) -> str:
    attr = f' class="{cls}"' if cls else ""
    return f'<rect{attr} x="{_n(x)}" y="{_n(y)}" width="{_n(w)}" height="{_n(h)}" rx="{_n(r)}"/>'


def _points(points: list[Point]) -> str:
    return " ".join(f"{_n(x)},{_n(y)}" for x, y in points)


def _attrs(attrs: dict[str, str]) -> str:
    return "".join(f' {k}="{_esc(v, quote=True)}"' for k, v in attrs.items())


def _esc(text: str, quote: bool = False) -> str:
    """Text for XML: characters XML cannot hold dropped, markup escaped."""
    text = _NOT_XML.sub("", text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace('"', "&quot;") if quote else text


def _n(value: float) -> str:
    """A coordinate with at most one decimal."""
    return f"{value:.1f}".removesuffix(".0")
