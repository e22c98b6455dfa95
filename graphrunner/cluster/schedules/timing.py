"""When a schedule's ticks are: cron times in the schedule's time zone, or multiples of an interval
since the Unix epoch (so every process computes the same ticks), each delayed by its jitter.

Ticks are whole epoch seconds: a tick names itself, its run id and its jitter.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterator
from datetime import UTC, datetime

from graphrunner.model.schedules import ScheduleSpec


def ticks_after(spec: ScheduleSpec, after: float) -> Iterator[int]:
    """The schedule's ticks strictly after `after` (epoch seconds), in order, without end."""
    if spec.every is not None:
        every = int(spec.every)
        tick = (math.floor(after) // every + 1) * every
        while True:
            yield tick
            tick += every
    from cronsim import CronSim

    assert spec.cron is not None
    start = datetime.fromtimestamp(math.floor(after), UTC).astimezone(spec.zone())
    for when in CronSim(spec.cron, start):
        yield int(when.timestamp())


def ticks_between(spec: ScheduleSpec, after: float, upto: float, limit: int) -> list[int]:
    """The ticks in `(after, upto]`, at most `limit` of them (the earliest)."""
    found: list[int] = []
    for tick in ticks_after(spec, after):
        if tick > upto or len(found) >= limit:
            break
        found.append(tick)
    return found


def jitter_of(schedule_id: str, tick: int, jitter: float) -> float:
    """How long after `tick` it fires: a fraction of `jitter` fixed by (schedule, tick), so
    every beat agrees."""
    if jitter <= 0:
        return 0.0
    digest = hashlib.sha256(f"{schedule_id}\n{tick}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 * jitter


def fires_at(schedule_id: str, spec: ScheduleSpec, tick: int) -> float:
    """When `tick` fires (epoch seconds): the tick plus its jitter."""
    return tick + jitter_of(schedule_id, tick, spec.jitter)


def next_fires(schedule_id: str, spec: ScheduleSpec, after: float, count: int = 5) -> list[float]:
    """When the next `count` ticks after `after` fire (epoch seconds, jitter included)."""
    out: list[float] = []
    for tick in ticks_after(spec, after):
        out.append(fires_at(schedule_id, spec, tick))
        if len(out) >= count:
            return out
    return out


def iso(epoch: float) -> str:
    """An epoch time as ISO-8601 UTC (`2026-11-27T10:00:00Z`)."""
    return datetime.fromtimestamp(epoch, UTC).isoformat().replace("+00:00", "Z")


def tick_run_id(schedule_id: str, tick: int) -> str:
    """The run id of a schedule's tick, the same in every process: a second firing of the tick
    submits the same run again, which starts nothing (`Client.submit`)."""
    stamp = datetime.fromtimestamp(tick, UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{_run_prefix(schedule_id)}.{stamp}"


def trigger_run_id(schedule_id: str, token: str) -> str:
    """The run id of a run `trigger` starts outside the ticks (`token` makes it new)."""
    return f"{_run_prefix(schedule_id)}.t{token}"


def _run_prefix(schedule_id: str) -> str:
    """`s.<readable id>.<hash>`: readable, and distinct for ids that differ only in characters a
    run id cannot hold (graph/name and graph-name)."""
    readable = re.sub(r"[^A-Za-z0-9_.-]", "-", schedule_id)[:80]
    digest = hashlib.sha256(schedule_id.encode()).hexdigest()[:8]
    return f"s.{readable}.{digest}"
