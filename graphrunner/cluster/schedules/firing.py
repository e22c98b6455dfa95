"""`Scheduler`: fire the schedules' due ticks, each once however many beats and workers call it.

A pass reads the schedules whose next fire time has come (one ZRANGEBYSCORE when none has),
and for each one *claims* its due ticks with a compare-and-set on the last claimed tick: of two
beats that read the same schedule, one claims and the other changes nothing. Ticks older than
the catch-up window are recorded `skipped` (`missed`); the others are decided by the overlap
policy and their outcome recorded. A tick is submitted under a run id derived from the schedule
and the tick, so a tick whose beat died between claim and record is decided again, safely, by
any beat `SETTLE_AFTER` seconds later: submitting the same run id starts nothing new.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

from graphrunner.cluster.runs import submission
from graphrunner.cluster.schedules.store import ScheduleRecord, ScheduleStore, TickOutcome
from graphrunner.cluster.schedules.timing import fires_at, iso, tick_run_id, ticks_after, trigger_run_id
from graphrunner.engine.schedule_link import ScheduleLink
from graphrunner.errors import CancelError, GraphrunnerError, RunNotFound, RunRefused, StoreUnavailable

if TYPE_CHECKING:
    from graphrunner.cluster.runs.context import Cluster

log = logging.getLogger("graphrunner.schedules")
SETTLE_AFTER = 30.0  # seconds a claimed tick may go without an outcome before another beat decides it
MAX_TICKS = 1000  # ticks one pass looks at per schedule (a long outage is caught up over passes)
MISSED_RECORDED = 100  # missed ticks recorded one by one per pass; more are only counted
RETRY_BROKEN = 60.0  # seconds before a schedule whose firing raised is looked at again
FAR = 366 * 86400.0  # a cron that never fires again is looked at once a year


class Scheduler:
    """Fires due ticks of the schedules in one cluster's store, by the time `clock` tells."""

    def __init__(self, cluster: Cluster, clock: Callable[[], float] = time.time) -> None:
        self.cluster = cluster
        self.clock = clock
        self.store = ScheduleStore(cluster.store)
        self._next_settle_check = 0.0

    def fire_due(self, now: float | None = None) -> list[TickOutcome]:
        """Claim and decide every due tick; re-decide ticks claimed long ago and never recorded."""
        now = self.clock() if now is None else now
        outcomes: list[TickOutcome] = []
        for sid in self.store.due(now):
            try:
                outcomes += self.fire_schedule(sid, now)
            except StoreUnavailable:
                raise
            except Exception:  # one broken schedule (a spec stored by another version) stops no other
                log.exception("schedule %s: its due ticks could not be fired; trying again in a minute", sid)
                self.store.next_due(sid, now + RETRY_BROKEN)
        if now >= self._next_settle_check:  # a second read, every few seconds only
            self._next_settle_check = now + SETTLE_AFTER / 6
            for sid, tick in self.store.unsettled(now - SETTLE_AFTER):
                record = self.store.get(sid)
                if record is not None:
                    outcomes.append(self.decide(record, tick, now))
                else:
                    self.store.forget(sid, tick)  # removed meanwhile
        return outcomes

    def fire_schedule(self, sid: str, now: float) -> list[TickOutcome]:
        """Claim the due ticks of one schedule and decide them (nothing if another beat claimed them)."""
        record = self.store.get(sid)
        if record is None or record.paused:
            return []
        ahead, start = skip_ahead(record, now)
        missed, fire, upto, next_fire = plan(record, now, start)
        if upto == record.claimed:
            self.store.next_due(sid, next_fire)
            return []
        shown = [
            TickOutcome(tick=t, outcome="skipped", reason="missed", at=now) for t in missed[-MISSED_RECORDED:]
        ]
        uncounted = ahead + len(missed) - len(shown)
        if self.store.claim(sid, record.claimed, upto, next_fire, now, shown, uncounted, fire) != 1:
            return []  # claimed by another beat, or paused or removed meanwhile
        if missed:
            log.warning(
                "schedule %s: %d tick(s) older than its catch-up window skipped", sid, ahead + len(missed)
            )
        return [*shown, *(self.decide(record, tick, now) for tick in fire)]

    def decide(
        self, record: ScheduleRecord, tick: int, now: float, overlap: str | None = None
    ) -> TickOutcome:
        """Start (or buffer, or skip) the run of one claimed tick and record the outcome."""
        link = ScheduleLink(id=record.id, tick=tick)
        try:
            outcome = self.start(record, tick_run_id(record.id, tick), link, now, overlap)
        except StoreUnavailable:
            raise  # left claimed: decided again later
        except GraphrunnerError as exc:
            log.warning("schedule %s: tick %s not started: %s", record.id, iso(tick), exc)
            outcome = TickOutcome(tick=tick, outcome="skipped", reason=f"error: {exc}"[:500], at=now)
        self.store.settle(record.id, outcome)
        return outcome

    def start(
        self, record: ScheduleRecord, run_id: str, link: ScheduleLink, now: float, overlap: str | None = None
    ) -> TickOutcome:
        """Submit the run `run_id` of `record` as its overlap policy says; the outcome, unrecorded."""
        tick, policy, spec = link.tick, overlap or record.spec.overlap, record.spec
        if self.cluster.store.run_fields(run_id):  # started before, by a beat that died before recording
            return self._outcome(tick, run_id, now)
        key = spec.key_for(record.id, policy)
        if key is not None and policy == "buffer_one" and self._buffer_full(key):
            return TickOutcome(
                tick=tick, outcome="skipped", reason="overlap: a run is already buffered", at=now
            )
        if key is not None and policy in ("cancel_other", "terminate_other"):
            self._cancel_holder(record.id, key, policy, link)
        graph = self.cluster.graphs.get(record.graph_hash)
        try:
            submission.submit(
                self.cluster,
                graph,  # type: ignore[arg-type]  # the cache holds loaded `Graph`s
                spec.inputs,
                run_id=run_id,
                concurrency_key=key,
                when_busy="refuse" if policy == "skip" else "queue",
                capabilities=record.capabilities,
                schedule=link,
            )
        except RunRefused:
            return TickOutcome(tick=tick, outcome="skipped", reason="overlap: a run is active", at=now)
        return self._outcome(tick, run_id, now)

    def trigger(self, record: ScheduleRecord, overlap: str | None = None) -> TickOutcome:
        """Start a run now, outside the ticks, under its own run id (the overlap policy applies)."""
        now = self.clock()
        run_id = trigger_run_id(record.id, uuid.uuid4().hex[:12])
        outcome = self.start(
            record, run_id, ScheduleLink(id=record.id, tick=int(now), trigger=True), now, overlap
        )
        if outcome.run_id is not None:
            self.store.index_run(record.id, int(now), outcome.run_id)
        return outcome

    def _outcome(self, tick: int, run_id: str, now: float) -> TickOutcome:
        pending = self.cluster.store.status_of(run_id) == "pending"
        return TickOutcome(tick=tick, outcome="buffered" if pending else "fired", run_id=run_id, at=now)

    def _buffer_full(self, key: str) -> bool:
        """buffer_one: a run holds the key and another already waits for it."""
        return self.store.key_holder(key) is not None and self.store.key_queued(key) > 0

    def _cancel_holder(self, sid: str, key: str, policy: str, link: ScheduleLink) -> None:
        """cancel_other / terminate_other: cancel the schedule's run that holds the key (a run of
        something else that shares the key is left alone: the new run waits for it)."""
        from graphrunner.cluster.runs import operations

        holder = self.store.key_holder(key)
        if holder is None:
            return
        snap = self.cluster.store.load_run(holder)
        if snap is None or snap.schedule is None or snap.schedule.id != sid:
            return
        reason = f"schedule {sid} ({policy}): tick {iso(link.tick)} started a new run"
        with contextlib.suppress(RunNotFound, CancelError):  # finished meanwhile
            operations.cancel(self.cluster, holder, reason=reason)


