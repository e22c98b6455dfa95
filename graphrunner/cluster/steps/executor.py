"""One step of a run on a worker: load, decide, then commit with what follows, in one write.

The Celery task is a thin wrapper around `StepExecutor.execute`. Every commit is fenced by
step, phase and status, so a duplicate or stale message changes nothing and is dropped; and
every commit carries the messages that follow it (the next step, the parent's wake-up, a
durable timer), so a worker that dies after committing has lost nothing.

A step that would wait (a retry backoff over `INLINE_WAIT`, a durable sleep, foreach items,
a child run) is suspended instead: its `Wait` is committed, the phase bumped, and what it
waits for is sent. No worker slot is held while a step waits. The helpers `fanout`,
`sequence` and `children` decide (see `decisions`); this module alone commits and sends.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import redis

from graphrunner import engine
from graphrunner.cluster.runs import operations
from graphrunner.cluster.runs.context import Cluster
from graphrunner.cluster.steps.decisions import Checkpoint, Collect, Complete, Decision, Idle, Poll, Suspend
from graphrunner.cluster.steps.item_runner import outcome_of
from graphrunner.cluster.transport.messages import Outgoing, StepMessage
from graphrunner.cluster.waits import children, dispatch, kids, sequence
from graphrunner.cluster.waits import foreach as fanout
from graphrunner.cluster.waits.base import Wait, deferred_wait, latest
from graphrunner.cluster.worker.heartbeat import Heartbeats
from graphrunner.cluster.worker.loops import ThreadLoops
from graphrunner.compiled import CompiledGraph
from graphrunner.engine import ForeachOutcome, NoOutcome, RunSnapshot, RunStatus, StepPlan
from graphrunner.errors import BrokerUnavailable, GraphrunnerError, StoreUnavailable
from graphrunner.model import ForeachNode
from graphrunner.services import Deferred, StepServices, tool_context
from graphrunner.services.records import (
    AnyRecord,
    FailedRecord,
    SleepRecord,
    StepRecord,
    retry_records,
    utcnow,
    worker_name,
)
from graphrunner.store import Fence
from graphrunner.tracebacks import format_traceback

log = logging.getLogger("graphrunner.worker")
# failed steps, one WARNING line each (their tracebacks at INFO): `graphrunner run` silences this
# logger for the worker it runs in its own process, whose progress lines already show the errors
step_log = logging.getLogger("graphrunner.worker.steps")
MAX_LOGGED_MESSAGE = 1000
# requeue the message: never a run's fault. A broker away (RabbitMQ restarting) when a committed
# step publishes what follows (then the run's outbox keeps it), or when a suspended step sends its
# foreach chunk or child run (then the sweeper sends them), must not fail the run.
INFRASTRUCTURE = (StoreUnavailable, redis.RedisError, BrokerUnavailable)
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

    # -- entry -------------------------------------------------------------------------------------

    def execute(self, msg: StepMessage, *, redelivered: bool = False) -> Handled:
        """Take (or go on with) the step `msg` names, unless the run has moved on.

        `redelivered`: the broker delivered this message before without an acknowledgement
        (its worker died, or it was requeued): counted, and past `max_redeliveries` the step
        is poison and fails its run. An unexpected exception fails the run (naming it);
        Redis or broker trouble (`infrastructure`) is raised for a requeue.
        """
        try:
            return self._execute(msg, redelivered)
        except Exception as exc:
            if infrastructure(exc):
                raise
            return self._unexpected(msg, exc)

    def _execute(self, msg: StepMessage, redelivered: bool) -> Handled:
        snap = self.store.load_run(msg.run_id)
        if snap is None:
            log.warning("step message for unknown run %s dropped", msg.run_id)
            return Handled("unknown_run", msg.run_id, msg.step)
        if snap.step != msg.step or snap.status is not RunStatus.RUNNING:
            return self._stale(snap, msg)
        wait = Wait.from_dict(snap.wait) if snap.wait is not None else None
        if msg.phase != snap.phase and not (
            wait is not None and wait.kind in ("items", "kids") and msg.phase < snap.phase
        ):
            return self._stale(snap, msg)  # an earlier phase; an items task that died is taken over
        if redelivered and self._poisoned(snap):
            return Handled("poison", msg.run_id, msg.step)
        try:
            graph = self.graphs.get(snap.graph_hash)
        except GraphrunnerError as exc:
            self._fail(snap, _error(snap, "node_exception", f"graph cannot be loaded on this worker: {exc}"))
            return Handled("failed_to_load", msg.run_id, msg.step)
        with self.heartbeats.beating(snap.run_id):
            return Handled(self.loops.run(self._take(graph, snap, wait, msg.child)), msg.run_id, msg.step)

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
        count = self.store.count_redelivery(snap.run_id, f"{snap.step + 1}.{snap.phase}")
        limit = self.options.max_redeliveries
        if count <= limit:
            log.warning("step %s of run %s redelivered (%s so far)", snap.step + 1, snap.run_id, count)
            return False
        message = (
            f"step {snap.step + 1} (node '{snap.node}') was redelivered {count} times without "
            f"finishing: its task keeps losing its worker (killed, out of memory?), so the run is "
            f"stopped instead of trying again (GRAPHRUNNER_MAX_REDELIVERIES={limit})"
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

    async def _take(self, graph: CompiledGraph, snap: RunSnapshot, wait: Wait | None, child: str = "") -> str:
        started = (utcnow().isoformat(), time.perf_counter())
        if wait is None and snap.step == 0:
            failed = self.services.env_failure(graph, snap)
            if failed is not None and failed.error is not None:
                final = self._fail(snap, failed.error)
                if final is None:
                    return "duplicate"
                await self.services.completed(graph, final)
                return "committed"
            await self.services.started(graph, snap)
        plan, decision = await self._decide(graph, snap, wait, child)
        done = await self._apply(graph, snap, plan, decision, started)
        if wait is not None and wait.kind == "kids":
            self._after_kids(snap, plan, decision, done)
        return done

    def _after_kids(self, snap: RunSnapshot, plan: StepPlan, decision: Decision, done: str) -> None:
        """After a kids step: a decision that lost the race looks again (the winner may not have
        seen the kid that woke this one); a node that is done no longer needs its open kids."""
        if done == "duplicate":
            self._look_again(snap.run_id)
        elif isinstance(decision, Complete):
            kids.cancel_open(self.cluster, snap, f"node '{plan.node}' of its parent run stopped waiting")

    async def _decide(
        self, graph: CompiledGraph, snap: RunSnapshot, wait: Wait | None, child: str = ""
    ) -> tuple[StepPlan, Decision]:
        if wait is None or wait.kind == "restart":
            return await self._fresh(graph, snap, wait.hook_round if wait else 0, wait.prior if wait else "")
        plan = engine.prepare(graph, snap, utcnow())
        if wait.remaining() > 0.05:  # a timer that came early: look again when it is due
            return plan, Poll(wait.remaining())
        if wait.kind in ("retry", "timer"):
            return plan, await self._act(snap, plan, wait)
        if wait.kind == "foreach":
            return plan, fanout.join(wait, self.store.count_items(snap.run_id, wait.tag))
        if wait.kind == "items":
            return plan, await sequence.next_item(self.services, graph, snap, plan, wait)
        if wait.kind == "kids":
            return plan, kids.join(self.store, graph, snap, plan, wait, self._window(graph, plan), child)
        return plan, children.join(snap, wait, self.store.load_run(wait.child))

    async def _fresh(
        self, graph: CompiledGraph, snap: RunSnapshot, hook_round: int, prior: str = ""
    ) -> tuple[StepPlan, Decision]:
        """Plan the step at the run's node and decide how it starts."""
        plan = engine.prepare(graph, snap, utcnow())
        if plan.failure is not None:
            return plan, Complete(NoOutcome(), hook_round)
        if plan.kind == "action":
            return plan, await self._act(snap, plan, Wait("retry", hook_round=hook_round))
        if plan.kind == "parallel" or (plan.kind == "foreach" and plan.child_graph is not None):
            limit = self.services.max_state_bytes
            window = self._window(graph, plan)
            start = kids.Start(hook_round, window, limit, prior)
            return plan, kids.start(self.store, self.graphs, graph, snap, plan, start)
        if plan.kind == "foreach" and fanout.parallel(graph, plan):
            return plan, fanout.start(graph, snap, plan, hook_round, self.options.chunk)
        if plan.kind == "foreach":
            first = sequence.first(snap, plan, hook_round)
            return plan, await sequence.next_item(self.services, graph, snap, plan, first)
        if plan.kind == "subgraph":
            limit = self.services.max_state_bytes
            return plan, children.start(self.graphs, graph, snap, plan, hook_round, limit)
        return plan, Complete(NoOutcome(), hook_round)

    def _window(self, graph: CompiledGraph, plan: StepPlan) -> int:
        """How many kids a foreach over a graph keeps running at once (every branch of a parallel)."""
        spec = graph.nodes[plan.node].spec
        if not isinstance(spec, ForeachNode):
            return len(plan.branches)
        if not spec.parallel:
            return 1
        return spec.max_concurrency or self.options.chunk

    async def _act(self, snap: RunSnapshot, plan: StepPlan, wait: Wait) -> Decision:
        """Dispatch the node's action from `wait.attempt`; a long wait suspends the step."""
        if plan.failure is not None or plan.call is None:  # e.g. denied: fail closed, run nothing
            return Complete(NoOutcome(), wait.hook_round)
        context = tool_context(snap, plan.node, plan.step)
        timer = wait.timer if wait.kind == "timer" else None
        outcome = await self.services.durable_call(
            snap.graph_hash, plan.call, context, attempt=wait.attempt, timer=timer
        )
        if isinstance(outcome, Deferred):
            return Suspend(
                deferred_wait(outcome, wait.hook_round), records=tuple(_wait_records(plan, outcome))
            )
        return Complete(outcome, wait.hook_round, outcome.retries)

    # -- applying a decision --------------------------------------------------------------------------

    async def _apply(
        self,
        graph: CompiledGraph,
        snap: RunSnapshot,
        plan: StepPlan,
        decision: Decision,
        started: tuple[str, float],
    ) -> str:
        slice_ends = time.monotonic() + self.options.loop_slice
        while isinstance(decision, Checkpoint):  # sequential items: one commit per item
            self.cluster.save_item(snap.run_id, decision.wait.tag, *decision.item)
            if time.monotonic() > slice_ends:  # hand on to a fresh task
                return self._suspend(graph, snap, Suspend(decision.wait))
            moved = self._commit(snap, self._suspended(snap, decision.wait))
            if moved is None:
                return "duplicate"
            snap = moved
            decision = await sequence.next_item(self.services, graph, snap, plan, decision.wait)
        if isinstance(decision, Complete):
            return await self._finish(graph, snap, plan, decision, started)
        if isinstance(decision, Collect):
            return await self._collect(graph, snap, plan, decision, started)
        if isinstance(decision, Suspend):
            return self._suspend(graph, snap, decision)
        if isinstance(decision, Poll):
            self.publisher.send(
                snap.run_id,
                [self.publisher.step(snap, graph, due=time.time() + decision.delay, tracked=False)],
            )
        assert isinstance(decision, Poll | Idle)
        return "waiting"

    async def _finish(
        self,
        graph: CompiledGraph,
        snap: RunSnapshot,
        plan: StepPlan,
        done: Complete,
        started: tuple[str, float],
    ) -> str:
        """Complete the step (the error hooks may answer), commit it with what follows."""
        result, answer = await self.services.finish(graph, snap, plan, done.outcome, done.hook_round)
        if answer == "retry":  # an error hook asked for the step again (completed kids are kept)
            again = Wait("restart", hook_round=done.hook_round + 1, prior=latest(snap))
            return self._suspend(graph, snap, Suspend(again))
        final = result.snapshot.model_copy(update={"phase": 0, "wait": None})
        worker = worker_name()
        records: list[AnyRecord] = [*retry_records(plan, done.retries, worker)]
        records.append(StepRecord.of(result, *started, worker))
        walked = final.path[len(snap.path) :]
        if self._commit(snap, final, records, walked, self.cluster.following(final, graph)) is None:
            log.info("step %s of run %s was already committed; duplicate dropped", plan.step, snap.run_id)
            return "duplicate"
        if result.event.error is not None:
            log_failed_step(snap.run_id, result.event.error, final.status.value)
        await self.services.after(graph, plan, replace(result, snapshot=final))
        if final.status.finished and final.concurrency_key:
            operations.hand_on(self.cluster, final)
        return "committed"

    async def _collect(
        self,
        graph: CompiledGraph,
        snap: RunSnapshot,
        plan: StepPlan,
        collect: Collect,
        started: tuple[str, float],
    ) -> str:
        """Complete a foreach with its recorded items, in item order; once committed, they go."""
        assert plan.items is not None
        if collect.item is not None:
            self.cluster.save_item(snap.run_id, collect.tag, *collect.item)
        records = self.store.load_items(snap.run_id, collect.tag, collect.count)
        items = tuple(outcome_of(i, plan.items[i], r) for i, r in enumerate(records))
        done = await self._finish(
            graph, snap, plan, Complete(ForeachOutcome(items), collect.hook_round), started
        )
        if done == "committed":
            self.store.drop_items(snap.run_id, collect.tag)
        return done

    def _suspend(self, graph: CompiledGraph, snap: RunSnapshot, suspend: Suspend) -> str:
        """Commit the suspension with what it sends, then dispatch a foreach chunk or child run."""
        new = self._suspended(snap, suspend.wait, suspend.changes)
        if self._commit(snap, new, suspend.records, outs=self._waited_for(graph, new, suspend.wait)) is None:
            return "duplicate"
        if suspend.wait.kind == "kids":
            kids.create(self.cluster, graph, new, suspend.wait, suspend.kids)
        self._dispatch(graph, new, suspend.wait)
        return "suspended"

    def _look_again(self, run_id: str) -> None:
        """Send the run's step once more when it still waits on kids (a wake-up lost a race)."""
        current = self.store.load_run(run_id)
        if current is None or current.status is not RunStatus.RUNNING or current.wait is None:
            return
        if current.wait.get("kind") == "kids":
            publisher = self.cluster.publisher
            publisher.send(
                run_id, [publisher.step(current, self.graphs.get(current.graph_hash), tracked=False)]
            )

    @staticmethod
    def _suspended(snap: RunSnapshot, wait: Wait, changes: dict[str, Any] | None = None) -> RunSnapshot:
        return snap.model_copy(update={"phase": snap.phase + 1, "wait": wait.to_dict(), **(changes or {})})

    def _waited_for(self, graph: CompiledGraph, snap: RunSnapshot, wait: Wait) -> list[Outgoing]:
        """What a suspension sends with its commit: the step again (at once, or as a timer)."""
        if wait.kind in ("foreach", "child", "kids"):
            return []  # sent after the commit: a Celery chord, a child run of its own, kid runs
        return [self.publisher.step(snap, graph, due=wait.due)]

    def _dispatch(self, graph: CompiledGraph, snap: RunSnapshot, wait: Wait) -> None:
        """Send the foreach chunk (once per phase) or create the child run `snap` waits for."""
        if wait.kind == "child":
            dispatch.start_child(self.cluster, graph, snap, wait)
        elif wait.kind == "foreach" and self.store.claim_dispatch(snap.run_id, snap.phase):
            dispatch.send_chunk(self.cluster, graph, snap, wait)

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
        return new if self.cluster.commit(Fence.of(snap), new, records, walked, outs) else None

    def _fail(self, snap: RunSnapshot, error: dict[str, Any]) -> RunSnapshot | None:
        """Commit the run as failed with `error` (fenced); None when another delivery was first."""
        final = snap.model_copy(update={"status": RunStatus.FAILED, "error": error, "phase": 0, "wait": None})
        record = FailedRecord(step=error["step"], node=error["node"], error=error, worker=worker_name())
        if self._commit(snap, final, [record], outs=self.cluster.following(final, None)) is None:
            return None
        log_failed_step(snap.run_id, error, final.status.value)
        if final.concurrency_key:
            operations.hand_on(self.cluster, final)
        return final


