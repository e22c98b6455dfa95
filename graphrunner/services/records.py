"""Transcript records: what a run's `steps` stream holds, one frozen model per kind of record.

Every record names the step and node it is about and its `status`: the step's own outcome
(`ok`, `error`, `end`, `paused`, from the engine's `StepEvent`), or what happened around it
(`retry`, `sleeping`, `cancelled`, `resumed`, `admitted`, `swept`). `to_json` is what the
store appends; `to_dict` what the Python API and the CLI show.
"""

from __future__ import annotations

import json
import os
import socket
import time
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from graphrunner.engine import StepEvent, StepPlan, StepResult
from graphrunner.engine.outcomes import ActionFailure
from graphrunner.limits import data_problem

MAX_CARRIED_BYTES = 4096  # the new values a step record carries, JSON-encoded, in all


def utcnow() -> datetime:
    """The current instant, UTC."""
    return datetime.now(UTC)


def worker_name() -> str:
    """`host:pid` of the process taking the step (a prefork pool process, not the parent)."""
    return f"{socket.gethostname()}:{os.getpid()}"


class Record(BaseModel):
    """What every transcript record has: the step and node it is about, and its status.

    `step` is the number of the step taken at `node`, or of the step the run takes next there
    (a retry, a sleep, a cancel, a resume): the numbers of a transcript never go backwards.
    """

    model_config = ConfigDict(frozen=True, populate_by_name=True)

    step: int
    node: str | None
    status: str

    def to_dict(self) -> dict[str, Any]:
        """The record as the transcript shows it."""
        return self.model_dump(mode="json", by_alias=True)

    def to_json(self) -> str:
        """The record as stored."""
        return self.model_dump_json(by_alias=True)


class StepRecord(StepEvent):
    """A step taken: the engine's event, when it started, how long it took, and where.

    `changed_values` are the new values of the `changed_keys` (after the reducers), up to
    `MAX_CARRIED_BYTES` in all: the keys left out are `values_omitted` (streams read them).
    """

    started_at: str
    duration_ms: float
    worker: str
    changed_values: dict[str, Any] = Field(default_factory=dict)
    values_omitted: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The record as the transcript shows it (`message` only on a paused step that has one)."""
        return self.model_dump(mode="json", exclude=self._absent())

    def to_json(self) -> str:
        """The record as stored."""
        return self.model_dump_json(exclude=self._absent())

    def _absent(self) -> set[str] | None:
        return {"message"} if self.message is None else None

    @classmethod
    def of(cls, result: StepResult, started_at: str, started: float, worker: str) -> StepRecord:
        """The record of a finished step that started at `started_at` (perf counter `started`)."""
        values, omitted = carried(result.snapshot.state, result.event.changed_keys)
        return cls(
            **result.event.__dict__,
            started_at=started_at,
            duration_ms=round((time.perf_counter() - started) * 1000, 3),
            worker=worker,
            changed_values=values,
            values_omitted=omitted,
        )


def carried(state: dict[str, Any], keys: tuple[str, ...]) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The values of `keys` in `state` a record carries (`MAX_CARRIED_BYTES` in all), and the
    keys it leaves out (too large, no longer in the state, or not JSON data within the limits:
    the step that made such a value fails its run, and its record must still be written)."""
    values: dict[str, Any] = {}
    omitted: list[str] = []
    room = MAX_CARRIED_BYTES
    for key in keys:
        fits = key in state and data_problem(state[key]) is None  # first: it never recurses
        size = _json_size(state[key], room) if fits else room + 1
        if size > room:
            omitted.append(key)
            continue
        values[key] = state[key]
        room -= size
    return values, tuple(omitted)


def _json_size(value: Any, room: int) -> int:
    """The length of `value` as JSON; a long string, list or mapping is not encoded to tell it
    is over `room` (its JSON is at least as long as it)."""
    if isinstance(value, str | list | dict) and len(value) > room:
        return len(value)
    return len(json.dumps(value, default=str))


class RetryRecord(Record):
    """A failed attempt that is retried after `retry_in_s` seconds."""

    status: Literal["retry"] = "retry"
    attempts: int
    error: dict[str, Any]
    retry_in_s: float
    at: str
    worker: str


class SleepRecord(Record):
    """A step that sleeps durably for `sleep_s` seconds (its worker is free meanwhile)."""

    status: Literal["sleeping"] = "sleeping"
    sleep_s: float
    at: str
    worker: str


class FailedRecord(Record):
    """A run that failed before its node ran (missing environment, graph not loadable, poison)."""

    status: Literal["error"] = "error"
    error: dict[str, Any]
    worker: str


class CancelRecord(Record):
    """The run was cancelled while it was `from_` (running, paused, pending)."""

    status: Literal["cancelled"] = "cancelled"
    from_: str = Field(alias="from")
    reason: str
    at: str


class ResumeRecord(Record):
    """The run was resumed from `from_`, with a state patch of `changed_keys`."""

    status: Literal["resumed"] = "resumed"
    from_: str = Field(alias="from")
    changed_keys: list[str]
    at: str
    graph_hash: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The record as the transcript shows it (`graph_hash` only on an upgrade)."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)

    def to_json(self) -> str:
        """The record as stored."""
        return self.model_dump_json(by_alias=True, exclude_none=True)


class AdmitRecord(Record):
    """A pending run took its concurrency key `key` after run `after` let it go."""

    status: Literal["admitted"] = "admitted"
    key: str
    after: str


class SweepRecord(Record):
    """The sweeper found the run stalled `idle_s` seconds and did `action`."""

    status: Literal["swept"] = "swept"
    action: str
    idle_s: float
    phase: int


AnyRecord = (
    StepRecord
    | RetryRecord
    | SleepRecord
    | FailedRecord
    | CancelRecord
    | ResumeRecord
    | AdmitRecord
    | SweepRecord
)


def retry_records(plan: StepPlan, retries: tuple[dict[str, Any], ...], worker: str) -> list[RetryRecord]:
    """One record per failed attempt that was retried."""
    at = utcnow().isoformat()
    return [
        RetryRecord(
            step=plan.step,
            node=plan.node,
            attempts=r["attempt"],
            error=r["error"],
            retry_in_s=r["retry_in_s"],
            at=at,
            worker=worker,
        )
        for r in retries
    ]


def failure_error(failure: ActionFailure, node: str | None, step: int) -> dict[str, Any]:
    """An action failure as a run's `error`: `{type, error_type, message, node, step}`."""
    return {**failure.to_dict(), "node": node, "step": step}
