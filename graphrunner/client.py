"""The Python client of a graphrunner cluster: submit runs, wait for them, read them.

A producer: it writes runs and their first messages to the cluster's store and broker, and
never runs a step (no executor, no worker machinery is built here).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graphrunner.cluster.runs import forks, history, operations, submission
from graphrunner.cluster.runs.context import Cluster
from graphrunner.cluster.runs.history import HistoryEntry
from graphrunner.cluster.runs.ids import check_run_id
from graphrunner.cluster.worker import sweeper
from graphrunner.cluster.worker.sweeper import SweepReport
from graphrunner.engine import RunSnapshot
from graphrunner.engine.schedule_link import ScheduleLink
from graphrunner.errors import CancelError as CancelError  # re-exported for users
from graphrunner.errors import RunRefused as RunRefused
from graphrunner.graph import Graph
from graphrunner.loading import load_graph
from graphrunner.results import RunResult
from graphrunner.runner.single import StepReport, single_step_sync
from graphrunner.settings import Settings
from graphrunner.store import RunPage, RunQuery, RunSummary, existing_run
from graphrunner.store.query import TimeBound
from graphrunner.streaming import StreamEvent, TranscriptStream, check_mode
from graphrunner.waiting import wait_for

if TYPE_CHECKING:
    from graphrunner.cluster.schedules.admin import Schedules


class Client:
    """Submits runs to, and reads runs from, the Redis a cluster of workers uses."""

    def __init__(
        self,
        redis_url: str | None = None,
        *,
        broker_url: str | None = None,
        settings: Settings | None = None,
        retry_seconds: float = 5.0,
        cluster: Cluster | None = None,
    ) -> None:
        """A client of the cluster `settings` (overridden by `redis_url`, `broker_url`) name, or
        of `cluster`, a connection made already (the unit tests pass one over a MemoryStore)."""
        if cluster is None:
            settings = settings or Settings.from_env()
            if redis_url:
                settings = settings.with_redis(redis_url)
            if broker_url:
                settings = replace(settings, broker_url=broker_url)
            cluster = Cluster.connect(settings, retry_seconds=retry_seconds)
        self.settings = cluster.settings
        self.cluster = cluster
        self.store = cluster.store

    def close(self) -> None:
        """Release the client's connections."""
        self.cluster.close()

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
        state: Mapping[str, Any] | None = None,
        run_id: str | None = None,
        capabilities: Sequence[str] | None = None,
        concurrency_key: str | None = None,
        when_busy: str = "queue",
        traceparent: str | None = None,
        schedule: ScheduleLink | None = None,
    ) -> RunHandle:
        """Start a run of `graph` (a Graph, a file or a graph id); the same run id starts one run.

        `state` is the initial state, over the declared defaults (as `Graph.invoke(state=...)`).

        Without `capabilities` the run gets the deployment's `default_capabilities`. Bad
        capabilities (`InvalidCapabilities`), inputs or an oversized state raise before
        anything is stored. With a `concurrency_key`, at most one run per key is active:
        while another holds it, the run waits as `pending` (`when_busy="queue"`) or is not
        submitted at all (`"refuse"`: raises `RunRefused`). The same run id with another
        graph version, inputs, state, capabilities or key raises `RunConflict`. The run's
        record and its first step's message are written at once: a submitted run never
        waits for a message that was lost.

        The run's spans form one OpenTelemetry trace under the caller's current span (a web
        request's, when the application traces), or under `traceparent` (a W3C header value)
        when given: one that is not a valid W3C traceparent raises `GraphrunnerError`.
        `schedule` is set by the scheduler: the schedule and tick the run is started for.
        """
        loaded = graph if isinstance(graph, Graph) else load_graph(graph, settings=self.settings)
        started = submission.submit(
            self.cluster,
            loaded,
            inputs,
            state=state,
            run_id=run_id,
            capabilities=capabilities,
            concurrency_key=concurrency_key,
            when_busy=when_busy,
            traceparent=traceparent,
            schedule=schedule,
        )
        return RunHandle(self, started)

    def resume(
        self,
        run_id: str,
        state_patch: Mapping[str, Any] | None = None,
        *,
        upgrade: str | Path | Graph | None = None,
    ) -> RunHandle:
        """Continue a failed, cancelled, paused or stalled run at its node, at its step count.

        `state_patch` is checked against the graph's state schema and merged in. The run stays
        pinned to the graph version it started with; `upgrade` (a Graph, a file or a graph
        id of the same graph) re-pins it to that version, if the run's node is still in it.
        A run paused below (a child run paused) resumes the paused run instead, with the patch
        (its state's). A running run can be resumed only when it is stalled (no progress for
        `GRAPHRUNNER_STALL_AFTER` seconds). Raises `RunNotFound`, `ResumeError` or
        `StateValidationError`, and changes nothing then.
        """
        run_id = check_run_id(run_id)
        graph = None
        if upgrade is not None:
            graph = upgrade if isinstance(upgrade, Graph) else load_graph(upgrade, settings=self.settings)
        operations.resume(self.cluster, run_id, state_patch, upgrade=graph)
        return RunHandle(self, run_id)

    def history(self, run_id: str) -> list[HistoryEntry]:
        """The state after each step of a run, as far as its history is kept (`HistoryEntry`; the
        first is where it starts: step 0, or a fork's step). Raises `RunNotFound`."""
        return list(history.read(self.store, check_run_id(run_id)).entries)

    def state_at(self, run_id: str, step: int) -> dict[str, Any]:
        """The run's state after step `step` (0: its initial state). Raises `RunNotFound`, or
        `HistoryUnavailable` naming the step and why (no such step, before a fork's start, past
        the history budget)."""
        return dict(history.read(self.store, check_run_id(run_id)).at(step).state)

    def fork(
        self,
        run_id: str,
        step: int,
        state_patch: Mapping[str, Any] | None = None,
        *,
        upgrade: str | Path | Graph | None = None,
        new_run_id: str | None = None,
    ) -> RunHandle:
        """Start a new run after step `step` of run `run_id`: at the node that step led to, with the
        state it left plus `state_patch`, on the same graph version unless `upgrade`d (a Graph, a
        file or a graph id of the same graph). Nothing up to that step runs again; the new run's
        `forked_from` names the origin. Raises `RunNotFound`, `HistoryUnavailable`, `ForkError`,
        `StateValidationError` or `RunConflict`, and writes nothing then."""
        graph = None
        if upgrade is not None:
            graph = upgrade if isinstance(upgrade, Graph) else load_graph(upgrade, settings=self.settings)
        snap = forks.fork(
            self.cluster, check_run_id(run_id), step, state_patch, upgrade=graph, new_id=new_run_id
        )
        return RunHandle(self, snap.run_id)

    def cancel(self, run_id: str) -> RunHandle:
        """Cancel a run that has not finished (and its active child runs).

        Nothing more of it starts: a step in flight completes but is not committed, queued
        foreach items are skipped. Raises `RunNotFound`, or `CancelError` for a finished run.
        """
        operations.cancel(self.cluster, check_run_id(run_id))
        return RunHandle(self, run_id)

    @functools.cached_property
    def schedules(self) -> Schedules[RunHandle]:
        """The cluster's schedules: add, list, pause, trigger, backfill, remove... (docs/schedules.md)."""
        from graphrunner.cluster.schedules.admin import Schedules

        return Schedules(self.cluster, handle=lambda run_id: RunHandle(self, run_id))

    def sweep(self) -> SweepReport:
        """One sweeper pass: send the work of stalled runs again (see `graphrunner sweep`)."""
        return sweeper.sweep(self.cluster)

    def run(self, run_id: str) -> RunHandle:
        """A handle on an existing run; raises `RunNotFound`."""
        handle = RunHandle(self, check_run_id(run_id))
        handle.snapshot()
        return handle

    def stream(
        self, run_id: str, mode: str = "updates", timeout: float | None = None
    ) -> Iterator[StreamEvent]:
        """The events of an existing run as they commit, then its result (see `RunHandle.stream`)."""
        return self.run(run_id).stream(mode, timeout)

    def list_runs(
        self,
        graph_id: str | None = None,
        status: str | None = None,
        limit: int = 50,
        offset: int = 0,
        *,
        since: TimeBound = None,
        until: TimeBound = None,
        cursor: str | None = None,
        schedule: str | None = None,
    ) -> list[RunSummary]:
        """Runs newest first, by graph id, status and creation time (see `list_page`)."""
        page = self.list_page(
            graph_id, status, limit, offset, since=since, until=until, cursor=cursor, schedule=schedule
        )
        return list(page.runs)

    def list_page(
        self,
        graph_id: str | None = None,
        status: str | None = None,
        limit: int = 50,
        offset: int = 0,
        *,
        since: TimeBound = None,
        until: TimeBound = None,
        cursor: str | None = None,
        schedule: str | None = None,
    ) -> RunPage:
        """A page of runs, newest first, and the cursor of the next page (None on the last one).

        Runs created in `[since, until)` (datetimes, naive ones in UTC, or epoch ms); `limit`
        1-1000; pass the `next_cursor` of a page as `cursor` (same filters) for the next one,
        or skip `offset` runs. Raises `InvalidRunQuery` (a `GraphrunnerError`) for bad values.
        `schedule`: only runs that schedule started (its newest 1000 ticks; `ScheduleNotFound`).
        """
        query = RunQuery.build(graph_id, status, limit, offset, since=since, until=until, cursor=cursor)
        if schedule is not None:
            return self.schedules.page(schedule, query)
        return self.store.page_runs(query)

    def step(
        self,
        graph: str | Path | Graph,
        node: str,
        state: Mapping[str, Any] | None = None,
        inputs: Mapping[str, Any] | None = None,
        capabilities: Sequence[str] | None = None,
    ) -> StepReport:
        """Run one node of `graph` against `state` in this process; no run is created or touched.

        `state` is merged over the declared defaults and checked against the state schema.
        Without `capabilities` the step gets the deployment's `default_capabilities`. Raises
        `UnknownNode`, `StateValidationError` or `LimitExceeded` before anything runs; a node
        that fails is reported in the `StepReport` (`status` `failed`, `error`), not raised.
        """
        loaded = graph if isinstance(graph, Graph) else load_graph(graph, settings=self.settings)
        return single_step_sync(
            loaded, node, state, inputs=inputs, capabilities=capabilities, settings=self.settings
        )


