"""`Schedules` (`Client.schedules`): add, list, pause, resume, trigger, backfill and remove schedules.

A schedule's id is `<graph id>/<name>`. Schedules declared in a graph file (`config.schedules`)
are registered by `register` (workers and `graphrunner beat` do it at start-up for every graph
on GRAPHRUNNER_GRAPH_PATH) with source `graph`; `add` registers one with source `api`, and a
graph's declaration never replaces a schedule added at run time.
"""

from __future__ import annotations

import builtins
import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from graphrunner.cluster.schedules.firing import Scheduler
from graphrunner.cluster.schedules.store import ScheduleRecord, TickOutcome
from graphrunner.cluster.schedules.timing import next_fires, ticks_after
from graphrunner.errors import GraphrunnerError, ScheduleError, ScheduleNotFound
from graphrunner.model.schedules import SCHEDULE_NAME, ScheduleSpec, check_schedule_id
from graphrunner.store.query import page_of

if TYPE_CHECKING:
    from graphrunner.cluster.runs.context import Cluster
    from graphrunner.graph import Graph
    from graphrunner.store import RunPage, RunQuery

log = logging.getLogger("graphrunner.schedules")
MAX_BACKFILL = 1000  # ticks one backfill may start
H = TypeVar("H")  # what `trigger` answers for the run it started
NEXT = 5  # next fire times shown
RECENT = 10  # recent tick outcomes shown


class ScheduleInfo(BaseModel):
    """A schedule as listed: its spec, graph, source, whether it is paused, when it fires next
    (the next `NEXT` times, jitter included, UTC) and its most recent tick outcomes, newest first."""

    model_config = ConfigDict(frozen=True)

    id: str
    graph_id: str
    source: str
    spec: ScheduleSpec
    paused: bool
    next_fires: tuple[datetime, ...]
    recent: tuple[TickOutcome, ...]
    missed: int  # ticks skipped because they were older than the catch-up window, ever
    capabilities: tuple[str, ...] | None  # of its runs; None: the default of the process firing them


def schedule_id(graph_id: str, name: Any) -> str:
    """`<graph id>/<name>`; raises `ScheduleError` for a bad name or id."""
    if not isinstance(name, str) or not SCHEDULE_NAME.match(name):
        raise ScheduleError(
            f"invalid schedule name {name!r:.80} of graph {graph_id!r}: use 1-64 letters, digits, "
            "'_', '.' or '-', starting with a letter or digit"
        )
    return check_schedule_id(f"{graph_id}/{name}")


def make_spec(sid: str, fields: Mapping[str, Any]) -> ScheduleSpec:
    """A checked spec; raises `ScheduleError` naming the schedule and the field."""
    try:
        return ScheduleSpec.model_validate(dict(fields))
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'schedule'}: {e['msg']}" for e in exc.errors()
        )
        raise ScheduleError(f"schedule {sid}: {problems}") from None