def infrastructure(exc: Exception) -> bool:
    """Redis or the broker is in trouble (not the run): `INFRASTRUCTURE`, or the error kombu raises
    when a publish (a Celery chord's) has spent its retries: its module is loaded by then."""
    if isinstance(exc, INFRASTRUCTURE):
        return True
    kombu = sys.modules.get("kombu.exceptions")
    return kombu is not None and isinstance(exc, kombu.OperationalError)


def _error(snap: RunSnapshot, kind: str, message: str, traceback: str | None = None) -> dict[str, Any]:
    """A run's `error` at the step after `snap` (with `traceback` when there is one)."""
    error = {"type": kind, "message": message, "node": snap.node, "step": snap.step + 1}
    return error if traceback is None else {**error, "traceback": traceback}


def _wait_records(plan: StepPlan, deferred: Deferred) -> list[AnyRecord]:
    """The transcript records of a step that waits: its retried attempts, or its durable sleep."""
    worker = worker_name()
    records: list[AnyRecord] = [*retry_records(plan, deferred.retries, worker)]
    if deferred.kind == "timer":
        at = utcnow().isoformat()
        records.append(
            SleepRecord(step=plan.step, node=plan.node, sleep_s=deferred.delay, at=at, worker=worker)
        )
    return records


def log_failed_step(run_id: str, error: dict[str, Any], status: str) -> None:
    """One WARNING line for a failed step (run, step, node, error, what became of the run); its
    traceback, when it has one, at INFO."""
    node = f" node '{error['node']}'" if error.get("node") else ""
    where = f"run {run_id} step {error.get('step')}{node}"
    message = " ".join(str(error.get("message", "")).split())  # one line, whatever the error says
    if len(message) > MAX_LOGGED_MESSAGE:
        message = message[: MAX_LOGGED_MESSAGE - 1] + "…"
    traceback = error.get("traceback")
    more = f" (traceback: graphrunner steps {run_id} --traceback)" if traceback else ""
    outcome = "the run goes on" if status == "running" else f"the run is {status}"
    step_log.warning("%s failed (%s): %s: %s%s", where, outcome, error.get("type"), message, more)
    if traceback:
        step_log.info("%s failed here:\n%s", where, traceback)