def skip_ahead(record: ScheduleRecord, now: float) -> tuple[int, int]:
    """An interval schedule far behind (a long outage): how many of its oldest ticks are missed
    without being looked at one by one, and the tick to look on from (the last claimed one
    otherwise). The newest `MISSED_RECORDED` missed ticks are left to be recorded."""
    spec = record.spec
    if spec.every is None:
        return 0, record.claimed
    every = int(spec.every)
    horizon = now - spec.catchup_window - spec.jitter  # a tick before it is certainly missed
    last = (math.ceil(horizon / every) - 1) * every
    count = last // every - record.claimed // every
    if count <= MISSED_RECORDED:
        return 0, record.claimed
    return count - MISSED_RECORDED, last - MISSED_RECORDED * every


def plan(
    record: ScheduleRecord, now: float, after: int | None = None
) -> tuple[list[int], list[int], int, float]:
    """The ticks after `after` (the last claimed one) that are due at `now`: (missed, to fire,
    the last of them, when the next one fires). A tick is due at its time plus its jitter; it is
    missed when it is due more than the catch-up window ago."""
    spec = record.spec
    upto = record.claimed if after is None else after
    missed: list[int] = []
    fire: list[int] = []
    for tick in ticks_after(spec, upto):
        at = fires_at(record.id, spec, tick)
        if at > now:
            return missed, fire, upto, at
        if len(missed) + len(fire) >= MAX_TICKS:
            return missed, fire, upto, now  # the rest on the next pass
        (missed if now - at > spec.catchup_window else fire).append(tick)
        upto = tick
    return missed, fire, upto, now + FAR
