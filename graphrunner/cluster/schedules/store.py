"""Schedules in Redis: their specs, the last tick each has claimed, their next fire times and the
outcome of recent ticks. Every key is on the `{sched}` slot (store/keys.py), so each change is one
Lua script (lua/), the same on one Redis and on a Redis Cluster.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

from pydantic import BaseModel, ConfigDict

from graphrunner.errors import ScheduleError
from graphrunner.model.schedules import ScheduleSpec
from graphrunner.store import keys
from graphrunner.store.query import RunSummary
from graphrunner.store.redis_conn import RedisConnection

KEEP = 1000  # tick outcomes (and run ids) kept per schedule, newest
Outcome = str  # "fired" | "buffered" | "skipped" | "claimed" (decision pending)


class TickOutcome(BaseModel):
    """What became of one tick: `fired` (its run started), `buffered` (its run waits for the
    concurrency key), `skipped` (with a `reason`: `missed`, `overlap`, `paused`, `error: ...`),
    or `claimed` (a beat took it and its decision is not recorded yet)."""

    model_config = ConfigDict(frozen=True)

    tick: int
    outcome: Outcome
    run_id: str | None = None
    reason: str | None = None
    at: float | None = None  # when it was decided (epoch s)

    def to_json(self) -> str:
        """The stored form."""
        return self.model_dump_json(exclude={"tick"}, exclude_none=True)


@dataclass(frozen=True)
class ScheduleRecord:
    """A stored schedule."""

    id: str
    spec: ScheduleSpec
    graph_id: str
    graph_hash: str
    source: str  # "graph" (declared in a graph file) or "api" (added at run time)
    paused: bool
    claimed: int  # the last tick claimed (epoch s); a new schedule's creation time
    created_at: int  # ms
    missed: int  # ticks recorded as skipped because they were older than the catch-up window
    capabilities: tuple[str, ...] | None = None  # of its runs; None: the firing deployment's default


def _script(conn: RedisConnection, name: str) -> Any:
    lua = resources.files("graphrunner.cluster.schedules").joinpath("lua")
    text = lua.joinpath(name).read_text(encoding="utf-8")
    if name in ("claim_ticks.lua", "settle_tick.lua"):
        text = lua.joinpath("record.lua").read_text(encoding="utf-8") + "\n" + text
    return conn.redis.register_script(text)


class ScheduleStore:
    """The schedules of one store's Redis (a `RedisStore`'s connection)."""

    def __init__(self, conn: Any) -> None:
        if not isinstance(conn, RedisConnection):
            raise ScheduleError("schedules need a Redis store (GRAPHRUNNER_REDIS_URL)")
        self.conn = conn
        self._claim = _script(conn, "claim_ticks.lua")
        self._settle = _script(conn, "settle_tick.lua")
        self._put = _script(conn, "put_schedule.lua")
        self._paused = _script(conn, "set_paused.lua")
        self._remove = _script(conn, "remove_schedule.lua")

    def _call(self, fn: Any) -> Any:
        return self.conn._call(fn)

    def put(
        self,
        sid: str,
        spec: ScheduleSpec,
        graph: tuple[str, str],
        source: str,
        now: float,
        capabilities: Sequence[str] | None = None,
    ) -> str:
        """Add or update a schedule of `graph` (id, content hash): 'created', 'updated' or 'kept'
        (see put_schedule.lua)."""
        ks = [keys.schedule(sid), keys.schedule_ids(), keys.schedules_due()]
        args = [sid, spec.model_dump_json(), *graph, int(now), int(now * 1000), source]
        args.append("1" if spec.paused else "0")
        args.append(json.dumps(list(capabilities)) if capabilities is not None else "")
        return str(self._call(lambda: self._put(keys=ks, args=args)))

    def get(self, sid: str) -> ScheduleRecord | None:
        """The schedule `sid`, or None."""
        return _record(sid, self._call(lambda: self.conn.redis.hgetall(keys.schedule(sid))))

    def all(self) -> list[ScheduleRecord]:
        """Every schedule, oldest first."""
        ids = self._call(lambda: self.conn.redis.zrange(keys.schedule_ids(), 0, -1))
        found = [self.get(sid) for sid in ids]
        return [r for r in found if r is not None]

    def due(self, now: float, limit: int = 100) -> list[str]:
        """Schedules whose next tick fires at or before `now` (epoch s)."""
        due = keys.schedules_due()
        return list(self._call(lambda: self.conn.redis.zrangebyscore(due, "-inf", int(now * 1000), 0, limit)))

    def next_due(self, sid: str, when: float) -> None:
        """Look at `sid` again at `when` (epoch s), unless it is paused or gone (ZADD XX)."""
        self._call(lambda: self.conn.redis.zadd(keys.schedules_due(), {sid: int(when * 1000)}, xx=True))

    def claim(
        self,
        sid: str,
        expected: int,
        upto: int,
        next_fire: float,
        now: float,
        missed: list[TickOutcome],
        uncounted: int,
        fire: list[int],
    ) -> int:
        """Claim ticks up to `upto` if the last claimed one is still `expected`: 1 claimed, 0 another
        beat did, -1 gone or paused. `missed` are recorded as they are; `fire` as `claimed`."""
        ks = [keys.schedule(sid), keys.schedules_due(), keys.schedules_unsettled()]
        ks += [keys.schedule_ticks(sid), keys.schedule_log(sid), keys.schedule_runs(sid)]
        args: list[Any] = [sid, expected, upto, int(next_fire * 1000), int(now * 1000), KEEP, uncounted]
        args.append(len(missed))
        for m in missed:
            args += [m.tick, m.to_json()]
        args += fire
        return int(self._call(lambda: self._claim(keys=ks, args=args)))

    def settle(self, sid: str, outcome: TickOutcome) -> bool:
        """Record a tick's outcome (False when the schedule was removed meanwhile)."""
        ks = [keys.schedule(sid), keys.schedules_unsettled(), keys.schedule_ticks(sid)]
        ks += [keys.schedule_log(sid), keys.schedule_runs(sid)]
        args = [sid, outcome.tick, outcome.to_json(), outcome.run_id or "", KEEP]
        return bool(self._call(lambda: self._settle(keys=ks, args=args)))

    def unsettled(self, claimed_before: float, limit: int = 100) -> list[tuple[str, int]]:
        """Claimed ticks with no outcome, claimed before `claimed_before` (epoch s): (id, tick)."""
        where = keys.schedules_unsettled()
        top = int(claimed_before * 1000)
        raw = self._call(lambda: self.conn.redis.zrangebyscore(where, "-inf", top, 0, limit))
        pairs = (str(m).rsplit("\t", 1) for m in raw)
        return [(sid, int(tick)) for sid, tick in pairs]

    def forget(self, sid: str, tick: int) -> None:
        """Drop a claimed tick of a removed schedule from the ticks to decide again."""
        self._call(lambda: self.conn.redis.zrem(keys.schedules_unsettled(), f"{sid}\t{tick}"))

    def set_paused(self, sid: str, paused: bool, now: float) -> bool:
        """Pause or resume; False for an unknown schedule."""
        ks = [keys.schedule(sid), keys.schedules_due()]
        args = [sid, "1" if paused else "0", int(now), int(now * 1000)]
        return bool(self._call(lambda: self._paused(keys=ks, args=args)))

    def remove(self, sid: str) -> bool:
        """Remove a schedule and its tick records; False for an unknown schedule."""
        ks = [keys.schedule(sid), keys.schedule_ids(), keys.schedules_due(), keys.schedules_unsettled()]
        ks += [keys.schedule_ticks(sid), keys.schedule_log(sid), keys.schedule_runs(sid)]
        return bool(self._call(lambda: self._remove(keys=ks, args=[sid])))

    def outcomes(self, sid: str, count: int = 10) -> list[TickOutcome]:
        """The outcomes of the newest `count` recorded ticks, newest first."""
        ticks = self._call(lambda: self.conn.redis.zrevrange(keys.schedule_log(sid), 0, count - 1))
        if not ticks:
            return []
        raw = self._call(lambda: self.conn.redis.hmget(keys.schedule_ticks(sid), ticks))
        return [_outcome(int(t), r) for t, r in zip(ticks, raw, strict=True) if r is not None]

    def outcome(self, sid: str, tick: int) -> TickOutcome | None:
        """The recorded outcome of one tick, or None."""
        raw = self._call(lambda: self.conn.redis.hget(keys.schedule_ticks(sid), str(tick)))
        return _outcome(tick, raw) if raw is not None else None

    def run_ids(self, sid: str) -> list[str]:
        """The runs the schedule started (the newest `KEEP`), newest tick first."""
        return list(self._call(lambda: self.conn.redis.zrevrange(keys.schedule_runs(sid), 0, -1)))

    def index_run(self, sid: str, tick: int, run_id: str) -> None:
        """List a run the schedule started outside its ticks (`trigger`) with its runs."""
        self._call(lambda: self.conn.redis.zadd(keys.schedule_runs(sid), {run_id: tick}))

    def summaries(self, run_ids: list[str]) -> list[RunSummary]:
        """The runs `run_ids` as listed (one pipeline; runs that expired are left out)."""
        fields = ("status", "step", "graph_id", "created_at", "updated_at")

        def read() -> list[Any]:
            pipe = self.conn.redis.pipeline(transaction=False)
            for run_id in run_ids:
                pipe.hmget(self.conn.keys.run(run_id), *fields)
            return list(pipe.execute())

        rows = self._call(read) if run_ids else []
        return [
            RunSummary(run_id, graph or "", status, int(step or 0), int(created or 0), int(updated or 0))
            for run_id, (status, step, graph, created, updated) in zip(run_ids, rows, strict=True)
            if status is not None
        ]

    def key_holder(self, key: str) -> str | None:
        """The run holding concurrency key `key`, or None."""
        holder = self._call(lambda: self.conn.redis.get(keys.concurrency(key)))
        return str(holder) if holder else None

    def key_queued(self, key: str) -> int:
        """How many runs wait for concurrency key `key`."""
        return int(self._call(lambda: self.conn.redis.llen(keys.concurrency_queue(key))))


def _outcome(tick: int, raw: str) -> TickOutcome:
    return TickOutcome(tick=tick, **json.loads(raw))


def _record(sid: str, fields: dict[str, str]) -> ScheduleRecord | None:
    if not fields or "spec" not in fields:
        return None
    return ScheduleRecord(
        id=sid,
        spec=ScheduleSpec.model_validate_json(fields["spec"]),
        graph_id=fields.get("graph_id", ""),
        graph_hash=fields.get("graph_hash", ""),
        source=fields.get("source", "api"),
        paused=fields.get("paused") == "1",
        claimed=int(fields.get("claimed") or 0),
        created_at=int(fields.get("created_at") or 0),
        missed=int(fields.get("missed") or 0),
        capabilities=tuple(json.loads(fields["caps"])) if fields.get("caps") else None,
    )