class RunHandle:
    """One run: read it, follow its steps, wait for it."""

    def __init__(self, client: Client, run_id: str) -> None:
        self.client = client
        self.id = run_id

    def __repr__(self) -> str:
        return f"RunHandle({self.id!r})"

    def cancel(self) -> RunHandle:
        """Cancel the run (see `Client.cancel`)."""
        return self.client.cancel(self.id)

    def snapshot(self) -> RunSnapshot:
        """The run's current snapshot; raises `RunNotFound`."""
        return existing_run(self.client.store, self.id, with_path=True)

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
        """Yield transcript records as they are committed, until the run settles.

        Blocks on the run's transcript stream; the records of the commit that settles the run
        say so. The run's status is read at the start (with the records there are, one round
        trip), and when nothing came for a second.
        """
        for batch in self._transcript().batches("0-0", timeout):
            for entry in batch:
                yield entry.record

    def stream(self, mode: str = "updates", timeout: float | None = None) -> Iterator[StreamEvent]:
        """Yield the run's events as they commit, until it finishes or pauses; then its result.

        `updates`: a `RecordEvent` per transcript record, past and new, with the new values of
        the keys it changed. `values`: a `StateEvent` (the state now: earlier records are not
        replayed), then a `RecordEvent` per new record with the whole state after it. The last
        event is a `ResultEvent` (the `RunResult` of `wait`). The state is folded from the
        values the records carry; it is read only for a value too large to be carried (one
        read, while the stream keeps up with the run). `timeout` as `wait`'s (`WaitTimeout`).
        Treat the mappings the events hold as read-only: later events share their values.
        """
        return self._transcript().events(check_mode(mode) == "values", timeout)

    def _transcript(self) -> TranscriptStream:
        """The run's transcript, to follow (graphrunner/streaming.py)."""
        return TranscriptStream(self.client.store, self.id)

    def wait(self, timeout: float | None = None) -> RunResult:
        """Block until the run finishes or pauses, then return its result; `WaitTimeout` after
        `timeout` seconds. Not polling: the commit that settles the run wakes the client
        (graphrunner/waiting.py)."""
        return wait_for(self.client.store, self.id, timeout)
