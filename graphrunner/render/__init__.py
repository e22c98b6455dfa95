"""Drawing graphs: a graph, and optionally a run's path on it, as Mermaid, Graphviz DOT or SVG.

```python
from graphrunner.render import render
print(render(graph))                              # Mermaid flowchart text
svg = render(graph, format="svg", run=result)     # a RunResult, or a RunTrace, painted
```

`build_diagram` gives the neutral `Diagram` the writers share (`to_mermaid`, `to_dot`,
`to_svg`); `Graph.draw_mermaid()` is the short way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, get_args

from graphrunner.errors import GraphrunnerError
from graphrunner.render.build import MAX_BRANCHES, MAX_NODES, build_diagram
from graphrunner.render.diagram import Diagram, DiagramEdge, DiagramNode, RunInfo
from graphrunner.render.dot import to_dot
from graphrunner.render.mermaid import to_mermaid
from graphrunner.render.svg import to_svg
from graphrunner.render.trace import RunTrace

if TYPE_CHECKING:
    from graphrunner.compiled import CompiledGraph
    from graphrunner.model import GraphSpec
    from graphrunner.results import RunResult

Format = Literal["mermaid", "dot", "svg"]
FORMATS: tuple[Format, ...] = get_args(Format)
WRITERS = {"mermaid": to_mermaid, "dot": to_dot, "svg": to_svg}


def render(
    graph: CompiledGraph | GraphSpec,
    format: Format = "mermaid",
    *,
    run: RunResult | RunTrace | None = None,
    max_nodes: int = MAX_NODES,
) -> str:
    """`graph` drawn in `format`, with `run` (its path, current and failed nodes) painted on it."""
    writer = WRITERS.get(format)
    if writer is None:
        raise GraphrunnerError(f"unknown render format {format!r}; use one of {', '.join(FORMATS)}")
    return writer(diagram(graph, run=run, max_nodes=max_nodes))


def diagram(
    graph: CompiledGraph | GraphSpec,
    *,
    run: RunResult | RunTrace | None = None,
    max_nodes: int = MAX_NODES,
) -> Diagram:
    """The neutral `Diagram` of `graph`, with `run` painted on it."""
    from graphrunner.compiled import CompiledGraph

    spec = graph.spec if isinstance(graph, CompiledGraph) else graph
    trace = run if isinstance(run, RunTrace) or run is None else RunTrace.of_result(run)
    if max_nodes < 1:
        raise GraphrunnerError(f"max_nodes must be at least 1, got {max_nodes}")
    return build_diagram(spec, trace, max_nodes=max_nodes)


__all__ = [
    "FORMATS",
    "MAX_BRANCHES",
    "MAX_NODES",
    "Diagram",
    "DiagramEdge",
    "DiagramNode",
    "Format",
    "RunInfo",
    "RunTrace",
    "build_diagram",
    "diagram",
    "render",
    "to_dot",
    "to_mermaid",
    "to_svg",
]