class Schedules(Generic[H]):
    """The schedules of a cluster. `trigger` answers the run it started as `handle` makes it (a
    `RunHandle` for `Client.schedules`)."""

    def __init__(
        self, cluster: Cluster, handle: Callable[[str], H], clock: Callable[[], float] = time.time
    ) -> None:
        self.cluster = cluster
        self.settings = cluster.settings
        self.handle = handle
        self.clock = clock
        self.scheduler = Scheduler(cluster, clock)
        self.store = self.scheduler.store

    def add(
        self,
        graph: str | Path | Graph,
        name: str,
        *,
        cron: str | None = None,
        every: float | str | None = None,
        timezone: str = "UTC",
        inputs: Mapping[str, Any] | None = None,
        overlap: str = "skip",
        catchup_window: float | str = 3600,
        jitter: float | str = 0,
        concurrency_key: str | None = None,
        paused: bool = False,
        capabilities: Sequence[str] | None = None,
    ) -> ScheduleInfo:
        """Add (or replace) the schedule `<graph id>/<name>`, pinned to this version of `graph`.

        Its first tick is the first one after now. Its runs carry `capabilities` (None: the
        `default_capabilities` of the worker or beat that fires them). Raises `ScheduleError`
        naming the field for a bad cron, time zone, duration or overlap policy, or inputs the
        graph refuses.
        """
        loaded = self._graph(graph)
        sid = schedule_id(loaded.id, name)
        fields = {"cron": cron, "every": every, "timezone": timezone, "inputs": dict(inputs or {})}
        fields |= {"overlap": overlap, "catchup_window": catchup_window, "jitter": jitter}
        fields |= {"concurrency_key": concurrency_key, "paused": paused}
        spec = make_spec(sid, fields)
        caps = _capabilities(sid, capabilities)
        self._put(sid, spec, loaded, "api", caps)
        return self.get(sid)

    def register(self, graph: str | Path | Graph) -> builtins.list[ScheduleInfo]:
        """Register the schedules `graph` declares (`config.schedules`), source `graph`; one that
        was added at run time under the same id is kept as it is."""
        loaded = self._graph(graph)
        for name, spec in loaded.spec.config.schedules.items():
            sid = schedule_id(loaded.id, name)
            if self._put(sid, spec, loaded, "graph") == "kept":
                log.warning("schedule %s: declared in the graph, but one added at run time is kept", sid)
        return [self.get(schedule_id(loaded.id, n)) for n in loaded.spec.config.schedules]

    def _put(
        self, sid: str, spec: ScheduleSpec, graph: Graph, source: str, caps: tuple[str, ...] | None = None
    ) -> str:
        self._check_inputs(sid, spec, graph, caps)
        self.cluster.graphs.put(graph)
        where = (graph.id, graph.content_hash)
        return self.store.put(sid, spec, where, source, self.clock(), caps)

    def list(self) -> list[ScheduleInfo]:
        """Every schedule, oldest first."""
        return [self._info(r) for r in self.store.all()]

    def get(self, sid: str) -> ScheduleInfo:
        """One schedule; raises `ScheduleNotFound`."""
        return self._info(self._record(sid))

    def pause(self, sid: str) -> ScheduleInfo:
        """Stop firing ticks (a tick already claimed still runs); raises `ScheduleNotFound`."""
        return self._set_paused(sid, True)

    def resume(self, sid: str) -> ScheduleInfo:
        """Fire again from the next tick after now (ticks while paused never fire)."""
        return self._set_paused(sid, False)

    def _set_paused(self, sid: str, paused: bool) -> ScheduleInfo:
        if not self.store.set_paused(check_schedule_id(sid), paused, self.clock()):
            raise ScheduleNotFound(f"no schedule {sid!r}")
        return self.get(sid)

    def trigger(self, sid: str, overlap: str | None = None) -> H:
        """Start a run now, outside the ticks, under a run id of its own; the schedule's overlap
        policy applies (or `overlap`): raises `ScheduleError` when it skips the run."""
        record = self._record(sid)
        outcome = self.scheduler.trigger(record, self._overlap(overlap))
        if outcome.run_id is None:
            raise ScheduleError(f"schedule {sid}: triggered run not started ({outcome.reason})")
        return self.handle(outcome.run_id)

    def backfill(
        self, sid: str, start: datetime | float, end: datetime | float, overlap: str | None = None
    ) -> builtins.list[TickOutcome]:
        """Fire the ticks in `[start, end)` (datetimes, naive ones UTC, or epoch seconds), oldest
        first, under their own tick's run id: a tick that already started a run is not started
        again. The schedule's overlap policy applies (or `overlap`: `allow_all` starts them all)."""
        record = self._record(sid)
        low, high = _epoch("start", start), _epoch("end", end)
        if high <= low:
            raise ScheduleError(f"schedule {sid}: backfill start must be before its end")
        ticks: builtins.list[int] = []
        for tick in ticks_after(record.spec, math.ceil(low) - 1):
            if tick >= high:
                break
            if len(ticks) >= MAX_BACKFILL:
                raise ScheduleError(
                    f"schedule {sid}: more than {MAX_BACKFILL} ticks to backfill; split the range"
                )
            ticks.append(tick)
        policy, now = self._overlap(overlap), self.clock()
        return [self._backfill_one(record, tick, now, policy) for tick in ticks]

    def _backfill_one(self, record: ScheduleRecord, tick: int, now: float, policy: str | None) -> TickOutcome:
        done = self.store.outcome(record.id, tick)
        if done is not None and done.outcome in ("fired", "buffered"):
            return done
        return self.scheduler.decide(record, tick, now, policy)

    def remove(self, sid: str) -> None:
        """Remove a schedule (its runs stay); raises `ScheduleNotFound`."""
        if not self.store.remove(check_schedule_id(sid)):
            raise ScheduleNotFound(f"no schedule {sid!r}")

    def runs(self, sid: str) -> builtins.list[str]:
        """The ids of the runs the schedule started (its newest ticks), newest first."""
        self._record(sid)
        return self.store.run_ids(sid)

    def page(self, sid: str, query: RunQuery) -> RunPage:
        """The page `query` asks for of the runs the schedule started."""
        return page_of(self.store.summaries(self.runs(sid)), query)

    def _record(self, sid: str) -> ScheduleRecord:
        record = self.store.get(check_schedule_id(sid))
        if record is None:
            raise ScheduleNotFound(f"no schedule {sid!r}")
        return record

    def _info(self, record: ScheduleRecord) -> ScheduleInfo:
        now = self.clock()
        upcoming = [] if record.paused else next_fires(record.id, record.spec, max(now, record.claimed), NEXT)
        return ScheduleInfo(
            id=record.id,
            graph_id=record.graph_id,
            source=record.source,
            spec=record.spec,
            paused=record.paused,
            next_fires=tuple(datetime.fromtimestamp(t, UTC) for t in upcoming),
            recent=tuple(self.store.outcomes(record.id, RECENT)),
            missed=record.missed,
            capabilities=record.capabilities,
        )

    def _graph(self, graph: str | Path | Graph) -> Graph:
        from graphrunner.graph import Graph
        from graphrunner.loading import load_graph

        return graph if isinstance(graph, Graph) else load_graph(graph, settings=self.settings)

    def _check_inputs(self, sid: str, spec: ScheduleSpec, graph: Graph, caps: tuple[str, ...] | None) -> None:
        from graphrunner import engine

        caps = self.settings.default_capabilities if caps is None else caps
        try:
            engine.begin(graph, spec.inputs, run_id="schedule-check", capabilities=caps)
        except GraphrunnerError as exc:
            raise ScheduleError(f"schedule {sid}: inputs: {exc}") from None

    @staticmethod
    def _overlap(overlap: str | None) -> str | None:
        from graphrunner.model.schedules import OVERLAPS

        if overlap is not None and overlap not in OVERLAPS:
            raise ScheduleError(f"unknown overlap policy {overlap!r}; use one of {', '.join(OVERLAPS)}")
        return overlap


def _capabilities(sid: str, capabilities: Sequence[str] | None) -> tuple[str, ...] | None:
    if capabilities is None:
        return None
    if isinstance(capabilities, str) or not all(isinstance(c, str) and c for c in capabilities):
        raise ScheduleError(f"schedule {sid}: capabilities must be a list of non-empty strings")
    return tuple(capabilities)


def _epoch(name: str, value: datetime | float) -> float:
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=UTC)).timestamp()
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    raise ScheduleError(f"backfill {name} must be a datetime or epoch seconds, got {value!r:.60}")
