"""One step of a run on a worker: load, decide, then commit with what follows, in one write.

The Celery task is a thin wrapper around `StepExecutor.execute`. Every commit is fenced by
step, phase and status, so a duplicate or stale message changes nothing and is dropped; and
every commit carries the messages that follow it (the next step, the parent's wake-up, a
durable timer), so a worker that dies after committing has lost nothing.

A step that would wait (a retry backoff over `INLINE_WAIT`, a durable sleep, foreach items,
child runs) is suspended instead: its `Wait` is committed, the phase bumped, and what it
waits for is sent. No worker slot is held while a step waits. The kinds of wait decide
(`graphrunner.cluster.waits`: a step with no wait starts on the kind its plan is, a suspended
one goes on with the kind of its wait); this module alone commits and sends, and never names
a kind: it asks the kind what to send, what to do after the commit and after the step.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from graphrunner import engine
from graphrunner.cluster.runs import operations, pauses
from graphrunner.cluster.runs.context import Cluster
from graphrunner.cluster.runs.items import fold_records
from graphrunner.cluster.steps import redeliveries
from graphrunner.cluster.steps.decisions import Checkpoint, Collect, Complete, Decision, Idle, Poll, Suspend
from graphrunner.cluster.steps.redeliveries import infrastructure
from graphrunner.cluster.transport import acks
from graphrunner.cluster.transport.messages import Outgoing, StepMessage
from graphrunner.cluster.waits.base import Context, Step, fresh, kind_of
from graphrunner.cluster.waits.timers import restart
from graphrunner.cluster.worker.heartbeat import Heartbeats
from graphrunner.cluster.worker.loops import ThreadLoops
from graphrunner.compiled import CompiledGraph
from graphrunner.engine import ForeachOutcome, RunFailure, RunSnapshot, RunStatus, Wait
from graphrunner.errors import GraphrunnerError
from graphrunner.services import StepServices
from graphrunner.services.records import (
    AnyRecord,
    FailedRecord,
    RetryRecord,
    StepRecord,
    retry_records,
    utcnow,
    worker_name,
)
from graphrunner.store import Fence
from graphrunner.telemetry import spans
from graphrunner.tracebacks import format_traceback

log = logging.getLogger("graphrunner.worker")
# failed steps, one WARNING line each (their tracebacks at INFO): `graphrunner run` silences this
# logger for the worker it runs in its own process, whose progress lines already show the errors
step_log = logging.getLogger("graphrunner.worker.steps")
MAX_LOGGED_MESSAGE = 1000
FANOUT_CHUNK = 1000


@dataclass(frozen=True)
class Handled:
    """What `execute` did with a message, for logs and tests."""

    outcome: str  # committed | suspended | waiting | duplicate | stale | not_running | unknown_run | ...
    run_id: str
    step: int


@dataclass(frozen=True, kw_only=True)
class ExecutorOptions:
    """How the executor paces work: foreach chunk size, sequential slice, poison cap."""

    chunk: int = FANOUT_CHUNK
    loop_slice: float = 10.0  # seconds a task runs sequential items before handing on
    max_redeliveries: int = 5  # redeliveries of one step and phase before it is poison


class StepExecutor:
    """Executes step messages against the cluster's store, with `services` for the step's I/O."""

    def __init__(
        self,
        cluster: Cluster,
        services: StepServices,
        *,
        heartbeats: Heartbeats,
        options: ExecutorOptions,
        loops: ThreadLoops | None = None,
    ) -> None:
        self.cluster = cluster
        self.store = cluster.store
        self.publisher = cluster.publisher
        self.graphs = cluster.graphs
        self.services = services
        self.heartbeats = heartbeats
        self.options = options
        self.loops = loops or ThreadLoops()
        self.context = Context(cluster, services, options.chunk)

    # -- entry -------------------------------------------------------------------------------------

    def execute(
        self,
        msg: StepMessage,
        *,
        redelivered: bool = False,
        sent: float | None = None,
        queue: str | None = None,
    ) -> Handled:
        """Take (or go on with) the step `msg` names, unless the run has moved on.

        `redelivered`: the broker delivered this message before without an acknowledgement
        (its worker died, or it was requeued): counted, and past `max_redeliveries` the step
        is poison and fails its run. An unexpected exception fails the run (naming it);
        Redis or broker trouble (`infrastructure`) is raised for a requeue. `sent` (epoch s) is
        when the message was sent to `queue`, when its envelope says so (its queue wait).
        """
        try:
            return self._execute(msg, redelivered, sent, queue)
        except Exception as exc:
            if infrastructure(exc):
                raise
            return self._unexpected(msg, exc)

    def _execute(self, msg: StepMessage, redelivered: bool, sent: float | None, queue: str | None) -> Handled:
        snap = self.store.load_run(msg.run_id)
        if snap is None:
            log.warning("step message for unknown run %s dropped", msg.run_id)
            return Handled("unknown_run", msg.run_id, msg.step)
        if snap.step != msg.step or snap.status is not RunStatus.RUNNING:
            return self._stale(snap, msg)
        if msg.phase != snap.phase and not _takes_over(snap, msg):
            return self._stale(snap, msg)  # an earlier phase, unless its wait lets it take the step over
        if redelivered and self._poisoned(snap):
            return Handled("poison", msg.run_id, msg.step)
        try:
            graph = self.graphs.get(snap.graph_hash)
        except GraphrunnerError as exc:
            self._fail(snap, _error(snap, "node_exception", f"graph cannot be loaded on this worker: {exc}"))
            return Handled("failed_to_load", msg.run_id, msg.step)
        with (
            self.heartbeats.beating(snap.run_id),
            spans.step(graph, snap, worker_name(), sent, queue) as taken,
        ):
            done = self.loops.run(self._take(graph, snap, msg.child))
            taken.ended(taken.status or done, taken.failure)
            return Handled(done, msg.run_id, msg.step)

    def _stale(self, snap: RunSnapshot, msg: StepMessage) -> Handled:
        """A message for a step already taken, an earlier phase, or a run no longer running: dropped."""
        log.info(
            "dropped step message (run %s, step %s, phase %s): the run is %s at step %s, phase %s",
            msg.run_id, msg.step + 1, msg.phase, snap.status.value, snap.step + 1, snap.phase,
        )  # fmt: skip
        if snap.status.finished and snap.concurrency_key:
            operations.hand_on(self.cluster, snap)  # in case its last worker died before it did
        return Handled("stale" if snap.status is RunStatus.RUNNING else "not_running", msg.run_id, msg.step)

    def _poisoned(self, snap: RunSnapshot) -> bool:
        """Count a redelivery of the step at `snap`; past the cap, fail the run (True)."""
        counted = redeliveries.of_step(self.store, snap, self.options.max_redeliveries)
        if not counted.poison:
            return False
        message = (
            f"step {snap.step + 1} (node '{snap.node}') was redelivered {counted.count} times without "
            f"finishing: its task keeps losing its worker (killed, out of memory?), so the run is "
            f"stopped instead of trying again (GRAPHRUNNER_MAX_REDELIVERIES={counted.limit})"
        )
        self._fail(snap, _error(snap, "limit_exceeded", message))
        return True

    def _unexpected(self, msg: StepMessage, exc: Exception) -> Handled:
        """An exception no step should raise (a bug, a broken library): the run fails, naming it."""
        log.exception("step %s of run %s raised unexpectedly", msg.step + 1, msg.run_id)
        snap = self.store.load_run(msg.run_id)
        if snap is None or snap.status is not RunStatus.RUNNING or snap.step != msg.step:
            return Handled("stale", msg.run_id, msg.step)
        where = f"node '{snap.node}'" if snap.node else "the run"
        message = f"{where} failed unexpectedly on worker {worker_name()}: {type(exc).__name__}: {exc}"
        traceback = format_traceback(exc, user_frames=False)
        self._fail(snap, _error(snap, "node_exception", message[:2000], traceback))
        return Handled("failed_unexpectedly", msg.run_id, msg.step)

    # -- deciding ------------------------------------------------------------------------------------

    async def _take(self, graph: CompiledGraph, snap: RunSnapshot, child: str = "") -> str:
        started = (utcnow().isoformat(), time.perf_counter())
        if snap.wait is None and snap.step == 0:
            failed = self.services.env_failure(graph, snap)
            if failed is not None and failed.error is not None:
                final = self._fail(snap, failed.error)
                if final is None:
                    return "duplicate"
                await self.services.completed(graph, final)
                return "committed"
            await self.services.started(graph, snap)
        step = Step(graph, snap, engine.prepare(graph, snap, utcnow()))
        taken = spans.current()
        if taken is not None and step.plan.call is not None:
            taken.tool = step.plan.call.tool
        decision = await self._decide(step, child)
        done = await self._apply(step, decision, started)
        if snap.wait is not None:  # a lost race looks again; a node that is done lets go of its waits
            kind_of(snap.wait).after_step(self.context, step, snap.wait, decision, done)
        return done

    async def _decide(self, step: Step, child: str) -> Decision:
        """How the step starts (no wait), or goes on with its wait (`child`: the child run that woke it)."""
        wait = step.snap.wait
        if wait is None:
            return await fresh(self.context, step)
        if wait.remaining() > 0.05:  # a timer that came early: look again when it is due
            return Poll(wait.remaining())
        return await kind_of(wait).join(self.context, step, wait, child)

    # -- applying a decision --------------------------------------------------------------------------

    async def _apply(self, step: Step, decision: Decision, started: tuple[str, float]) -> str:
        graph, snap = step.graph, step.snap
        slice_ends = time.monotonic() + self.options.loop_slice
        while isinstance(decision, Checkpoint):  # sequential items: one commit per item
            self.cluster.save_item(snap.run_id, decision.tag, *decision.item)
            if time.monotonic() > slice_ends:  # hand on to a fresh task
                return self._suspend(graph, snap, Suspend(decision.wait))
            moved = self._commit(snap, self._suspended(snap, decision.wait))
            if moved is None:
                return "duplicate"
            snap, step = moved, Step(graph, moved, step.plan)
            decision = await kind_of(decision.wait).join(self.context, step, decision.wait, "")
        if isinstance(decision, Complete):
            return await self._finish(step, decision, started)
        if isinstance(decision, Collect):
            return await self._collect(step, decision, started)
        if isinstance(decision, Suspend):
            return self._suspend(graph, snap, decision)
        if isinstance(decision, Poll):
            self.publisher.send(
                snap.run_id,
                [self.publisher.step(snap, graph, due=time.time() + decision.delay, tracked=False)],
            )
        assert isinstance(decision, Poll | Idle)
        return "waiting"

    async def _finish(self, step: Step, done: Complete, started: tuple[str, float]) -> str:
        """Complete the step (the error hooks may answer), commit it with what follows."""
        graph, snap, plan = step.graph, step.snap, step.plan
        result, answer = await self.services.finish(graph, snap, plan, done.outcome, done.hook_round)
        if answer == "retry":  # an error hook asked for the step again (completed kids are kept)
            return self._suspend(graph, snap, Suspend(restart(snap, done.hook_round + 1)))
        final = result.snapshot.model_copy(update={"phase": 0, "wait": None})
        worker = worker_name()
        records: list[AnyRecord] = [*retry_records(plan, done.retries, worker)]
        records.append(StepRecord.of(result, *started, worker, **_timing(snap, done)))
        walked = final.path[len(snap.path) :]
        if self._commit(snap, final, records, walked, self.cluster.following(final, graph)) is None:
            log.info("step %s of run %s was already committed; duplicate dropped", plan.step, snap.run_id)
            return "duplicate"
        taken = spans.current()
        if taken is not None:
            taken.status, taken.failure = result.event.status, result.event.error
        if result.event.error is not None:
            log_failed_step(snap.run_id, result.event.error, final.status.value)
        await self.services.after(graph, plan, replace(result, snapshot=final))
        if final.status is RunStatus.PAUSED and final.parent is not None:
            pauses.pause_above(self.cluster, final)  # the runs above it pause with it
        if final.status.finished and final.concurrency_key:
            operations.hand_on(self.cluster, final)
        return "committed"

    async def _collect(self, step: Step, collect: Collect, started: tuple[str, float]) -> str:
        """Complete a foreach with its recorded items, folded in item order a page at a time (never
        all of them held at once); once committed, they go."""
        snap, plan = step.snap, step.plan
        assert plan.items is not None
        if collect.item is not None:
            self.cluster.save_item(snap.run_id, collect.tag, *collect.item)
        records = self.store.item_records(snap.run_id, collect.tag, collect.count)
        fold, times = fold_records(records, plan.items)
        timed = Complete(ForeachOutcome(folded=fold), collect.hook_round, times=times)
        done = await self._finish(step, timed, started)
        if done == "committed":
            self.store.drop_items(snap.run_id, collect.tag)
        return done

    def _suspend(self, graph: CompiledGraph, snap: RunSnapshot, suspend: Suspend) -> str:
        """Commit the suspension with what its kind sends with it, then what it does after."""
        kind = kind_of(suspend.wait)
        taken = spans.current()
        failed = [r.error for r in suspend.records if isinstance(r, RetryRecord)]
        if taken is not None and failed:  # an attempt that failed and is tried again later (OA §4.2)
            taken.status, taken.failure = "retry", failed[-1]
        new = self._suspended(snap, suspend.wait, suspend.changes)
        outs = kind.sends(self.cluster, graph, new, suspend.wait)
        if self._commit(snap, new, suspend.records, outs=outs) is None:
            return "duplicate"
        kind.after_commit(self.cluster, graph, new, suspend)
        return "suspended"

    @staticmethod
    def _suspended(snap: RunSnapshot, wait: Wait, changes: dict[str, Any] | None = None) -> RunSnapshot:
        """`snap` suspended on `wait`, which keeps when it began and when the step first began."""
        now = time.time()
        taken = spans.current()
        begun = (snap.wait.begun if snap.wait is not None else None) or (taken.began if taken else now)
        wait = wait.model_copy(update={"since": now, "begun": begun})
        return snap.model_copy(update={"phase": snap.phase + 1, "wait": wait, **(changes or {})})

    # -- committing -------------------------------------------------------------------------------------

    def _commit(
        self,
        snap: RunSnapshot,
        new: RunSnapshot,
        records: Sequence[AnyRecord] = (),
        walked: Sequence[str] = (),
        outs: Sequence[Outgoing] = (),
    ) -> RunSnapshot | None:
        """Commit `new` over `snap` (fenced) with its records and messages; None when fenced off."""
        if not self.cluster.commit(Fence.of(snap), new, records, walked, outs, acks.current()):
            return None
        taken = spans.current()
        if taken is not None:
            taken.committed(snap, new)
        elif new.status.finished:  # a run failed outside any step's task (an unexpected error)
            spans.run_ended(None, new)
        return new

    def _fail(self, snap: RunSnapshot, error: RunFailure) -> RunSnapshot | None:
        """Commit the run as failed with `error` (fenced); None when another delivery was first."""
        final = snap.model_copy(update={"status": RunStatus.FAILED, "error": error, "phase": 0, "wait": None})
        step = error.step if error.step is not None else 0
        record = FailedRecord(step=step, node=error.node, error=error, worker=worker_name())
        if self._commit(snap, final, [record], outs=self.cluster.following(final, None)) is None:
            return None
        taken = spans.current()
        if taken is not None:
            taken.status, taken.failure = "failed", error
        log_failed_step(snap.run_id, error, final.status.value)
        if final.concurrency_key:
            operations.hand_on(self.cluster, final)
        return final


def _timing(snap: RunSnapshot, done: Complete) -> dict[str, Any]:
    """What the step's record keeps for the explorer's timeline, where there is any: the queue
    wait of the task that finished the step, when a suspended step first began, its items."""
    taken = spans.current()
    begun = snap.wait.begun if snap.wait is not None else None
    timing: dict[str, Any] = {}
    if taken is not None and taken.queue_ms is not None:
        timing["queue_ms"] = round(taken.queue_ms, 3)
    if begun is not None:
        timing["begun_at"] = datetime.fromtimestamp(begun, UTC).isoformat()
    if done.times is not None:
        timing["items"] = done.times
    return timing


def _takes_over(snap: RunSnapshot, msg: StepMessage) -> bool:
    """A message of an earlier phase may take the step over when its wait's kind says so (an items
    task that died, a child run started at an earlier phase that woke the step)."""
    return snap.wait is not None and msg.phase < snap.phase and kind_of(snap.wait).takes_over(snap.wait)


def _error(snap: RunSnapshot, kind: str, message: str, traceback: str | None = None) -> RunFailure:
    """A run's `error` at the step after `snap` (with `traceback` when there is one)."""
    return RunFailure(type=kind, message=message, node=snap.node, step=snap.step + 1, traceback=traceback)


def log_failed_step(run_id: str, error: RunFailure, status: str) -> None:
    """One WARNING line for a failed step (run, step, node, error, what became of the run); its
    traceback, when it has one, at INFO."""
    node = f" node '{error.node}'" if error.node else ""
    where = f"run {run_id} step {error.step}{node}"
    message = " ".join(error.message.split())  # one line, whatever the error says
    if len(message) > MAX_LOGGED_MESSAGE:
        message = message[: MAX_LOGGED_MESSAGE - 1] + "…"
    traceback = error.traceback
    more = f" (traceback: graphrunner steps {run_id} --traceback)" if traceback else ""
    outcome = "the run goes on" if status == "running" else f"the run is {status}"
    step_log.warning("%s failed (%s): %s: %s%s", where, outcome, error.type, message, more)
    if traceback:
        step_log.info("%s failed here:\n%s", where, traceback)
