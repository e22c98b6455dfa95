"""Which capabilities a run of a graph needs, read from the graph before it runs (DESIGN §2.8).

The worker checks every dispatch when it makes it, fail-closed; that stays the enforcement.
This static walk lets a submitter refuse a run up front (the run explorer's `POST /api/runs`)
instead of starting one that will fail at its first step a login may not take. It visits every
dispatch a run can make: each action and foreach action, each child run a subgraph, foreach
over a graph or parallel branch starts (and, recursively, the child graph's own dispatches),
and the graph's hooks. A python tool whose `fn` is an expression can only be allowed by
`tool:python` itself, since the callable is not known before the run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from graphrunner.engine.calls import ActionCall
from graphrunner.engine.capabilities import allows, required
from graphrunner.model import ActionNode, ForeachNode, GraphSpec
from graphrunner.model.actions import Action
from graphrunner.validation.children import child_sites

ChildSpec = Callable[[GraphSpec, str], GraphSpec]  # (parent, child graph id) -> the child's spec


@dataclass(frozen=True)
class MissingGrant:
    """A dispatch the capabilities do not allow: where it is, what it runs and what would allow it."""

    graph: str  # the id of the graph holding the dispatch (the submitted one, or a child)
    node: str  # the node, or `hook:<event>`
    tool: str | None  # the tool dispatched; None for a child run
    child: str | None  # the graph a child run starts; None for a tool
    needs: tuple[str, ...]  # capability names, any one of which would allow it

    @property
    def capability(self) -> str:
        """The capability to grant (`tool:shell`, `graph:other/id`)."""
        return self.needs[0]

    def message(self) -> str:
        """`node 'x' of graph 'g' runs tool 'shell', which needs capability 'tool:shell'`."""
        what = f"tool '{self.tool}'" if self.tool is not None else f"child graph '{self.child}'"
        where = f"node '{self.node}' of graph '{self.graph}'"
        return f"{where} runs {what}, which needs capability {self.capability!r}"


def missing_grants(spec: GraphSpec, capabilities: Sequence[str], child_spec: ChildSpec) -> list[MissingGrant]:
    """Every dispatch a run of `spec` (and of the child graphs it can start) could make that no
    pattern of `capabilities` allows, in graph and node order; `child_spec` finds a child graph
    (it raises, e.g. `GraphNotFound`, when it cannot)."""
    missing: list[MissingGrant] = []
    seen: set[str] = set()
    pending = [spec]
    while pending:
        graph = pending.pop(0)
        if graph.id in seen:
            continue
        seen.add(graph.id)
        for node, tool, child, needs in _dispatches(graph):
            if not any(allows(capabilities, name) for name in needs):
                missing.append(MissingGrant(graph.id, node, tool, child, tuple(needs)))
            if child is not None and child not in seen:
                pending.append(child_spec(graph, child))
    return missing


def _dispatches(spec: GraphSpec) -> Iterator[tuple[str, str | None, str | None, list[str]]]:
    """`(node, tool, child graph, capability names)` of every dispatch `spec` itself can make."""
    for name, node in spec.nodes.items():
        if isinstance(node, ActionNode | ForeachNode) and node.action is not None:
            yield name, node.action.tool, None, required(_call(name, node.action))
    for site in child_sites(spec):
        yield site.node, None, site.graph, required(None, site.graph)
    for hook in spec.config.hooks:
        event = f"hook:{hook.event}"
        yield event, hook.action.tool, None, required(_call(event, hook.action))


def _call(node: str, action: Action) -> ActionCall:
    """The dispatch as far as the graph tells it: a python `fn` only when it is written out."""
    fn = action.params.get("fn")
    params = {"fn": fn} if isinstance(fn, str) and "${" not in fn else {}
    return ActionCall(node=node, tool=action.tool, params=params)
