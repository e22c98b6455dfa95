"""Transcript records: what a run's `steps` stream holds, one frozen model per kind of record.

Every record names the step and node it is about and its `status`: the step's own outcome
(`ok`, `error`, `end`, `paused`, from the engine's `StepEvent`), or what happened around it
(`retry`, `sleeping`, `cancelled`, `resumed`, `admitted`, `swept`). `to_json` is what the
store appends; `to_dict` what the Python API and the CLI show.

A record read back (`parse`) is the model of its kind, so readers use attributes, not keys.
A field the model does not declare (a newer graphrunner's) is kept and shown. A record of a
status this version does not know, or one its model refuses (an older graphrunner's), is an
`UnknownRecord`: read as far as a step record's fields go, shown as stored; it never stops a
reader. A record of an older version that its model accepts shows the model's defaults for
the fields it lacks.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Literal, cast

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError

from graphrunner.engine import Retried, StepEvent, StepPlan, StepResult
from graphrunner.engine.failures import RunFailure
from graphrunner.limits import value_problem
from graphrunner.services.timings import ItemTimes

OPTIONAL_FIELDS = ("message", "queue_ms", "begun_at", "items")  # left out of a record when unset
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

    model_config = ConfigDict(frozen=True, populate_by_name=True, extra="allow")

    step: int
    node: str | None
    status: str

    def goes_on(self) -> bool:
        """True when the run goes on after this record: a follower need not read its status."""
        return False

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

    model_config = ConfigDict(extra="allow")

    started_at: str
    duration_ms: float | None  # None: not timed (an `UnknownRecord` read as a step)
    worker: str
    changed_values: dict[str, Any] = Field(default_factory=dict)
    values_omitted: tuple[str, ...] = ()
    # timing the explorer's timeline shows, each only where there is one: the time the task that
    # finished the step waited in its queue, when a suspended step first began, its foreach items
    queue_ms: float | None = None
    begun_at: str | None = None
    items: ItemTimes | None = None

    def to_dict(self) -> dict[str, Any]:
        """The record as the transcript shows it (`message` only on a paused step that has one)."""
        return self.model_dump(mode="json", exclude=self._absent())

    def to_json(self) -> str:
        """The record as stored."""
        return self.model_dump_json(exclude=self._absent())

    def _absent(self) -> set[str] | None:
        absent = {name for name in OPTIONAL_FIELDS if getattr(self, name, None) is None}
        return absent or None

    def goes_on(self) -> bool:
        """True for a step that went on to its next node (`ok`)."""
        return self.status == "ok"

    @classmethod
    def of(
        cls, result: StepResult, started_at: str, started: float, worker: str, **timing: Any
    ) -> StepRecord:
        """The record of a finished step that started at `started_at` (perf counter `started`);
        `timing`: its `queue_ms`, `begun_at` and `items`, where there are."""
        values, omitted = carried(result.snapshot.state, result.event.changed_keys, result.sizes)
        return cls(
            **result.event.__dict__,
            started_at=started_at,
            duration_ms=round((time.perf_counter() - started) * 1000, 3),
            worker=worker,
            changed_values=values,
            values_omitted=omitted,
            **timing,
        )


def carried(
    state: dict[str, Any], keys: tuple[str, ...], sizes: Mapping[str, int] | None = None
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The values of `keys` in `state` a record carries (`MAX_CARRIED_BYTES` in all), and the
    keys it leaves out (too large, no longer in the state, or not JSON data within the limits:
    the step that made such a value fails its run, and its record must still be written).

    `sizes` are the JSON sizes of the values of `state` as the step's state check measured them
    (`StepResult.sizes`), having found them JSON data within the limits: such a value is not
    walked again.
    """
    values: dict[str, Any] = {}
    omitted: list[str] = []
    room = MAX_CARRIED_BYTES
    for key in keys:
        size = _carried_size(state, key, room, sizes)
        if size > room:
            omitted.append(key)
            continue
        values[key] = state[key]
        room -= size
    return values, tuple(omitted)


def _carried_size(state: dict[str, Any], key: str, room: int, sizes: Mapping[str, int] | None) -> int:
    """The JSON size of `state[key]`, or `room + 1` when the record cannot carry it."""
    if key not in state:
        return room + 1
    measured = sizes.get(key) if sizes is not None else None
    if measured is not None:  # measured by the step's state check, which found it JSON data
        return measured
    if value_problem(state[key]) is not None:  # before encoding: it never recurses
        return room + 1
    return _json_size(state[key], room)


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
    error: RunFailure
    retry_in_s: float
    at: str
    worker: str

    def goes_on(self) -> bool:
        """True: the attempt is tried again."""
        return True


class SleepRecord(Record):
    """A step that sleeps durably for `sleep_s` seconds (its worker is free meanwhile)."""

    status: Literal["sleeping"] = "sleeping"
    sleep_s: float
    at: str
    worker: str

    def goes_on(self) -> bool:
        """True: the step wakes when its sleep is over."""
        return True


