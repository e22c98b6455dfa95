"""One step of a run on a worker: load, step, commit (fenced), send what comes next.

The Celery task is a thin wrapper around `StepExecutor.execute`. A duplicate message
changes nothing (every commit is fenced by step, phase and status); a message redelivered
after its commit sends again what the commit said must follow, which repairs a worker that
died in between.

A step that would wait (a retry backoff over `items.INLINE_WAIT`, a durable sleep, foreach
items, a child run) is suspended instead: its `Wait` is committed, the phase bumped, and
the task that goes on with it is sent. No worker slot is held while a step waits.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import threading
import time
from dataclasses import dataclass, replace
from typing import Any

from graphrunner import engine
from graphrunner.cluster import children, fanout, sequence
from graphrunner.cluster.graphs import GraphCache
from graphrunner.cluster.heartbeat import Heartbeats
from graphrunner.cluster.items import durable_call
from graphrunner.cluster.messages import StepMessage
from graphrunner.cluster.preflight import VisibilityCheck
from graphrunner.cluster.sender import Sender
from graphrunner.cluster.waits import Wait, timed
from graphrunner.engine import NoOutcome, Outcome, RunSnapshot, RunStatus, StepPlan
from graphrunner.errors import GraphrunnerError
from graphrunner.graph import Graph
from graphrunner.runner import LocalRunner
from graphrunner.runner.dispatch import Deferred
from graphrunner.runner.local import retry_records, step_record, tool_context, utcnow
from graphrunner.store import Fence, RedisStore

log = logging.getLogger("graphrunner.worker")


def worker_name() -> str:
    """`host:pid` of the process taking the step (a prefork pool process, not the parent)."""
    return f"{socket.gethostname()}:{os.getpid()}"


FANOUT_CHUNK = 1000


@dataclass(frozen=True)
class StepReport:
    """What `execute` did, for logs and tests."""

    outcome: str  # committed | suspended | waiting | duplicate | repaired | stale | unknown_run | ...
    run_id: str
    step: int


class StepExecutor:
    """Executes step messages against a store, with a runner for the step's I/O."""

    def __init__(
        self,
        store: RedisStore,
        sender: Sender,
        runner: LocalRunner | None = None,
        *,
        chunk: int = FANOUT_CHUNK,
    ) -> None:
        self.store = store
        self.sender = sender
        self.graphs = GraphCache(store)
        self.runner = runner or LocalRunner(cache=store)
        self.chunk = max(1, chunk)
        self.loop_slice = 10.0  # seconds a task runs sequential items before handing on
        self.visibility = VisibilityCheck(None)  # a worker's `serve` sets the broker's timeout
        self.max_redeliveries = 5  # redeliveries of one step and phase before it is poison
        self.heartbeats = Heartbeats(store, interval=60.0)
        self._local = threading.local()
        self._loops: list[asyncio.AbstractEventLoop] = []
        self._lock = threading.Lock()

    def run_async(self, coro: Any) -> Any:
        """Run a coroutine on this thread's own event loop (kept between steps)."""
        loop = getattr(self._local, "loop", None)
        if loop is None or loop.is_closed():
            loop = self._local.loop = asyncio.new_event_loop()
            with self._lock:
                self._loops.append(loop)
        return loop.run_until_complete(coro)

    def close(self) -> None:
        """Close the event loops of the threads that took steps, stop heartbeats (the worker stops)."""
        self.heartbeats.stop()
        with self._lock:
            loops, self._loops = self._loops, []
        for loop in loops:
            if not loop.is_running() and not loop.is_closed():
                loop.run_until_complete(loop.shutdown_default_executor())
                loop.close()

    # -- entry ---------------------------------------------------------------------------

    def execute(self, msg: StepMessage, *, redelivered: bool = False) -> StepReport:
        """Take (or go on with) the step `msg` names, unless the run has moved on.

        `redelivered`: the broker says this message was delivered before and not acknowledged
        (its worker died, or it was rejected): counted, and past `max_redeliveries` the step
        is a poison message and fails its run instead of killing another worker.
        """
        snap = self.store.load_run(msg.run_id)
        if snap is None:
            log.warning("step message for unknown run %s dropped", msg.run_id)
            return StepReport("unknown_run", msg.run_id, msg.step)
        if snap.step != msg.step or snap.status is not RunStatus.RUNNING:
            return self._stale(snap, msg)
        if redelivered and msg.phase == snap.phase and self._poisoned(snap):
            return StepReport("poison", msg.run_id, msg.step)
        try:
            graph = self.graphs.get(snap.graph_hash)
        except GraphrunnerError as exc:
            return self._fail_unloadable(snap, msg, exc)
        with self.heartbeats.beating(snap.run_id):
            if msg.phase != snap.phase:
                return StepReport(self._out_of_phase(graph, snap, msg), msg.run_id, msg.step)
            return StepReport(self.run_async(self._go(graph, snap)), msg.run_id, msg.step)

    def _poisoned(self, snap: RunSnapshot) -> bool:
        """Count a redelivery of the step at `snap`; past the cap, fail the run (True)."""
        count = self.store.count_redelivery(snap.run_id, f"{snap.step + 1}.{snap.phase}")
        if count <= self.max_redeliveries:
            log.warning("step %s of run %s redelivered (%s so far)", snap.step + 1, snap.run_id, count)
            return False
        message = (
            f"step {snap.step + 1} (node '{snap.node}') was redelivered {count} times without "
            f"finishing: its task keeps losing its worker (killed, out of memory?), so the run is "
            f"stopped instead of trying again (GRAPHRUNNER_MAX_REDELIVERIES={self.max_redeliveries})"
        )
        error = {"type": "limit_exceeded", "message": message, "node": snap.node, "step": snap.step + 1}
        self._end_failed(snap, error)
        return True

    async def _go(self, graph: Graph, snap: RunSnapshot) -> str:
        if snap.wait is not None:
            return await self._go_on(graph, snap, Wait.from_dict(snap.wait))
        if snap.step == 0:
            failed = self.runner.preflight(graph, snap)
            if failed is not None and failed.error is not None:
                final = self._end_failed(snap, failed.error)
                if final is not None:
                    await self.runner.completed(graph, final)
                return "committed"
            await self.runner.started(graph, snap)
        return await self.fresh(graph, snap, 0)

    async def fresh(self, graph: Graph, snap: RunSnapshot, hook_round: int) -> str:
        """Plan the step at the run's node and start its work."""
        self.visibility.check(graph.content_hash, graph.spec)
        plan = engine.prepare(graph, snap, utcnow())
        if plan.failure is None:
            if plan.kind == "action":
                return await self.act(graph, snap, plan, Wait("retry", hook_round=hook_round))
            if plan.kind == "foreach":
                return await fanout.start(self, graph, snap, plan, hook_round)
            if plan.kind == "subgraph":
                return await children.start(self, graph, snap, plan, hook_round)
        return await self.finish(graph, snap, plan, NoOutcome(), hook_round)

    async def _go_on(self, graph: Graph, snap: RunSnapshot, wait: Wait) -> str:
        """Go on with a suspended step: its wait has come due or its work has finished."""
        if wait.kind == "restart":
            return await self.fresh(graph, snap, wait.hook_round)
        if wait.remaining() > 0.05:  # a countdown message that came early: wait on
            self.sender.enqueue(snap, graph, countdown=wait.remaining())
            return "waiting"
        plan = engine.prepare(graph, snap, utcnow())
        if wait.kind in ("retry", "timer"):
            return await self.act(graph, snap, plan, wait)
        if wait.kind == "foreach":
            return await fanout.join(self, graph, snap, plan, wait)
        if wait.kind == "items":
            return await sequence.run(self, graph, snap, plan, wait)
        return await children.join(self, graph, snap, plan, wait)

    # -- actions ---------------------------------------------------------------------------

    async def act(self, graph: Graph, snap: RunSnapshot, plan: StepPlan, wait: Wait) -> str:
        """Dispatch the node's action from `wait.attempt`; a long wait suspends the step."""
        if plan.failure is not None or plan.call is None:  # e.g. denied: fail closed, run nothing
            return await self.finish(graph, snap, plan, NoOutcome(), wait.hook_round)
        outcome = await durable_call(
            self.runner,
            snap.graph_hash,
            plan.call,
            tool_context(snap, plan.node, plan.step),
            attempt=wait.attempt,
            timer=wait.timer if wait.kind == "timer" else None,
        )
        if isinstance(outcome, Deferred):
            later = deferred_wait(outcome, wait.hook_round)
            records = retry_records(plan, outcome.retries, worker_name()) + timer_record(plan, outcome)
            return self.suspend_and_send(graph, snap, later, records)
        return await self.finish(graph, snap, plan, outcome, wait.hook_round, outcome.retries)

    # -- committing --------------------------------------------------------------------------

    async def finish(
        self,
        graph: Graph,
        snap: RunSnapshot,
        plan: StepPlan,
        outcome: Outcome,
        hook_round: int,
        retries: tuple[dict[str, Any], ...] = (),
    ) -> str:
        """Complete the step with `outcome`, commit it (fenced) and send the next step."""
        started_at, started = utcnow().isoformat(), time.perf_counter()
        result, answer = await self.runner.finish(graph, snap, plan, outcome, hook_round)
        if answer == "retry":  # an error hook asked for the step again
            return self.suspend_and_send(graph, snap, Wait("restart", hook_round=hook_round + 1))
        final = result.snapshot.model_copy(update={"phase": 0, "wait": None})
        records = [
            *retry_records(plan, retries, worker_name()),
            step_record(result, started_at, started, worker_name()),
        ]
        walked = final.path[len(snap.path) :]
        if not self.store.commit(Fence.of(snap), final, records, walked).committed:
            log.info("step %s of run %s was already committed; duplicate dropped", plan.step, snap.run_id)
            return "duplicate"
        await self.runner.after(graph, plan, replace(result, snapshot=final))
        self._follow(final, graph)
        return "committed"

    def _follow(self, snap: RunSnapshot, graph: Graph | None) -> None:
        send_next(self.sender, snap, graph)

    def suspend(
        self, snap: RunSnapshot, wait: Wait, records: list[dict[str, Any]] | None = None, **changes: Any
    ) -> RunSnapshot | None:
        """Commit `wait` for the step (phase + 1); None when the run had moved on."""
        new = snap.model_copy(update={"phase": snap.phase + 1, "wait": wait.to_dict(), **changes})
        if not self.store.commit(Fence.of(snap), new, records or []).committed:
            return None
        return new

    def suspend_and_send(
        self,
        graph: Graph,
        snap: RunSnapshot,
        wait: Wait,
        records: list[dict[str, Any]] | None = None,
        **changes: Any,
    ) -> str:
        """Suspend the step on `wait`, then send what it waits for."""
        new = self.suspend(snap, wait, records, **changes)
        if new is None:
            return "duplicate"
        self.send_wait(graph, new)
        return "suspended"

    def send_wait(self, graph: Graph, snap: RunSnapshot) -> None:
        """Send what the suspended step `snap` waits for, then mark it sent."""
        assert snap.wait is not None
        wait = Wait.from_dict(snap.wait)
        if wait.kind == "foreach":
            fanout.send_chunk(self, graph, snap, wait)
        elif wait.kind == "child":
            children.send(self, graph, snap, wait)
        else:
            self.sender.enqueue(snap, graph, countdown=wait.remaining() or None)
        self.store.mark_dispatched(snap.run_id, snap.phase)

    # -- messages for steps that have moved on -------------------------------------------------

    def _stale(self, snap: RunSnapshot, msg: StepMessage) -> StepReport:
        """A message for a step already taken: repair a lost send, or drop it."""
        if snap.status is RunStatus.RUNNING and snap.step == msg.step + 1 and snap.phase == 0:
            log.info(
                "re-enqueueing step %s of run %s after a redelivered message", snap.step + 1, snap.run_id
            )
            self.sender.enqueue(snap, None)
            return StepReport("repaired", msg.run_id, msg.step)
        if snap.status.finished and (snap.parent or snap.concurrency_key):
            self._follow(snap, None)  # the parent (or the key) may not have heard: twice is harmless
        if snap.status is not RunStatus.RUNNING:
            return StepReport("not_running", msg.run_id, msg.step)
        return StepReport("stale", msg.run_id, msg.step)

    def _out_of_phase(self, graph: Graph, snap: RunSnapshot, msg: StepMessage) -> str:
        """A message for an earlier phase of the step being taken."""
        wait = Wait.from_dict(snap.wait) if snap.wait is not None else None
        if wait is None or msg.phase > snap.phase:
            return "stale"
        if wait.kind == "items":  # the task running the items died: take over from the checkpoint
            return str(self.run_async(self._go_on(graph, snap, wait)))
        if msg.phase == snap.phase - 1 and self.store.dispatched(snap.run_id) < snap.phase:
            log.info("re-sending what step %s of run %s waits for", snap.step + 1, snap.run_id)
            self.send_wait(graph, snap)
            return "repaired"
        return "stale"

    # -- runs that fail before any node ran ------------------------------------------------------

    def _end_failed(self, snap: RunSnapshot, error: dict[str, Any]) -> RunSnapshot | None:
        """Commit the run as failed with `error` before any node ran (fenced like every commit).

        Returns the failed snapshot, or None when another delivery had committed first.
        """
        final = snap.model_copy(update={"status": RunStatus.FAILED, "error": error, "phase": 0, "wait": None})
        record = {
            "step": error["step"],
            "node": error["node"],
            "status": "error",
            "error": error,
            "worker": worker_name(),
        }
        if not self.store.commit(Fence.of(snap), final, [record]).committed:
            return None
        log.warning("run %s failed: %s", snap.run_id, error["message"])
        self._follow(final, None)
        return final

    def _fail_unloadable(self, snap: RunSnapshot, msg: StepMessage, exc: GraphrunnerError) -> StepReport:
        message = f"graph cannot be loaded on this worker: {exc}"
        error = {"type": "node_exception", "message": message, "node": snap.node, "step": snap.step + 1}
        self._end_failed(snap, error)
        return StepReport("failed_to_load", msg.run_id, msg.step)


def send_next(sender: Sender, snap: RunSnapshot, graph: Graph | None) -> None:
    """Send what follows a committed `snap`: its next step, or, when it ended, its parent's
    wake-up and the next run waiting for its concurrency key."""
    if snap.status is RunStatus.RUNNING:
        sender.enqueue(snap, graph)
    elif snap.status.finished:
        sender.finished(snap)


def deferred_wait(deferred: Deferred, hook_round: int) -> Wait:
    """The wait of an action that asked to wait: a retry backoff, or a durable sleep."""
    if deferred.kind == "timer":
        return timed(
            "timer",
            deferred.delay,
            hook_round=hook_round,
            attempt=deferred.attempt,
            timer={"result": deferred.result},
        )
    return timed("retry", deferred.delay, hook_round=hook_round, attempt=deferred.attempt)


def timer_record(plan: StepPlan, deferred: Deferred) -> list[dict[str, Any]]:
    """The transcript record of a step that sleeps durably."""
    if deferred.kind != "timer":
        return []
    return [
        {
            "step": plan.step,
            "node": plan.node,
            "status": "sleeping",
            "sleep_s": deferred.delay,
            "at": utcnow().isoformat(),
            "worker": worker_name(),
        }
    ]
