"""Stream events: a run's transcript records as typed events as they commit, then its result.

Two modes, as LangGraph's `stream_mode`:
- `updates`: one `RecordEvent` per transcript record (a step taken, or what happened around
  one: a retry, a sleep, a cancel, a resume), with the new values of the keys it changed;
- `values`: first a `StateEvent`, the state as the stream found it, then `RecordEvent`s that
  also carry the whole state after their record.
Both end with a `ResultEvent`. A step record carries the new values of its changed keys
(`changed_values`, up to a size): the state is folded from them, not read per step.

`TranscriptStream` follows a cluster run's transcript in its store (the client's `follow`,
`wait` and `stream` are it); `Graph.stream` makes the same events in process
(graphrunner/runner/stream.py). `RecordEvent` was called `StepEvent` until the engine's event
of one step took that name; the old name still imports, with a `DeprecationWarning`.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from graphrunner.engine import RunSnapshot, RunStatus
from graphrunner.errors import GraphrunnerError, RunNotFound, WaitTimeout
from graphrunner.results import RunResult
from graphrunner.services.records import AnyRecord, StepRecord, changes, parse

if TYPE_CHECKING:
    from graphrunner.store.base import StepEntry, Store

StreamMode = Literal["updates", "values"]
MODES = ("updates", "values")
CARRIED = ("changed_values", "values_omitted")  # record fields a RecordEvent shows as updates, omitted
WAIT_SLICE_MS = 1000  # a follower blocks on the transcript this long, then reads the run's status
PIN_TRIES = 20  # mode `values` reads the state between two commits of a busy run this often
SETTLED = frozenset(RunStatus) - {RunStatus.PENDING, RunStatus.RUNNING}  # finished or paused


@dataclass(frozen=True, kw_only=True)
class RecordEvent:
    """One transcript record: a step taken (`ok`, `error`, `end`, `paused`) or what happened
    around one (`retry`, `sleeping`, `cancelled`, `resumed`, `admitted`, `swept`).

    `updates` maps each changed key to its new value (after the reducers); a changed key whose
    value was too large for the record and could not be read at the step is in `omitted`.
    `state` is the whole state after the record (mode `values`; None in mode `updates`, or when
    an omitted value could not be read). `record` is the transcript record as stored, and
    `error` its error, both as JSON.
    """

    run_id: str
    step: int
    node: str | None
    status: str
    duration_ms: float | None = None
    changed_keys: tuple[str, ...] = ()
    updates: Mapping[str, Any] = field(default_factory=dict)
    omitted: tuple[str, ...] = ()
    error: dict[str, Any] | None = None
    state: dict[str, Any] | None = None
    record: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def of(
        cls,
        run_id: str,
        record: AnyRecord,
        updates: Mapping[str, Any],
        omitted: tuple[str, ...] = (),
        state: dict[str, Any] | None = None,
    ) -> RecordEvent:
        """The event of transcript record `record`."""
        shown = record.to_dict()
        return cls(
            run_id=run_id,
            step=record.step,
            node=record.node,
            status=record.status,
            duration_ms=record.duration_ms if isinstance(record, StepRecord) else None,
            changed_keys=changes(record)[0],
            updates=updates,
            omitted=omitted,
            error=shown.get("error"),  # as stored, whatever version wrote it
            state=state,
            record=shown,
        )

    def to_dict(self) -> dict[str, Any]:
        """`{"event": "step", run_id, <the record's fields>, updates, omitted, state}`."""
        shown = {k: v for k, v in self.record.items() if k not in CARRIED}
        extra = {"updates": dict(self.updates), "omitted": list(self.omitted), "state": self.state}
        return {"event": "step", "run_id": self.run_id, **shown, **extra}


@dataclass(frozen=True, kw_only=True)
class StateEvent:
    """Mode `values`: the run's state when the stream started, after `step` steps."""

    run_id: str
    step: int
    node: str | None
    status: str
    state: dict[str, Any]

    @classmethod
    def of(cls, snap: RunSnapshot) -> StateEvent:
        """The event of the run as `snap` holds it."""
        return cls(
            run_id=snap.run_id,
            step=snap.step,
            node=snap.node,
            status=snap.status.value,
            state=dict(snap.state),
        )

    def to_dict(self) -> dict[str, Any]:
        """`{"event": "state", run_id, step, node, status, state}`."""
        return {"event": "state", **asdict(self)}