class FailedRecord(Record):
    """A run that failed before its node ran (missing environment, graph not loadable, poison)."""

    status: Literal["error"] = "error"
    error: RunFailure
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

    def goes_on(self) -> bool:
        """True: the admitted run starts."""
        return True


class SweepRecord(Record):
    """The sweeper found the run stalled `idle_s` seconds and did `action`."""

    status: Literal["swept"] = "swept"
    action: str
    idle_s: float
    phase: int

    def goes_on(self) -> bool:
        """True: the sweeper sent the run's work again."""
        return True


class UnknownRecord(StepRecord):
    """A record this version cannot read as its kind: a status it does not know (a newer
    graphrunner's), or a known status whose model refuses it (an older graphrunner's, a test's).

    It is read as far as a step record's fields go: the fields it has, of the right type, are
    set (a wrong one is left out), the others are empty. It shows every field as stored
    (`to_dict`), and a follower reads the run's status after it.
    """

    _stored: dict[str, Any] | None = PrivateAttr(default=None)  # the record as `parse` found it

    step: int = 0
    node: str = ""
    status: str = "unknown"
    started_at: str = ""
    duration_ms: float | None = None
    worker: str = ""

    def goes_on(self) -> bool:
        """False: what it says is not known."""
        return False

    def to_dict(self) -> dict[str, Any]:
        """The record as stored."""
        if self._stored is not None:
            return dict(self._stored)
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)

    def to_json(self) -> str:
        """The record as stored."""
        return json.dumps(self.to_dict(), default=str)


AnyRecord = (
    StepRecord
    | RetryRecord
    | SleepRecord
    | FailedRecord
    | CancelRecord
    | ResumeRecord
    | AdmitRecord
    | SweepRecord
    | UnknownRecord
)
STEP_STATUSES = ("ok", "error", "end", "paused")  # a step record's (the engine's StepEvent's)
AROUND = (RetryRecord, SleepRecord, FailedRecord, CancelRecord, ResumeRecord, AdmitRecord, SweepRecord)
# The records of what happens around a step, by their `status` literal. `error` is also the
# status of a step that failed: a step record is timed (`duration_ms`), a failed run's is not.
AROUND_STEPS: dict[str, type[Record]] = {model.model_fields["status"].default: model for model in AROUND}


def parse(data: str | bytes | Mapping[str, Any] | AnyRecord) -> AnyRecord:
    """A transcript record as stored (JSON, or decoded JSON) as the model of its kind (a record
    is returned as it is); one it cannot read is an `UnknownRecord`, never an exception."""
    if isinstance(data, StepRecord | Record):
        return data
    if isinstance(data, str | bytes):
        try:
            data = json.loads(data)
        except ValueError:
            return UnknownRecord()
    if not isinstance(data, Mapping):
        return UnknownRecord()
    model = _model(data)
    try:
        return _unknown(data) if model is None else cast(AnyRecord, model.model_validate(data))
    except ValidationError:
        return _unknown(data)


def _model(data: Mapping[str, Any]) -> type[StepRecord | Record] | None:
    """The model of a stored record, by its status; None for a status this version does not know."""
    status = data.get("status")
    if status in STEP_STATUSES and (status != "error" or "duration_ms" in data):
        return StepRecord
    return AROUND_STEPS.get(status) if isinstance(status, str) else None


def _unknown(data: Mapping[str, Any]) -> UnknownRecord:
    """`data` as an `UnknownRecord` (the declared fields of the wrong type unset), shown as stored."""
    try:
        record = UnknownRecord.model_validate(data)
    except ValidationError as exc:
        wrong = {e["loc"][0] for e in exc.errors() if e["loc"]}
        record = UnknownRecord.model_validate({k: v for k, v in data.items() if k not in wrong})
    record._stored = dict(data)
    return record


def changes(record: AnyRecord) -> tuple[tuple[str, ...], Mapping[str, Any]]:
    """The state keys a record changed (a step's, a resume's patch), and the new values it
    carries for them."""
    if isinstance(record, StepRecord):
        return tuple(record.changed_keys), record.changed_values
    if isinstance(record, ResumeRecord):
        return tuple(record.changed_keys), {}
    return (), {}


def error_of(record: AnyRecord) -> RunFailure | None:
    """The error a record carries (a failed step's, a retried attempt's, a run's that failed
    before its node ran); None for the other records."""
    if isinstance(record, StepRecord):
        return record.error
    if isinstance(record, RetryRecord | FailedRecord):
        return record.error
    return None


def retry_records(plan: StepPlan, retries: tuple[Retried, ...], worker: str) -> list[RetryRecord]:
    """One record per failed attempt that was retried."""
    at = utcnow().isoformat()
    return [
        RetryRecord(
            step=plan.step,
            node=plan.node,
            attempts=r.attempt,
            error=r.failure.to_run_failure(),
            retry_in_s=r.retry_in_s,
            at=at,
            worker=worker,
        )
        for r in retries
    ]
