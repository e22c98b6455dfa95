"""Transcript records read back (`records.parse`): the model of their kind, shown as stored; a
record this version cannot read is an `UnknownRecord`, never an exception."""

from __future__ import annotations

import json

import pytest

from graphrunner.engine import RunFailure
from graphrunner.services import records
from graphrunner.services.records import (
    AdmitRecord,
    AnyRecord,
    CancelRecord,
    FailedRecord,
    ResumeRecord,
    RetryRecord,
    SleepRecord,
    StepRecord,
    SweepRecord,
    UnknownRecord,
)

BOOM = RunFailure(type="node_exception", message="boom", error_type="ValueError", traceback="tb")
STEP = {"started_at": "2026-11-26T00:00:00+00:00", "duration_ms": 1.5, "worker": "w:1"}
WRITTEN: list[AnyRecord] = [
    StepRecord(
        step=1, node="a", status="ok", next_node="b", changed_keys=("x",), changed_values={"x": 1}, **STEP
    ),
    StepRecord(step=2, node="b", status="error", error=BOOM.at("b", 2), **STEP),
    StepRecord(step=3, node="c", status="paused", message="approve?", **STEP),
    StepRecord(step=4, node="d", status="end", values_omitted=("big",), changed_keys=("big",), **STEP),
    RetryRecord(step=1, node="a", attempts=1, error=BOOM, retry_in_s=0.5, at="t", worker="w"),
    SleepRecord(step=1, node="a", sleep_s=2, at="t", worker="w"),
    FailedRecord(step=1, node="a", error=RunFailure(type="env_missing", message="no KEY"), worker="w"),
    CancelRecord(step=2, node="a", from_="running", reason="asked", at="t"),
    ResumeRecord(step=2, node="a", from_="failed", changed_keys=["x"], at="t"),
    ResumeRecord(step=2, node="a", from_="failed", changed_keys=[], at="t", graph_hash="abc"),
    AdmitRecord(step=0, node="a", key="k", after="r1"),
    SweepRecord(step=1, node="a", action="resent_step", idle_s=3.5, phase=0),
]


@pytest.mark.parametrize("record", WRITTEN, ids=lambda r: f"{type(r).__name__}-{r.status}")
def test_a_written_record_reads_back_as_its_model_and_shows_as_stored(record: AnyRecord) -> None:
    stored = record.to_json()
    read = records.parse(stored)
    assert type(read) is type(record) and read == record
    assert read.to_dict() == json.loads(stored) == record.to_dict()
    assert records.parse(json.loads(stored)) == record
    assert records.parse(record) is record


def test_a_failed_step_and_a_run_that_failed_before_its_node_are_told_apart() -> None:
    step, failed = records.parse(WRITTEN[1].to_json()), records.parse(WRITTEN[6].to_json())
    assert isinstance(step, StepRecord) and isinstance(failed, FailedRecord)
    assert records.error_of(step) == BOOM.at("b", 2)
    assert records.error_of(failed) == RunFailure(type="env_missing", message="no KEY")
    assert records.error_of(WRITTEN[0]) is None and records.error_of(WRITTEN[7]) is None


def test_a_record_of_an_unknown_status_is_kept_whole() -> None:
    stored = {"step": 3, "node": "q", "status": "teleported", "to": "mars", "next_node": "r"}
    read = records.parse(json.dumps(stored))
    assert isinstance(read, UnknownRecord)
    assert (read.step, read.node, read.status, read.next_node) == (3, "q", "teleported", "r")
    assert read.to_dict() == stored
    assert not read.goes_on()  # a follower reads the run's status after it


def test_a_record_its_model_refuses_is_read_as_far_as_it_goes() -> None:
    stored = {"step": 1, "node": "a", "status": "retry", "attempts": "twice"}  # no error, no worker
    read = records.parse(stored)
    assert isinstance(read, UnknownRecord) and (read.step, read.node, read.status) == (1, "a", "retry")
    assert read.to_dict() == stored
    odd = {"step": "one", "node": None, "status": 7, "duration_ms": 12}
    read = records.parse(odd)
    assert isinstance(read, UnknownRecord) and (read.step, read.status, read.duration_ms) == (
        0,
        "unknown",
        12,
    )
    assert read.to_dict() == odd


@pytest.mark.parametrize("stored", ["not json", "[1, 2]", b"{", "null"])
def test_what_is_not_a_record_at_all_is_an_empty_unknown_one(stored: str | bytes) -> None:
    read = records.parse(stored)
    assert isinstance(read, UnknownRecord) and read.to_dict() == {}


def test_a_field_a_newer_version_added_is_kept() -> None:
    stored = {**json.loads(WRITTEN[10].to_json()), "priority": 3}
    read = records.parse(stored)
    assert isinstance(read, AdmitRecord) and read.to_dict() == stored


def test_the_records_after_which_a_run_goes_on() -> None:
    going_on = {r.status for r in WRITTEN if r.goes_on()}
    assert going_on == {"ok", "retry", "sleeping", "admitted", "swept"}


def test_the_changes_a_record_names() -> None:
    assert records.changes(WRITTEN[0]) == (("x",), {"x": 1})
    assert records.changes(WRITTEN[3]) == (("big",), {})
    assert records.changes(WRITTEN[8]) == (("x",), {})  # a resume's patch: keys, no values
    assert records.changes(WRITTEN[4]) == ((), {})


def test_the_old_name_of_the_record_event_still_imports_with_a_warning() -> None:
    from graphrunner import streaming

    with pytest.warns(DeprecationWarning, match="RecordEvent"):
        from graphrunner.streaming import StepEvent
    assert StepEvent is streaming.RecordEvent
    with pytest.raises(AttributeError):
        _ = streaming.NoSuchEvent  # type: ignore[attr-defined]


def test_an_unknown_record_shows_its_values_as_stored_not_as_a_step_would() -> None:
    stored = {
        "step": 2,
        "node": "a",
        "status": "forked",
        "changed_keys": ["x"],
        "error": {"type": "t", "x": None},
    }
    read = records.parse(stored)
    assert isinstance(read, UnknownRecord) and read.changed_keys == ("x",)
    assert read.to_dict() == stored and json.loads(read.to_json()) == stored
