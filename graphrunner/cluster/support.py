"""What the cluster cannot run yet: parallel nodes and foreach over a graph (issue 17).

Both run in-process (`graph.invoke`, `graphrunner run --in-process`). A producer refuses to
submit a graph that has one, naming the node, so no run is created that a worker could only
fail; a worker that meets one anyway (a graph stored by a newer producer) fails that node
with the same message rather than guessing.
"""

from __future__ import annotations

from collections.abc import Iterator

from graphrunner.engine import ActionFailure
from graphrunner.errors import GraphValidationError
from graphrunner.graph import Graph
from graphrunner.model import ForeachNode, GraphSpec, ParallelNode
from graphrunner.report import Issue

CODE = "not_on_cluster_yet"


def unsupported(spec: GraphSpec) -> Iterator[tuple[str, str]]:
    """(node, why) for each node of `spec` the cluster does not run yet."""
    for name, node in spec.nodes.items():
        if isinstance(node, ParallelNode):
            yield name, "a parallel node"
        elif isinstance(node, ForeachNode) and node.graph is not None:
            yield name, "a foreach over a graph"


def message(graph_id: str, node: str, why: str) -> str:
    return (
        f"graph '{graph_id}': node '{node}' is {why}, which runs in-process only in this version "
        "(graph.invoke, graphrunner run --in-process); the cluster does not run it yet"
    )


def check_cluster_support(graph: Graph) -> None:
    """Raise `GraphValidationError` naming every node (of the graph or its subgraphs) the
    cluster cannot run yet."""
    issues = [
        Issue(CODE, message(spec.id, node, why), node=node, location=f"nodes.{node}")
        for spec in _specs(graph, set())
        for node, why in unsupported(spec)
    ]
    if issues:
        raise GraphValidationError(issues, graph.file or graph.id)


def node_failure(spec: GraphSpec, node: str) -> ActionFailure | None:
    """The failure of a step at `node` when the cluster cannot run it, else None."""
    why = dict(unsupported(spec)).get(node)
    return None if why is None else ActionFailure("validation", message(spec.id, node, why), "NotOnCluster")


def _specs(graph: Graph, seen: set[str]) -> Iterator[GraphSpec]:
    if graph.content_hash in seen:
        return
    seen.add(graph.content_hash)
    yield graph.spec
    for graph_id in graph.child_paths:
        child = graph.subgraph(graph_id)
        if isinstance(child, Graph):
            yield from _specs(child, seen)
