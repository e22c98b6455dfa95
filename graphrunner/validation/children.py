"""Child runs: subgraph nodes, foreach over a graph and parallel branches name graphs that must
exist, and their projections must name declared fields (`unknown_graph`,
`mapping_references_undeclared_field`); a child that may pause is refused where its failures
are collected (`suspension_in_unsupported_context`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from graphrunner.model import ForeachNode, GraphSpec, ParallelNode, PauseNode, SubgraphNode
from graphrunner.report import Issue

ChildLookup = Callable[[str], "GraphSpec | str"]


@dataclass(frozen=True)
class ChildSite:
    """Where a node starts a child run: its graph id, projections, and where they are written."""

    node: str
    graph: str
    where: str  # the location of the mapping holding `graph`, `inputs` and `outputs`
    inputs: Mapping[str, Any] | None
    outputs: Mapping[str, str] | None
    what: str  # "subgraph", "branch 'web'", "foreach graph"


def child_sites(spec: GraphSpec) -> Iterator[ChildSite]:
    """Every place `spec` starts a child run, in node order (branches in declaration order)."""
    for name, node in spec.nodes.items():
        base = f"nodes.{name}"
        if isinstance(node, SubgraphNode):
            yield ChildSite(name, node.graph, base, node.inputs, node.outputs, "subgraph")
        elif isinstance(node, ForeachNode) and node.graph is not None:
            yield ChildSite(name, node.graph, base, node.inputs, {}, "foreach graph")
        elif isinstance(node, ParallelNode):
            for branch, b in node.branches.items():
                where = f"{base}.branches.{branch}"
                yield ChildSite(name, b.graph, where, b.inputs, b.outputs, f"branch '{branch}'")


def check_children(spec: GraphSpec, lookup: ChildLookup) -> list[Issue]:
    """`unknown_graph` and `mapping_references_undeclared_field` for every child run."""
    issues: list[Issue] = []
    for site in child_sites(spec):
        child = lookup(site.graph)
        if isinstance(child, str):
            message = f"node '{site.node}': {site.what} '{site.graph}': {child}"
            issues.append(Issue("unknown_graph", message, node=site.node, location=f"{site.where}.graph"))
            continue
        issues += _mapping_fields(spec, child, site)
        issues += _pause_where_collected(spec, child, site, lookup)
    return issues


def _pause_where_collected(
    parent: GraphSpec, child: GraphSpec, site: ChildSite, lookup: ChildLookup
) -> list[Issue]:
    """A child that may pause, under a node that collects its failures (a parallel node's
    `error_policy: collect`, a foreach's `tolerated_failures`): its pause could never be resumed
    sensibly (the node would go on without it), so the graph is refused."""
    node = parent.nodes[site.node]
    collects = (isinstance(node, ParallelNode) and node.error_policy == "collect") or (
        isinstance(node, ForeachNode) and node.tolerated_failures not in (0, "0%")
    )
    pause = _first_pause(child, lookup, set()) if collects else None
    if pause is None:
        return []
    policy = "error_policy: collect" if isinstance(node, ParallelNode) else "tolerated_failures"
    message = (
        f"node '{site.node}': {site.what} '{site.graph}' may pause ({pause}), but the node collects "
        f"its children's failures ({policy}): a pause there cannot be resumed; use fail_fast "
        "(no tolerated failures) or move the pause out of the child graph"
    )
    return [
        Issue("suspension_in_unsupported_context", message, node=site.node, location=f"{site.where}.graph")
    ]


def _first_pause(spec: GraphSpec, lookup: ChildLookup, seen: set[str]) -> str | None:
    """Where `spec`, or a graph it runs as a child at any depth, has a pause node, if anywhere."""
    seen.add(spec.id)
    for name, node in spec.nodes.items():
        if isinstance(node, PauseNode):
            return f"node '{name}' of graph '{spec.id}'"
    for site in child_sites(spec):
        child = lookup(site.graph) if site.graph not in seen else None
        if isinstance(child, GraphSpec) and (found := _first_pause(child, lookup, seen)) is not None:
            return found
    return None


def _mapping_fields(parent: GraphSpec, child: GraphSpec, site: ChildSite) -> list[Issue]:
    issues = []
    child_fields = set(child.state) | set(child.inputs)
    prefix = site.where.removeprefix(f"nodes.{site.node}").removeprefix(".")

    def bad(side: str, fld: str, where: str) -> Issue:
        where = f"{prefix}.{where}" if prefix else where
        return Issue(
            "mapping_references_undeclared_field",
            f"node '{site.node}': {where} names {side} field '{fld}', which is not declared",
            node=site.node,
            location=f"nodes.{site.node}.{where}",
        )

    for child_field, source in (site.inputs or {}).items():
        if child_field not in child_fields:
            issues.append(bad(f"child ('{child.id}')", child_field, f"inputs.{child_field}"))
        named = isinstance(source, str) and "${" not in source and not parent.rye  # Rye: a value
        if named and source not in parent.state:
            issues.append(bad("parent", source, f"inputs.{child_field}"))
    for parent_field, child_field in (site.outputs or {}).items():
        if parent_field not in parent.state:
            issues.append(bad("parent", parent_field, f"outputs.{parent_field}"))
        if child_field not in child.state:
            issues.append(bad(f"child ('{child.id}')", child_field, f"outputs.{parent_field}"))
    return issues
