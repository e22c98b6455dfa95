"""A compact layered (Sugiyama-style) layout, top to bottom, for drawing graphs without Graphviz.

1. Cycles: a depth-first walk from the first node reverses the edges that close a loop.
2. Ranks: longest path from the sources; the `last` nodes go below every other.
3. Every rank is two layers: nodes on even layers, and on the odd layer between, one small
   vertex per edge passing (its label's box when it has one), so labels never overlap and
   long edges are routed between nodes.
4. Order: barycentre sweeps down and up; the order with the fewest crossings is kept.
5. Coordinates: each vertex moves towards the mean of its neighbours, layer by layer,
   while keeping its place and its distance from its neighbours in the layer.
"""

from __future__ import annotations

from bisect import bisect_right, insort
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise

Point = tuple[float, float]
Size = tuple[float, float]
SWEEPS = 8  # crossing-reduction sweeps (each one down and one up)
PLACEMENT_WORK = 60_000  # vertex moves in all: 8 passes for a small graph, fewer (2 at least) for a big one
NODE_GAP = 32.0  # horizontal space between two boxes of a layer
LINE_GAP = 24.0  # ... between an edge's vertex and a box
BEND_GAP = 10.0  # ... between two edges' vertices
MIN_EDGE_LAYER = 22.0  # the height of an odd layer without labels
LAYER_PAD = 6.0
MARGIN = 16.0
MAX_BENDS = 10_000  # edge vertices in all; edges past it are drawn straight


@dataclass(frozen=True)
class Box:
    """A laid-out node: centre and size."""

    x: float
    y: float
    width: float
    height: float


@dataclass(frozen=True)
class Route:
    """A laid-out edge: the points it passes, from its source to its target, and its label's centre."""

    points: tuple[Point, ...]
    label_at: Point | None = None
    loop: bool = False


@dataclass(frozen=True)
class Layout:
    """Where every node and edge goes, and the size of the whole drawing."""

    boxes: Mapping[str, Box]
    routes: tuple[Route, ...]
    width: float
    height: float


@dataclass
class _Vertex:
    layer: int
    width: float
    height: float
    name: str | None = None  # a node's name; None for an edge's vertex
    x: float = 0.0
    up: list[int] = field(default_factory=list)
    down: list[int] = field(default_factory=list)


def layered(
    sizes: Mapping[str, Size],
    edges: Sequence[tuple[str, str]],
    labels: Sequence[Size | None] = (),
    *,
    last: Collection[str] = (),
) -> Layout:
    """Lay out nodes (by name, with their sizes) and edges (with their labels' sizes)."""
    names = list(sizes)
    flipped = _back_edges(names, edges)
    ranks = _ranks(names, edges, flipped, last)
    graph = _Graph(names, sizes, ranks)
    chains = [graph.chain(e, flipped[i], _label(labels, i)) for i, e in enumerate(edges)]
    layers = graph.order()
    graph.place(layers)
    heights = graph.layer_tops(layers)
    boxes = {v.name: Box(v.x, heights[v.layer][0], v.width, v.height) for v in graph.vertices if v.name}
    routes = tuple(_route(graph, heights, e, chains[i], flipped[i], i, labels) for i, e in enumerate(edges))
    return Layout(boxes, routes, _width(graph, routes, labels) + MARGIN, _height(heights) + MARGIN)


def _width(graph: _Graph, routes: tuple[Route, ...], labels: Sequence[Size | None]) -> float:
    """The right-most x of any box, edge point or label."""
    right = [v.x + v.width / 2 for v in graph.vertices]
    right += [x for r in routes for x, _ in r.points]
    for route, size in zip(routes, labels, strict=False):
        if route.label_at is not None and size is not None:
            right.append(route.label_at[0] + size[0] / 2)
    return max(right, default=0.0)


def _height(heights: Mapping[int, tuple[float, float]]) -> float:
    return max((middle + h / 2 for middle, h in heights.values()), default=0.0)


def _label(labels: Sequence[Size | None], i: int) -> Size | None:
    return labels[i] if i < len(labels) else None


def _back_edges(names: list[str], edges: Sequence[tuple[str, str]]) -> list[bool]:
    """For each edge, True if it closes a cycle of a depth-first walk (drawn upwards)."""
    out_of: dict[str, list[tuple[int, str]]] = {n: [] for n in names}
    for i, (a, b) in enumerate(edges):
        out_of[a].append((i, b))
    state: dict[str, int] = {}  # 1: on the walk's stack, 2: done
    flipped = [False] * len(edges)
    for root in names:
        if root in state:
            continue
        state[root] = 1
        stack = [(root, iter(out_of[root]))]
        while stack:
            node, rest = stack[-1]
            step = next(rest, None)
            if step is None:
                state[node] = 2
                stack.pop()
                continue
            i, target = step
            if state.get(target) == 1:
                flipped[i] = True
            elif target not in state:
                state[target] = 1
                stack.append((target, iter(out_of[target])))
    return flipped


