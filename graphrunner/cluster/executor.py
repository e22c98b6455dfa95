"""One step of a run on a worker: load, step, commit (fenced), enqueue the next step.

The Celery task is a thin wrapper around `StepExecutor.execute`. A duplicate message
changes nothing (the commit is fenced by the step number); a message redelivered after
its commit re-enqueues the next step, which repairs a worker that died in between.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from graphrunner.cluster.graphs import GraphCache
from graphrunner.cluster.messages import StepMessage
from graphrunner.engine import RunSnapshot, RunStatus
from graphrunner.errors import GraphrunnerError
from graphrunner.graph import Graph
from graphrunner.runner import LocalRunner
from graphrunner.store import Store

log = logging.getLogger("graphrunner.worker")
Enqueue = Callable[[RunSnapshot, Graph | None], None]
WORKER = f"{socket.gethostname()}:{os.getpid()}"


@dataclass(frozen=True)
class StepReport:
    """What `execute` did, for logs and tests."""

    outcome: str  # committed | duplicate | repaired | stale | unknown_run | not_running | failed_to_load
    run_id: str
    step: int


class StepExecutor:
    """Executes step messages against a store, with a runner for the step's I/O."""

    def __init__(self, store: Store, enqueue: Enqueue, runner: LocalRunner | None = None) -> None:
        self.store = store
        self.enqueue = enqueue
        self.graphs = GraphCache(store)
        self.runner = runner or LocalRunner()
        self._local = threading.local()
        self._loops: list[asyncio.AbstractEventLoop] = []
        self._lock = threading.Lock()

    def _run(self, coro: Any) -> Any:
        """Run a coroutine on this thread's own event loop (kept between steps)."""
        loop = getattr(self._local, "loop", None)
        if loop is None or loop.is_closed():
            loop = self._local.loop = asyncio.new_event_loop()
            with self._lock:
                self._loops.append(loop)
        return loop.run_until_complete(coro)

    def close(self) -> None:
        """Close the event loops of the threads that took steps (when the worker stops)."""
        with self._lock:
            loops, self._loops = self._loops, []
        for loop in loops:
            if not loop.is_running() and not loop.is_closed():
                loop.run_until_complete(loop.shutdown_default_executor())
                loop.close()

    def execute(self, msg: StepMessage) -> StepReport:
        """Take the step `msg` names, unless the run has moved on."""
        snap = self.store.load_run(msg.run_id)
        if snap is None:
            log.warning("step message for unknown run %s dropped", msg.run_id)
            return StepReport("unknown_run", msg.run_id, msg.step)
        if snap.step != msg.step or snap.status is not RunStatus.RUNNING:
            return self._stale(snap, msg)
        try:
            graph = self.graphs.get(snap.graph_hash)
        except GraphrunnerError as exc:
            return self._fail_unloadable(snap, msg, exc)
        return self._take(graph, snap, msg)

    def _take(self, graph: Graph, snap: RunSnapshot, msg: StepMessage) -> StepReport:
        if snap.step == 0:
            failed = self.runner.preflight(graph, snap)
            if failed is not None and failed.error is not None:
                self._end_failed(snap, msg, failed.error, graph)
                return StepReport("committed", msg.run_id, msg.step)
            if graph.hooks:
                self._run(self.runner.started(graph, snap))
        plan, result, record = self._run(self.runner.advance(graph, snap, WORKER))
        walked = result.snapshot.path[len(snap.path) :]
        committed = self.store.commit_step(msg.step, result.snapshot, record, walked)
        if not committed.committed:
            log.info("step %s of run %s was already committed; duplicate dropped", msg.step + 1, msg.run_id)
            return StepReport("duplicate", msg.run_id, msg.step)
        if graph.hooks:
            self._run(self.runner.after(graph, plan, result))
        if result.snapshot.status is RunStatus.RUNNING:
            self.enqueue(result.snapshot, graph)
        return StepReport("committed", msg.run_id, msg.step)

    def _stale(self, snap: RunSnapshot, msg: StepMessage) -> StepReport:
        """A message for a step already taken: repair a lost enqueue, or drop it."""
        if snap.status is RunStatus.RUNNING and snap.step == msg.step + 1:
            log.info(
                "re-enqueueing step %s of run %s after a redelivered message", snap.step + 1, snap.run_id
            )
            self.enqueue(snap, None)
            return StepReport("repaired", msg.run_id, msg.step)
        if snap.status is not RunStatus.RUNNING:
            return StepReport("not_running", msg.run_id, msg.step)
        return StepReport("stale", msg.run_id, msg.step)

    def _end_failed(
        self, snap: RunSnapshot, msg: StepMessage, error: dict[str, Any], graph: Graph | None
    ) -> None:
        """Commit the run as failed with `error` before any node ran (fenced like every commit)."""
        final = snap.model_copy(update={"status": RunStatus.FAILED, "error": error})
        record = {
            "step": error["step"],
            "node": error["node"],
            "status": "error",
            "error": error,
            "worker": WORKER,
        }
        if self.store.commit_step(msg.step, final, record).committed:
            log.warning("run %s failed: %s", snap.run_id, error["message"])
            if graph is not None and graph.hooks:
                self._run(self.runner.completed(graph, final))

    def _fail_unloadable(self, snap: RunSnapshot, msg: StepMessage, exc: GraphrunnerError) -> StepReport:
        message = f"graph cannot be loaded on this worker: {exc}"
        error = {"type": "node_exception", "message": message, "node": snap.node, "step": snap.step + 1}
        self._end_failed(snap, msg, error, None)
        return StepReport("failed_to_load", msg.run_id, msg.step)