@dataclass(frozen=True)
class ResultEvent:
    """The last event: the run has finished or paused; its `RunResult`."""

    result: RunResult

    def to_dict(self) -> dict[str, Any]:
        """`{"event": "result", <the result object of run --json>}`."""
        return {"event": "result", **self.result.to_dict()}


StreamEvent = RecordEvent | StateEvent | ResultEvent


def __getattr__(name: str) -> Any:
    """`StepEvent`: the old name of `RecordEvent`, deprecated."""
    if name == "StepEvent":
        message = "graphrunner.streaming.StepEvent is deprecated: it is now RecordEvent"
        warnings.warn(message, DeprecationWarning, stacklevel=2)
        return RecordEvent
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def check_mode(mode: str) -> StreamMode:
    """`mode` if it is a stream mode; else `GraphrunnerError`."""
    if mode == "updates":
        return "updates"
    if mode == "values":
        return "values"
    raise GraphrunnerError(f"stream mode must be one of {', '.join(MODES)}, got {mode!r}")


def carried(record: AnyRecord) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The new values a record carries for its changed keys, and the changed keys it lacks."""
    keys, values = changes(record)
    return {k: values[k] for k in keys if k in values}, tuple(k for k in keys if k not in values)


class Fold:
    """Mode `values`: the state after each record, folded from the records' changed values.

    `base` is the state after the last record, None once it is not known (a value that was
    not carried and could not be read); a state read at a record makes it known again.
    """

    def __init__(self, base: dict[str, Any] | None) -> None:
        self.base = base

    def after(
        self, updates: Mapping[str, Any], omitted: tuple[str, ...], read: RunSnapshot | None
    ) -> dict[str, Any] | None:
        """The state after a record with `updates` (lacking `omitted`), or as `read` there."""
        if read is not None:
            self.base = dict(read.state)
        elif self.base is not None and not omitted:
            self.base = {**self.base, **updates}
        else:
            self.base = None
        return self.base


class TranscriptStream:
    """A cluster run's transcript, followed in its store as it commits, until the run settles.

    The run's status is read at the start (with the records there are), when nothing came for
    `WAIT_SLICE_MS`, and after a record it may have settled at that does not say the status
    (see `batches`); its state only for a value too large for its record, and to start mode
    `values`.
    """

    def __init__(self, store: Store, run_id: str) -> None:
        self.store = store
        self.run_id = run_id

    def events(self, values: bool, timeout: float | None) -> Iterator[StreamEvent]:
        """The run's events in mode `values` (or `updates`), then its result (see `RunHandle.stream`)."""
        records: list[dict[str, Any]] = []
        after, fold = "0-0", None
        if values:
            after, start = self._pin(records)
            fold = Fold(None if start is None else dict(start.state))
            if start is not None:
                yield StateEvent.of(start)
        for batch in self.batches(after, timeout):
            for i, entry in enumerate(batch):
                records.append(entry.record)
                yield self._event(entry, at_head=i == len(batch) - 1, fold=fold)
        yield ResultEvent(RunResult.from_snapshot(self._load(with_path=True), records))

    def batches(self, after: str, timeout: float | None) -> Iterator[list[StepEntry]]:
        """The transcript entries after stream id `after`, as they are committed, until the run
        settles: each batch is what one read found; `WaitTimeout` after `timeout` seconds.

        One round trip reads the run's status with the entries there are; then each read blocks
        until entries come. The commit that settles a run says so in its entries (`status`):
        the run's status is read again only when nothing came for `WAIT_SLICE_MS`, and after a
        record that may have settled the run and does not say (an older graphrunner's).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        entries, settled = self._read(after)
        while True:
            if entries:
                after = entries[-1].id
                yield entries
            if settled is None:  # not known: read the status (and what came meanwhile)
                entries, settled = self._read(after)
                continue
            if settled:
                return
            if deadline is not None and time.monotonic() >= deadline:
                raise timed_out(self.store, self.run_id, timeout)
            entries = self.store.wait_steps(self.run_id, after, slice_ms(deadline))
            settled = _said(entries)

    def _event(self, entry: StepEntry, at_head: bool, fold: Fold | None) -> RecordEvent:
        """The event of one record; a value it lacks is read when no record came after it."""
        record = parse(entry.record)
        updates, omitted = carried(record)
        read = None
        if at_head and (omitted or (fold is not None and fold.base is None)):
            read = self._state_after(entry.id)
        if read is not None and omitted:
            updates |= {k: read.state[k] for k in omitted if k in read.state}
            omitted = tuple(k for k in omitted if k not in read.state)
        state = fold.after(updates, omitted, read) if fold is not None else None
        return RecordEvent.of(self.run_id, record, updates, omitted, state)

    def _pin(self, records: list[dict[str, Any]]) -> tuple[str, RunSnapshot | None]:
        """The id of the run's last record and the run right after it, for mode `values`
        (the records up to it go to `records`); None for the run when it moved on every time."""
        after, snap = "0-0", None
        for _ in range(PIN_TRIES):
            entries = self.store.steps(self.run_id, after)
            records += [e.record for e in entries]
            after = entries[-1].id if entries else after
            snap = self._state_after(after)
            if snap is not None:
                return after, snap
        return after, None

    def _state_after(self, entry_id: str) -> RunSnapshot | None:
        """The run as it was right after transcript record `entry_id` (`0-0`: before any), or
        None when a record was committed after it (a commit writes its state and records at once)."""
        snap = self._load()
        return None if self.store.steps(self.run_id, entry_id, count=1) else snap

    def _load(self, *, with_path: bool = False) -> RunSnapshot:
        """The run as the store holds it; raises `RunNotFound`."""
        from graphrunner.store.base import existing_run  # the store (redis-py) only once following

        return existing_run(self.store, self.run_id, with_path=with_path)

    def _read(self, after: str) -> tuple[list[StepEntry], bool | None]:
        """The run's entries after `after` and whether it has settled (finished or paused) as of
        them (None: not known, entries came that may have settled it), in one round trip; raises
        `RunNotFound`."""
        status, entries = self.store.status_and_steps(self.run_id, after)
        if status is None:
            raise RunNotFound(f"no run with id {self.run_id!r}")
        return entries, True if status in SETTLED else (_said(entries) if entries else False)


def _said(entries: list[StepEntry]) -> bool | None:
    """Whether the run has settled as of `entries`, when they tell: the last one says the run's
    status, or every one goes on; None when the run's status is to be read (nothing came, or a
    record that may have settled it and does not say)."""
    if not entries:
        return None
    if entries[-1].status is not None:
        return entries[-1].status in SETTLED
    return False if all(parse(e.record).goes_on() for e in entries) else None


def timed_out(store: Store, run_id: str, timeout: float | None) -> WaitTimeout:
    """The error of a wait for run `run_id` that timed out, saying where the run is: status,
    step, node and what it waits for."""
    snap = store.load_run(run_id)
    if snap is None:
        where = "it no longer exists"
    else:
        where = f"it is {snap.status.value} at step {snap.step + 1}"
        where += f" (node '{snap.node}')" if snap.node else ""
        where += f", waiting on {snap.wait.describe()}" if snap.wait is not None else ""
    return WaitTimeout(f"run {run_id} did not finish within {timeout or 0:g}s; {where}")


def slice_ms(deadline: float | None) -> int:
    """Milliseconds to block for in one read: a slice, or what is left until `deadline`."""
    if deadline is None:
        return WAIT_SLICE_MS
    return max(1, min(WAIT_SLICE_MS, int((deadline - time.monotonic()) * 1000)))
