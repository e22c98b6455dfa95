"""Foreach items run one at a time in the step's task, checkpointed after every item.

Used for sequential foreach and for parallel lists of zero or one item (which never reach
Celery's chord code). Each item's result is recorded in Redis and the step's phase bumped
(a fenced checkpoint), so a task that dies mid-loop is taken over from the next item, and
finished items are not run again. After `loop_slice` seconds (a third of the visibility
timeout, at most 10 s) the loop hands on to a fresh task, so a long foreach never holds
one message past the broker's visibility timeout.
"""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING

from graphrunner import engine
from graphrunner.cluster.items import durable_call, outcome_of, record_of
from graphrunner.cluster.waits import Wait
from graphrunner.engine import ActionFailure, ActionOutcome, ForeachOutcome, RunSnapshot, StepPlan
from graphrunner.engine.step import foreach_fails
from graphrunner.graph import Graph
from graphrunner.model import ForeachNode
from graphrunner.runner.dispatch import Deferred
from graphrunner.runner.local import tool_context, utcnow

if TYPE_CHECKING:
    from graphrunner.cluster.executor import StepExecutor


async def run(
    ex: StepExecutor, graph: Graph, snap: RunSnapshot, plan: StepPlan, wait: Wait | None, hook_round: int = 0
) -> str:
    """Run the items from `wait.next` (all of them when `wait` is None), then complete the step."""
    spec = graph.nodes[plan.node].spec
    assert isinstance(spec, ForeachNode) and plan.items is not None
    if wait is None:
        wait = Wait(
            "items",
            hook_round=hook_round,
            tag=f"{plan.step}.{snap.phase}.{uuid.uuid4().hex[:8]}",
            total=len(plan.items),
        )
    started = time.monotonic()
    index = wait.next
    while index < wait.total:
        outcome = await _item(ex, graph, snap, plan, index, wait)
        if isinstance(outcome, Deferred):
            return ex.suspend_and_send(graph, snap, _deferred(wait, index, outcome))
        ex.store.save_item(snap.run_id, wait.tag, index, record_of(outcome))
        index += 1
        wait = Wait(
            "items", hook_round=wait.hook_round, tag=wait.tag, total=wait.total, next=index,
            failed=wait.failed + (not outcome.ok),
        )  # fmt: skip
        if foreach_fails(graph, spec, wait.failed, wait.total) or index == wait.total:
            break
        checkpoint = ex.suspend(snap, wait)
        if checkpoint is None:
            return "duplicate"
        snap = checkpoint
        if time.monotonic() - started > ex.loop_slice:
            ex.send_wait(graph, snap)
            return "suspended"
    return await collect(ex, graph, snap, plan, wait.tag, index, wait.hook_round)


async def collect(
    ex: StepExecutor, graph: Graph, snap: RunSnapshot, plan: StepPlan, tag: str, count: int, hook_round: int
) -> str:
    """Complete the foreach step with the recorded results of its first `count` items, in
    item order; once committed, the records go."""
    assert plan.items is not None
    records = ex.store.load_items(snap.run_id, tag, count)
    items = tuple(outcome_of(i, plan.items[i], r) for i, r in enumerate(records))
    report = await ex.finish(graph, snap, plan, ForeachOutcome(items), hook_round)
    if report == "committed":
        ex.store.drop_items(snap.run_id, tag)
    return report


async def _item(
    ex: StepExecutor, graph: Graph, snap: RunSnapshot, plan: StepPlan, index: int, wait: Wait
) -> ActionOutcome | Deferred:
    assert plan.items is not None
    resuming = index == wait.next  # the item the wait was for goes on from its attempt or timer
    call = engine.item_call(graph.nodes[plan.node], snap, index, plan.items[index], utcnow())
    if isinstance(call, ActionFailure):
        return ActionOutcome(failure=call)
    return await durable_call(
        ex.runner,
        snap.graph_hash,
        call,
        tool_context(snap, plan.node, plan.step, index),
        attempt=wait.attempt if resuming else 1,
        timer=wait.timer if resuming else None,
    )


def _deferred(wait: Wait, index: int, deferred: Deferred) -> Wait:
    """The wait of an item that asked to wait: its backoff or durable sleep, then go on at it."""
    timer = {"result": deferred.result} if deferred.kind == "timer" else None
    return Wait(
        "items",
        hook_round=wait.hook_round,
        due=time.time() + deferred.delay,
        attempt=deferred.attempt,
        timer=timer,
        tag=wait.tag,
        total=wait.total,
        next=index,
        failed=wait.failed,
    )
