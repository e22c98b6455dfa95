"""Parallel foreach on the cluster: items as chords of item tasks, joined from Redis.

The items are sent in chunks of at most `max_concurrency` (else the executor's chunk size)
items, each chunk a Celery chord whose body is the step's own task at the next phase. The
join never trusts Celery's count: it counts the item results recorded in Redis, looks again
later while some are missing (an item waiting on a retry is sent outside the chord), sends
the next chunk, and when every item has a result, the step collects them in item order.
Empty and one-item lists never reach here (`sequence` runs them in the step's task).
"""

from __future__ import annotations

import uuid
from typing import Any

from graphrunner import engine
from graphrunner.cluster.steps.decisions import Collect, Decision, Poll, Suspend
from graphrunner.cluster.steps.item_runner import call_payload, failed_record
from graphrunner.cluster.waits.base import Wait
from graphrunner.compiled import CompiledGraph
from graphrunner.engine import ActionFailure, RunSnapshot, StepPlan
from graphrunner.model import ForeachNode
from graphrunner.services.records import utcnow

POLL_SECONDS = 1.0  # how often a join that fired before every item was recorded looks again


def parallel(graph: CompiledGraph, plan: StepPlan) -> bool:
    """The foreach runs its items as chords (parallel, with two or more items)."""
    spec = graph.nodes[plan.node].spec
    assert isinstance(spec, ForeachNode) and plan.items is not None
    return spec.parallel and len(plan.items) > 1


def start(graph: CompiledGraph, snap: RunSnapshot, plan: StepPlan, hook_round: int, chunk: int) -> Suspend:
    """Suspend the step on its first chunk of items."""
    spec = graph.nodes[plan.node].spec
    assert isinstance(spec, ForeachNode) and plan.items is not None
    total = len(plan.items)
    size = min(spec.max_concurrency or chunk, chunk)
    tag = f"{plan.step}.{snap.phase + 1}.{uuid.uuid4().hex[:8]}"  # never another attempt's results
    return Suspend(Wait("foreach", hook_round=hook_round, tag=tag, total=total, upto=min(total, size)))


def chunk(
    graph: CompiledGraph, snap: RunSnapshot, wait: Wait, only: set[int] | None = None
) -> tuple[list[dict[str, Any]], list[tuple[int, dict[str, Any]]]]:
    """The item payloads of `[wait.next, wait.upto)` (those in `only`, when given: the sweeper
    re-sends lost ones), and the records of items that cannot be dispatched (failed at once)."""
    plan = engine.prepare(graph, snap, utcnow())
    assert plan.items is not None
    node, now = graph.nodes[plan.node], utcnow()
    payloads: list[dict[str, Any]] = []
    failed: list[tuple[int, dict[str, Any]]] = []
    for index in range(wait.next, wait.upto):
        if only is not None and index not in only:
            continue
        call = engine.item_call(node, snap, index, plan.items[index], now)
        if isinstance(call, ActionFailure):
            failed.append((index, failed_record(call)))
            continue
        payloads.append(
            {
                "run_id": snap.run_id,
                "graph_id": snap.graph_id,
                "graph_hash": snap.graph_hash,
                "step": plan.step,
                "tag": wait.tag,
                "index": index,
                "call": call_payload(call),
            }
        )
    return payloads, failed


def join(wait: Wait, recorded: int) -> Decision:
    """A chunk's chord has fired and `recorded` items have a result: look again later, send the
    next chunk, or collect them all."""
    if recorded < wait.upto:
        return Poll(POLL_SECONDS)
    if wait.upto < wait.total:
        size = wait.upto - wait.next
        return Suspend(wait.but(next=wait.upto, upto=min(wait.total, wait.upto + size)))
    return Collect(wait.tag, wait.total, wait.hook_round)
