"""Waits as typed models: each kind reads back as the model it was written as; a kind this process
does not know still loads and round-trips, and a worker refuses to act on it by name."""

from __future__ import annotations

import pytest

import graphrunner.cluster.waits  # noqa: F401  (registers every kind)
from graphrunner.cluster.waits.base import kind_of
from graphrunner.cluster.waits.children import ChildWait, KidsWait
from graphrunner.cluster.waits.foreach import ForeachWait
from graphrunner.cluster.waits.sequence import ItemsWait
from graphrunner.cluster.waits.timers import RestartWait, RetryWait, TimerWait
from graphrunner.engine import RunSnapshot, UnknownWait, Wait
from graphrunner.engine.waiting import UnregisteredWait

STORED = [
    ({"kind": "retry", "due": 5.0, "attempt": 2}, RetryWait),
    ({"kind": "timer", "due": 5.0, "timer": {"result": 1}}, TimerWait),
    ({"kind": "restart", "hook_round": 1, "prior": "r.3"}, RestartWait),
    ({"kind": "foreach", "tag": "2.1.ab", "total": 10, "upto": 4}, ForeachWait),
    ({"kind": "items", "tag": "2.1.ab", "total": 3, "next": 1}, ItemsWait),
    ({"kind": "child", "child": "r.3"}, ChildWait),
    ({"kind": "kids", "child": "r.3", "open": ["0", "1"], "total": 5, "upto": 2}, KidsWait),
]


@pytest.mark.parametrize(("stored", "model"), STORED, ids=[s["kind"] for s, _ in STORED])
def test_a_stored_wait_reads_back_as_its_kind_and_writes_back_the_same(stored: dict, model: type) -> None:
    snap = RunSnapshot.model_validate({"run_id": "r", "graph_id": "g", "wait": stored})
    assert type(snap.wait) is model
    assert snap.model_dump(mode="json")["wait"] == stored
    assert kind_of(snap.wait) is kind_of(model.model_validate(stored))


def test_a_wait_of_an_unknown_kind_loads_round_trips_and_is_refused_by_name() -> None:
    stored = {"kind": "tomorrow", "due": 7.5, "ticket": {"n": 3}}
    snap = RunSnapshot.model_validate({"run_id": "r", "graph_id": "g", "wait": stored})
    assert isinstance(snap.wait, UnregisteredWait)
    assert snap.model_dump(mode="json")["wait"] == stored
    assert RunSnapshot.model_validate_json(snap.model_dump_json()).wait == snap.wait
    with pytest.raises(UnknownWait, match="'tomorrow'"):
        kind_of(snap.wait)


def test_a_wait_without_a_kind_is_refused() -> None:
    with pytest.raises(UnknownWait, match="names no kind"):
        Wait.parse({"due": 1.0})


def test_when_the_sweeper_looks_is_the_waits_to_say() -> None:
    assert RetryWait(due=100.0).deadline(now=50.0, stall_after=10.0) == 110.0
    assert RetryWait(due=10.0).deadline(now=50.0, stall_after=10.0) == 60.0
    assert KidsWait(child="r.3").deadline(now=50.0, stall_after=10.0) > 60.0  # seldom: kids are swept


@pytest.mark.parametrize(("stored", "model"), STORED, ids=[s["kind"] for s, _ in STORED])
def test_every_kind_says_what_a_run_on_it_waits_for(stored: dict, model: type) -> None:
    assert model.model_validate(stored).describe() == model.waiting_for != ""


def test_an_unknown_kind_is_described_by_its_name() -> None:
    assert Wait.parse({"kind": "tomorrow"}).describe() == "a wait of kind 'tomorrow'"
