"""What graphrunner's spans are called and what they carry (OA observability §4.5, §5).

A run span is OA's invocation span (`openarmature.invocation`, §5.1); a child run's run span is
the span OA puts between a parent's node and the child's nodes: named after the parent's
subgraph node (§5.3), after its branch for a parallel node's branch (§5.7), after the foreach
node for one item of a foreach over a graph (§5.4). A wait span is named after its node when
things run under it (a foreach's items: the fan-out span; child runs: the subgraph or parallel
node's span), else `graphrunner.wait` (a retry backoff, a durable sleep: a suspension, §5.8).
"""

from __future__ import annotations

import functools
from importlib import metadata
from typing import TYPE_CHECKING, Any

from graphrunner.engine import RunSnapshot, TraceLink, Wait

if TYPE_CHECKING:
    from graphrunner.compiled import CompiledGraph

INVOCATION = "openarmature.invocation"
SPEC_VERSION = "0.7.0"  # the OpenArmature observability spec version these spans follow
IMPLEMENTATION = "graphrunner"
SUSPENSION = "graphrunner.wait"
HOLDING = ("foreach", "kids", "child")  # the wait kinds things run under (items, child runs)


@functools.cache
def version() -> str:
    """graphrunner's version, from its installed package's metadata ("unknown" without one): the
    telemetry does not import the package itself, which imports nearly everything."""
    try:
        return metadata.version("graphrunner")
    except metadata.PackageNotFoundError:
        return "unknown"


def run_name(snap: RunSnapshot, link: TraceLink) -> str:
    """The run span's name: the invocation's, or a child run's place in its parent."""
    if snap.parent is None:
        return INVOCATION
    if link.branch is not None:
        return link.branch
    return snap.parent.node or INVOCATION


def run_attributes(graph: CompiledGraph | None, snap: RunSnapshot, link: TraceLink) -> dict[str, Any]:
    """The run span's attributes: OA §5.1 for a run, §5.3/§5.4/§5.7 for a child run, and ours."""
    attributes: dict[str, Any] = {
        "graphrunner.run.id": snap.run_id,
        "graphrunner.graph.id": snap.graph_id,
        "graphrunner.run.status": snap.status.value,
        "graphrunner.run.steps": snap.step,
        "graphrunner.run.segment": link.segment,
    }
    if link.correlation:
        attributes["openarmature.correlation_id"] = link.correlation
    outcome = _outcome(snap)
    if outcome:
        attributes["openarmature.outcome"] = outcome
    if snap.parent is None:
        attributes["openarmature.invocation_id"] = snap.run_id
        attributes["openarmature.graph.spec_version"] = SPEC_VERSION
        attributes["openarmature.implementation.name"] = IMPLEMENTATION  # the invocation span's only (§5.1)
        attributes["openarmature.implementation.version"] = version()
        if graph is not None and graph.spec.config.start:
            attributes["openarmature.graph.entry_node"] = graph.spec.config.start
        return attributes
    parent_node = snap.parent.node or ""
    if link.branch is not None:
        attributes["openarmature.node.branch_name"] = link.branch
        attributes["openarmature.parallel_branches.parent_node_name"] = parent_node
    elif link.index is not None:
        attributes["openarmature.node.fan_out_index"] = link.index
        attributes["openarmature.fan_out.parent_node_name"] = parent_node
    else:
        attributes["openarmature.node.name"] = parent_node
        attributes["openarmature.subgraph.name"] = snap.graph_id
    return attributes


def _outcome(snap: RunSnapshot) -> str | None:
    if snap.status.value == "paused":
        return "suspended"
    if snap.status.value in ("cancelled", "completed_with_errors"):
        return snap.status.value
    return None


def wait_name(snap: RunSnapshot, wait: Wait) -> str:
    """A wait span's name: its node when things run under it, else a suspension's."""
    return (snap.node or SUSPENSION) if wait.kind in HOLDING else SUSPENSION


def wait_attributes(
    graph: CompiledGraph | None, snap: RunSnapshot, wait: Wait, link: TraceLink
) -> dict[str, Any]:
    """A wait span's attributes: what it waited for (OA §5.8), and the fan-out's (§5.4) or the
    parallel node's (§5.7) when it is one."""
    node = snap.node or ""
    attributes: dict[str, Any] = {
        "openarmature.node.name": node,
        "openarmature.outcome": "suspended",
        "openarmature.suspension.signal_id": f"{snap.run_id}/{snap.step + 1}/{snap.phase}",
        "openarmature.suspension.metadata.kind": wait.kind,
        "openarmature.suspension.metadata.waiting_for": wait.describe(),
        "graphrunner.run.id": snap.run_id,
        "graphrunner.step": snap.step + 1,
        "graphrunner.phase": snap.phase,
        "graphrunner.wait.kind": wait.kind,
    }
    if wait.due is not None:
        attributes["openarmature.suspension.metadata.due"] = wait.due
    if link.correlation:
        attributes["openarmature.correlation_id"] = link.correlation
    spec = graph.nodes[node].spec if graph is not None and node in graph.nodes else None
    attributes.update(holding(spec, getattr(wait, "total", None)))
    return attributes


def holding(spec: Any, total: int | None) -> dict[str, Any]:
    """The fan-out (§5.4), parallel-branches (§5.7) or subgraph (§5.3) attributes of the node `spec`
    that `total` items or branches (or a child run) run under."""
    kind = getattr(spec, "type", None)
    if kind == "foreach":
        policy = "collect" if getattr(spec, "tolerated_failures", 0) else "fail_fast"
        return {
            "openarmature.fan_out.item_count": total or 0,
            "openarmature.fan_out.concurrency": getattr(spec, "max_concurrency", None) or 0,
            "openarmature.fan_out.error_policy": policy,
        }
    if kind == "parallel":
        return {
            "openarmature.parallel_branches.branch_count": total or len(spec.branches),
            "openarmature.parallel_branches.error_policy": spec.error_policy,
        }
    if kind == "subgraph":
        return {"openarmature.subgraph.name": spec.graph}
    return {}


def item_attributes(
    run_id: str, step: int, node: str, index: int, worker: str, correlation: str | None
) -> dict[str, Any]:
    """A foreach item span's attributes: OA §5.4's for a fan-out instance, and graphrunner's
    (`step` as the transcript numbers it)."""
    attributes: dict[str, Any] = {
        "openarmature.node.name": node,
        "openarmature.node.fan_out_index": index,
        "openarmature.fan_out.parent_node_name": node,
        "graphrunner.run.id": run_id,
        "graphrunner.step": step,
        "graphrunner.worker": worker,
    }
    if correlation:
        attributes["openarmature.correlation_id"] = correlation
    return attributes
