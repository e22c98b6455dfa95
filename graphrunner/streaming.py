"""Stream events: a run's transcript records as typed events as they commit, then its result.

Two modes, as LangGraph's `stream_mode`:
- `updates`: one `StepEvent` per transcript record (a step taken, or what happened around one:
  a retry, a sleep, a cancel, a resume), with the new values of the keys it changed;
- `values`: first a `StateEvent`, the state as the stream found it, then `StepEvent`s that
  also carry the whole state after their record.
Both end with a `ResultEvent`. A step record carries the new values of its changed keys
(`changed_values`, up to a size): the state is folded from them, not read per step.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from graphrunner.engine import RunSnapshot
from graphrunner.errors import GraphrunnerError
from graphrunner.results import RunResult

StreamMode = Literal["updates", "values"]
MODES = ("updates", "values")
CARRIED = ("changed_values", "values_omitted")  # record fields a StepEvent shows as updates, omitted


@dataclass(frozen=True, kw_only=True)
class StepEvent:
    """One transcript record: a step taken (`ok`, `error`, `end`, `paused`) or what happened
    around one (`retry`, `sleeping`, `cancelled`, `resumed`, `admitted`, `swept`).

    `updates` maps each changed key to its new value (after the reducers); a changed key whose
    value was too large for the record and could not be read at the step is in `omitted`.
    `state` is the whole state after the record (mode `values`; None in mode `updates`, or when
    an omitted value could not be read). `record` is the transcript record as stored.
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
        record: dict[str, Any],
        updates: Mapping[str, Any],
        omitted: tuple[str, ...] = (),
        state: dict[str, Any] | None = None,
    ) -> StepEvent:
        """The event of transcript record `record`."""
        duration = record.get("duration_ms")
        return cls(
            run_id=run_id,
            step=int(record.get("step") or 0),
            node=record.get("node"),
            status=str(record.get("status")),
            duration_ms=float(duration) if isinstance(duration, int | float) else None,
            changed_keys=tuple(record.get("changed_keys") or ()),
            updates=updates,
            omitted=omitted,
            error=record.get("error"),
            state=state,
            record=record,
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


StreamEvent = StepEvent | StateEvent | ResultEvent


def check_mode(mode: str) -> StreamMode:
    """`mode` if it is a stream mode; else `GraphrunnerError`."""
    if mode == "updates":
        return "updates"
    if mode == "values":
        return "values"
    raise GraphrunnerError(f"stream mode must be one of {', '.join(MODES)}, got {mode!r}")


def carried(record: Mapping[str, Any]) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The new values a record carries for its changed keys, and the changed keys it lacks."""
    values = record.get("changed_values")
    values = dict(values) if isinstance(values, Mapping) else {}
    keys = tuple(str(k) for k in record.get("changed_keys") or ())
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
