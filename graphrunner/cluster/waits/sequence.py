"""Foreach items run one at a time in the step's task (kind `items`), checkpointed after each.

Used for sequential foreach and for parallel lists of zero or one item (which never reach
Celery's chord code). Each item's result is recorded and the step's phase bumped (a fenced
checkpoint), so a task that dies mid-loop is taken over from the next item (a message of an
earlier phase may take the step over), and finished items are not run again. The executor
drives the loop; after `loop_slice` seconds it hands on to a fresh task, so a long foreach
never holds one message for long. An item that waits (a retry backoff, a durable sleep)
suspends the step until it is due.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, ClassVar, Literal

from graphrunner import engine
from graphrunner.cluster.runs.items import record_of
from graphrunner.cluster.steps.decisions import Checkpoint, Collect, Decision, Suspend
from graphrunner.cluster.waits.base import Context, Step, WaitKind
from graphrunner.cluster.waits.foreach import parallel
from graphrunner.engine import ActionFailure, ActionOutcome, Wait
from graphrunner.engine.stepping import foreach_fails
from graphrunner.model import ForeachNode
from graphrunner.services import Deferred, tool_context
from graphrunner.services.records import utcnow, worker_name


class ItemsWait(Wait):
    """Items run one at a time in a task: item `next` of `total` is the next to run (from its
    `attempt`, or its durable `timer`, when it waited); `failed` so far; results under `tag`."""

    waiting_for: ClassVar[str] = "its foreach items"

    kind: Literal["items"] = "items"
    tag: str = ""
    total: int = 0
    next: int = 0
    failed: int = 0
    attempt: int = 1
    timer: dict[str, Any] | None = None


class Items(WaitKind[ItemsWait]):
    """A foreach of actions whose items run in the step's own task."""

    plans = frozenset({"foreach"})
    waits = (ItemsWait,)

    async def start(self, ctx: Context, step: Step, hook_round: int, prior: str) -> Decision | None:
        """Run the first item (none: collect an empty list at once)."""
        plan = step.plan
        if plan.kind != "foreach" or plan.child_graph is not None or parallel(step):
            return None
        assert plan.items is not None
        tag = f"{plan.step}.{step.snap.phase}.{uuid.uuid4().hex[:8]}"
        return await self.join(
            ctx, step, ItemsWait(hook_round=hook_round, tag=tag, total=len(plan.items)), ""
        )

    async def join(self, ctx: Context, step: Step, wait: ItemsWait, woken_by: str) -> Decision:
        """Run item `wait.next`: checkpoint it, collect when it was the last (or failed the node),
        or suspend while it waits (a retry backoff, a durable sleep)."""
        spec = step.graph.nodes[step.plan.node].spec
        assert isinstance(spec, ForeachNode)
        index = wait.next
        if index >= wait.total:  # nothing (left) to run: an empty list
            return Collect(wait.tag, index, wait.hook_round)
        began = time.time()
        outcome = await _item(ctx, step, wait)
        if isinstance(outcome, Deferred):
            return Suspend(_deferred(wait, outcome))
        item = (index, record_of(outcome).timed(began, worker_name()))
        done = wait.but(
            next=index + 1, failed=wait.failed + (not outcome.ok), due=None, attempt=1, timer=None
        )
        if foreach_fails(step.graph, spec, done.failed, done.total) or done.next == done.total:
            return Collect(wait.tag, done.next, wait.hook_round, item)
        return Checkpoint(done, wait.tag, item)

    def takes_over(self, wait: ItemsWait) -> bool:
        """Yes: the task that ran the items died; the step goes on from its last checkpoint."""
        return True


async def _item(ctx: Context, step: Step, wait: ItemsWait) -> ActionOutcome | Deferred:
    """Dispatch item `wait.next`, going on from its attempt or timer when it waited."""
    snap, plan = step.snap, step.plan
    assert plan.items is not None
    index = wait.next
    call = engine.item_call(step.graph.nodes[plan.node], snap, index, plan.items[index], utcnow())
    if isinstance(call, ActionFailure):
        return ActionOutcome(failure=call)
    context = tool_context(snap, plan.node, plan.step, index)
    return await ctx.services.durable_call(
        snap.graph_hash, call, context, attempt=wait.attempt, timer=wait.timer
    )


def _deferred(wait: ItemsWait, deferred: Deferred) -> ItemsWait:
    """The wait of an item that asked to wait: its backoff or durable sleep, then go on at it."""
    return wait.but(due=time.time() + deferred.delay, attempt=deferred.attempt, timer=deferred.timer)
