"""The Python client of a graphrunner cluster: submit runs, wait for them, read them."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from graphrunner import engine
from graphrunner.cluster.app import Runtime
from graphrunner.cluster.executor import send_next
from graphrunner.cluster.messages import check_run_id
from graphrunner.cluster.runs import fingerprint
from graphrunner.engine import ResumeError, RunSnapshot, RunStatus
from graphrunner.errors import GraphrunnerError
from graphrunner.graph import Graph
from graphrunner.loading import load_graph
from graphrunner.results import RunResult
from graphrunner.settings import Settings
from graphrunner.store import Fence, RunSummary

WAIT_SLICE_MS = 1000
SETTLED = {RunStatus.PAUSED} | set(engine.RunStatus) - {RunStatus.PENDING, RunStatus.RUNNING}


class RunNotFound(GraphrunnerError):
    """No run with that id exists."""


class RunConflict(GraphrunnerError):
    """A run with that id exists with another graph, inputs or capabilities."""


class WaitTimeout(GraphrunnerError):
    """A run did not settle within the time given to `wait`."""


class Client:
    """Submits runs to, and reads runs from, the Redis a cluster of workers uses."""

    def __init__(
        self,
        redis_url: str | None = None,
        *,
        broker_url: str | None = None,
        settings: Settings | None = None,
        retry_seconds: float = 5.0,
    ) -> None:
        settings = settings or Settings.from_env()
        if redis_url:
            settings = settings.with_redis(redis_url)
        if broker_url:
            settings = replace(settings, broker_url=broker_url)
        self.settings = settings
        self.runtime = Runtime(settings, store_retry_seconds=retry_seconds)
        self.store = self.runtime.store

    def close(self) -> None:
        """Release the client's Redis connections (kombu's shared broker pool stays)."""
        self.runtime.app.close()
        self.store.redis.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @classmethod
    def from_env(cls) -> Client:
        """A client configured from `GRAPHRUNNER_*` environment variables."""
        return cls()

    def submit(
        self,
        graph: str | Path | Graph,
        inputs: Mapping[str, Any] | None = None,
        *,
        run_id: str | None = None,
        capabilities: Sequence[str] | None = None,
    ) -> RunHandle:
        """Start a run of `graph` (a Graph, a file or a graph id); the same run id starts one run."""
        loaded = graph if isinstance(graph, Graph) else load_graph(graph, settings=self.settings)
        run_id = check_run_id(run_id) if run_id is not None else uuid.uuid4().hex
        caps = tuple(capabilities) if capabilities is not None else ("*",)
        snap = engine.begin(loaded, inputs, run_id=run_id, capabilities=caps)
        self.runtime.executor.graphs.put(loaded)
        identity = fingerprint(loaded, snap.inputs, caps)
        created = self.store.create_run(snap, identity)
        if not created.created and created.existing_fingerprint != identity:
            raise RunConflict(
                f"run {run_id} already exists with another graph version, inputs or capabilities"
            )
        existing = snap if created.created else self.store.load_run(run_id)
        if existing is not None and existing.status is RunStatus.RUNNING and existing.step == 0:
            self.runtime.enqueue(existing, loaded)
        return RunHandle(self, run_id)

    def resume(self, run_id: str, state_patch: Mapping[str, Any] | None = None) -> RunHandle:
        """Continue a paused (or failed, cancelled) run at its node, with `state_patch` merged in.

        The patch is checked against the graph's state schema first; the run stays pinned to
        the graph version it started with. Raises `RunNotFound`, `ResumeError` or
        `StateValidationError`, and changes nothing then.
        """
        handle = RunHandle(self, check_run_id(run_id))
        snap = handle.snapshot()
        if state_patch is not None and not isinstance(state_patch, Mapping):
            raise ResumeError(
                f"a state patch must be a mapping of field to value, got {type(state_patch).__name__}"
            )
        graph = self.runtime.executor.graphs.get(snap.graph_hash)
        resumed = engine.resume(graph, snap, datetime.now(UTC), state_patch)
        resumed = resumed.model_copy(update={"phase": 0, "wait": None})
        record = {
            "step": snap.step,
            "node": snap.node,
            "status": "resumed",
            "from": snap.status.value,
            "changed_keys": sorted(state_patch or {}),
        }
        if not self.store.commit(Fence.of(snap), resumed, [record]).committed:
            raise ResumeError(f"run {run_id} changed while it was being resumed; look at it and try again")
        send_next(self.runtime, resumed, graph)
        return handle

    def run(self, run_id: str) -> RunHandle:
        """A handle on an existing run; raises `RunNotFound`."""
        handle = RunHandle(self, check_run_id(run_id))
        handle.snapshot()
        return handle

    def list_runs(
        self, graph_id: str | None = None, status: str | None = None, limit: int = 50, offset: int = 0
    ) -> list[RunSummary]:
        """Runs newest first, by graph id and/or status."""
        if status is not None and status not in {s.value for s in RunStatus}:
            raise GraphrunnerError(
                f"unknown status {status!r}; use one of {', '.join(s.value for s in RunStatus)}"
            )
        return list(self.store.list_runs(graph_id=graph_id, status=status, limit=limit, offset=offset))


class RunHandle:
    """One run: read it, follow its steps, wait for it."""

    def __init__(self, client: Client, run_id: str) -> None:
        self.client = client
        self.id = run_id

    def __repr__(self) -> str:
        return f"RunHandle({self.id!r})"

    def snapshot(self) -> RunSnapshot:
        """The run's current snapshot; raises `RunNotFound`."""
        snap = self.client.store.load_run(self.id, with_path=True)
        if snap is None:
            raise RunNotFound(f"no run with id {self.id!r}")
        return snap

    def status(self) -> str:
        """The run's status: pending, running, paused, completed, ..."""
        return self.snapshot().status.value

    def state(self) -> dict[str, Any]:
        """The run's current state."""
        return dict(self.snapshot().state)

    def steps(self) -> list[dict[str, Any]]:
        """The transcript: one record per step taken."""
        return [e.record for e in self.client.store.steps(self.id)]

    def result(self) -> RunResult:
        """The run as a `RunResult`, whether or not it has finished."""
        return RunResult.from_snapshot(self.snapshot(), self.steps())

    def follow(self, timeout: float | None = None) -> Iterator[dict[str, Any]]:
        """Yield transcript records as they are committed, until the run settles."""
        deadline = None if timeout is None else time.monotonic() + timeout
        last = "0-0"
        while True:
            settled = self.snapshot().status in SETTLED
            block = 0 if settled else _slice(deadline)
            entries = (
                self.client.store.steps(self.id, last)
                if settled
                else (self.client.store.wait_steps(self.id, last, block))
            )
            for entry in entries:
                last = entry.id
                yield entry.record
            if settled:
                return
            if deadline is not None and time.monotonic() >= deadline:
                raise WaitTimeout(f"run {self.id} did not finish within {timeout:g}s")

    def wait(self, timeout: float | None = None) -> RunResult:
        """Block until the run finishes or pauses (following its transcript, not polling)."""
        for _ in self.follow(timeout):
            pass
        return self.result()


def _slice(deadline: float | None) -> int:
    if deadline is None:
        return WAIT_SLICE_MS
    return max(1, min(WAIT_SLICE_MS, int((deadline - time.monotonic()) * 1000)))