def _ranks(
    names: list[str], edges: Sequence[tuple[str, str]], flipped: list[bool], last: Collection[str]
) -> dict[str, int]:
    """Longest-path ranks over the edges, oriented downwards; `last` nodes below all others."""
    succ: dict[str, list[str]] = {n: [] for n in names}
    indegree = dict.fromkeys(names, 0)
    for (a, b), back in zip(edges, flipped, strict=True):
        top, bottom = (b, a) if back else (a, b)
        if top != bottom:
            succ[top].append(bottom)
            indegree[bottom] += 1
    rank = dict.fromkeys(names, 0)
    ready = [n for n in names if indegree[n] == 0]
    while ready:
        node = ready.pop()
        for nxt in succ[node]:
            rank[nxt] = max(rank[nxt], rank[node] + 1)
            indegree[nxt] -= 1
            if indegree[nxt] == 0:
                ready.append(nxt)
    others = [rank[n] for n in names if n not in last]
    for name in last:
        if name in rank and others:
            rank[name] = max(max(others) + 1, rank[name])
    return rank


class _Graph:
    """Nodes and edge vertices on layers, linked up and down."""

    def __init__(self, names: list[str], sizes: Mapping[str, Size], ranks: Mapping[str, int]) -> None:
        self.vertices = [_Vertex(2 * ranks[n], *sizes[n], name=n) for n in names]
        self.index = {n: i for i, n in enumerate(names)}
        self.budget = MAX_BENDS

    def chain(self, edge: tuple[str, str], back: bool, label: Size | None) -> list[int]:
        """The vertices an edge passes, top to bottom (both ends included); [] for a loop."""
        a, b = self.index[edge[0]], self.index[edge[1]]
        if back:
            a, b = b, a
        if a == b:
            return []
        top, bottom = self.vertices[a].layer, self.vertices[b].layer
        if bottom - top - 1 > self.budget:
            return [a, b]
        self.budget -= bottom - top - 1
        chain = [a]
        label_layer = bottom - 1 if back else top + 1
        for layer in range(top + 1, bottom):
            size = label if label is not None and layer == label_layer else (0.0, 0.0)
            self.vertices.append(_Vertex(layer, *size))
            chain.append(len(self.vertices) - 1)
        chain.append(b)
        for upper, lower in pairwise(chain):
            self.vertices[upper].down.append(lower)
            self.vertices[lower].up.append(upper)
        return chain

    def order(self) -> list[list[int]]:
        """Vertices by layer, ordered by barycentre sweeps; the order with fewest crossings."""
        count = max((v.layer for v in self.vertices), default=0) + 1
        layers: list[list[int]] = [[] for _ in range(count)]
        for i in self._walk():
            layers[self.vertices[i].layer].append(i)
        best, best_crossings = [list(layer) for layer in layers], self.crossings(layers)
        for _ in range(SWEEPS):
            if best_crossings == 0:
                break
            self._sweep(layers, range(1, count), up=True)
            self._sweep(layers, range(count - 2, -1, -1), up=False)
            crossings = self.crossings(layers)
            if crossings < best_crossings:
                best, best_crossings = [list(layer) for layer in layers], crossings
        return best

    def _walk(self) -> list[int]:
        """Every vertex once, depth first from the nodes in their order: a tidy first order."""
        seen: set[int] = set()
        out: list[int] = []
        for root in range(len(self.index)):
            stack = [root]
            while stack:
                i = stack.pop()
                if i in seen:
                    continue
                seen.add(i)
                out.append(i)
                stack.extend(reversed(self.vertices[i].down))
        out += [i for i in range(len(self.vertices)) if i not in seen]
        return out

    def _sweep(self, layers: list[list[int]], indices: range, *, up: bool) -> None:
        """Sort each layer by the mean position of its vertices' neighbours in the layer before."""
        for layer in indices:
            before = {v: p for p, v in enumerate(layers[layer - 1 if up else layer + 1])}
            keys = {v: self._barycentre(v, p, before, up) for p, v in enumerate(layers[layer])}
            layers[layer].sort(key=keys.__getitem__)

    def _barycentre(self, v: int, here: int, before: dict[int, int], up: bool) -> float:
        near = self.vertices[v].up if up else self.vertices[v].down
        if not near:
            return float(here)
        return sum(before[n] for n in near) / len(near)

    def crossings(self, layers: list[list[int]]) -> int:
        """How many pairs of edge segments cross, between every two adjacent layers."""
        total = 0
        for upper, lower in pairwise(layers):
            position = {v: p for p, v in enumerate(lower)}
            ends = sorted((p, position[d]) for p, v in enumerate(upper) for d in self.vertices[v].down)
            seen: list[int] = []
            for _, end in ends:
                total += len(seen) - bisect_right(seen, end)
                insort(seen, end)
        return total

    def place(self, layers: list[list[int]]) -> None:
        """x for every vertex: packed, then pulled towards its neighbours pass by pass."""
        for layer in layers:
            self._fit(layer, [0.0] * len(layer))
        for n in range(max(2, min(8, PLACEMENT_WORK // max(1, len(self.vertices))))):
            up = n % 2 == 0
            for layer in layers if up else reversed(layers):
                self._fit(layer, [self._wish(v, up) for v in layer])
        left = min((v.x - v.width / 2 for v in self.vertices), default=0.0)
        for v in self.vertices:
            v.x += MARGIN - left

    def _wish(self, v: int, up: bool) -> float:
        vertex = self.vertices[v]
        near = (vertex.up if up else vertex.down) or vertex.up or vertex.down
        if not near:
            return vertex.x
        return sum(self.vertices[n].x for n in near) / len(near)

    def _fit(self, layer: list[int], wish: list[float]) -> None:
        """Place `layer` in its order, as near `wish` as the gaps allow (mean of a left and a right fit)."""
        if not layer:
            return
        gaps = [self._gap(a, b) for a, b in pairwise(layer)]
        left = list(wish)
        for i in range(1, len(layer)):
            left[i] = max(wish[i], left[i - 1] + gaps[i - 1])
        right = list(wish)
        for i in range(len(layer) - 2, -1, -1):
            right[i] = min(wish[i], right[i + 1] - gaps[i])
        for i, v in enumerate(layer):
            self.vertices[v].x = (left[i] + right[i]) / 2

    def _gap(self, a: int, b: int) -> float:
        va, vb = self.vertices[a], self.vertices[b]
        space = NODE_GAP if va.name and vb.name else LINE_GAP if va.name or vb.name else BEND_GAP
        return (va.width + vb.width) / 2 + space

    def layer_tops(self, layers: list[list[int]]) -> dict[int, tuple[float, float]]:
        """For each layer: the y of its middle and its height."""
        out: dict[int, tuple[float, float]] = {}
        top = MARGIN
        for n, layer in enumerate(layers):
            height = max((self.vertices[v].height for v in layer), default=0.0)
            if n % 2:
                height = max(height, MIN_EDGE_LAYER)
            out[n] = (top + height / 2, height)
            top += height + LAYER_PAD
        return out


def _route(
    graph: _Graph,
    heights: Mapping[int, tuple[float, float]],
    edge: tuple[str, str],
    chain: list[int],
    back: bool,
    i: int,
    labels: Sequence[Size | None],
) -> Route:
    """The points of one edge, from its source's border to its target's."""
    if not chain:
        return _loop(graph.vertices[graph.index[edge[0]]], heights, _label(labels, i))
    points: list[Point] = []
    for n, v in enumerate(chain):
        vertex = graph.vertices[v]
        y = heights[vertex.layer][0]
        if vertex.name is None:
            points.append((vertex.x, y))
            continue
        side = 1 if n == 0 else -1  # leave a node from its bottom, enter the next by its top
        shift = vertex.width / 4 if back else 0.0
        points.append((vertex.x + shift, y + side * vertex.height / 2))
    if back:
        points.reverse()
    label_at = None
    if _label(labels, i) is not None:  # on the edge's vertex next to its source, which has the label's size
        label_at = points[1] if len(points) > 2 else _middle(points[0], points[-1])
    return Route(tuple(points), label_at)


def _loop(vertex: _Vertex, heights: Mapping[int, tuple[float, float]], label: Size | None) -> Route:
    """An edge from a node to itself: out of its right side and back in, its label beside it."""
    y = heights[vertex.layer][0]
    right = vertex.x + vertex.width / 2
    points = ((right, y - 6), (right + 26, y - 14), (right + 26, y + 14), (right, y + 6))
    label_at = (right + 30 + label[0] / 2, y) if label is not None else None
    return Route(points, label_at, loop=True)


def _middle(a: Point, b: Point) -> Point:
    return ((a[0] + b[0]) / 2, (a[1] + b[1]) / 2)
