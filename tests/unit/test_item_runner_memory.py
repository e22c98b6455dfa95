"""Foreach items over a MemoryStore: an item message through `ItemRunner.execute`, as the item task
calls it; the item's typed record and the JSON form it is stored in; redeliveries and poison;
what becomes of an exception (a failed item, or a requeue when the store is in trouble)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis
from memory_cluster import LINEAR, MemoryCluster, submit

from graphrunner.cluster.runs.items import (
    ItemRecord,
    call_payload,
    failed_record,
    outcome_of,
    record_of,
)
from graphrunner.cluster.steps import redeliveries
from graphrunner.cluster.transport.messages import ItemMessage
from graphrunner.engine import ActionCall, ActionFailure, ActionOutcome
from graphrunner.errors import StoreUnavailable

TAG = "1.1.0a0a0a0a"


@pytest.fixture
def mc() -> Iterator[MemoryCluster]:
    cluster = MemoryCluster(max_redeliveries=2)
    yield cluster
    cluster.close()


def item_message(mc: MemoryCluster, run_id: str, index: int = 0) -> ItemMessage:
    """A signed item message of run `run_id` (as a worker sends it) whose call echoes its index."""
    snap = mc.snap(run_id)
    call = ActionCall(node="first", tool="echo", params={"text": f"item {index}"}, item_index=index)
    payload = {
        "run_id": run_id,
        "graph_id": snap.graph_id,
        "graph_hash": snap.graph_hash,
        "step": 1,
        "tag": TAG,
        "index": index,
        "call": call_payload(call),
    }
    return ItemMessage.model_validate(mc.cluster.publisher.signer.sign(payload))


def stored(mc: MemoryCluster, run_id: str) -> dict[str, Any] | None:
    [record] = list(mc.store.item_records(run_id, TAG, 1))
    return record


# -- the record ----------------------------------------------------------------------------------------


def test_an_item_record_is_stored_in_the_json_form_items_always_had() -> None:
    ok = record_of(ActionOutcome({"v": 1}, attempts=2))
    assert ok.model_dump() == {"ok": True, "attempts": 2, "result": {"v": 1}}
    cached = record_of(ActionOutcome(None, cache_hit=True))
    assert cached.model_dump() == {"ok": True, "attempts": 1, "result": None, "cache_hit": True}
    failure = ActionFailure("transient", "down", "ConnectError", "Traceback ...")
    failed = failed_record(failure)
    assert failed.model_dump() == {"ok": False, "attempts": 1, "error": failure.to_dict()}
    assert failed.error == failure
    for record in (ok, cached, failed):
        assert ItemRecord.model_validate_json(record.model_dump_json()) == record


def test_records_written_as_dicts_read_back_as_outcomes() -> None:
    failed = outcome_of(0, "a", {"ok": False, "error": {"type": "timeout", "message": "slow"}, "attempts": 3})
    assert failed.outcome.failure == ActionFailure("timeout", "slow") and failed.outcome.attempts == 3
    bare = outcome_of(1, "b", {"ok": False})  # a failure without its error is a permanent one
    assert bare.outcome.failure == ActionFailure("permanent", "")
    hit = outcome_of(2, "c", {"ok": True, "result": [1], "cache_hit": True, "later": "ignored"})
    assert hit.outcome.ok and hit.outcome.result == [1] and hit.outcome.cache_hit


# -- running an item -------------------------------------------------------------------------------------


def test_an_item_runs_and_its_record_is_stored(mc: MemoryCluster) -> None:
    run_id = submit(mc, LINEAR)
    mc.runtime.items.execute(item_message(mc, run_id), queue="gr-unit", shadow="t:item")
    record = stored(mc, run_id)
    assert record is not None and record["ok"] is True and record["attempts"] == 1
    assert outcome_of(0, "x", record).outcome.ok


def test_an_item_of_a_run_that_is_not_running_is_skipped(mc: MemoryCluster) -> None:
    run_id = submit(mc, LINEAR)
    msg = item_message(mc, run_id)
    mc.client.cancel(run_id)
    mc.runtime.items.execute(msg)
    assert stored(mc, run_id) is None


def test_a_redelivered_item_is_counted_and_past_the_cap_recorded_failed_unrun(mc: MemoryCluster) -> None:
    run_id = submit(mc, LINEAR)
    msg = item_message(mc, run_id)
    for _ in range(2):  # two deliveries whose worker died before recording
        counted = redeliveries.of_item(mc.store, msg, 2)
        assert not counted.poison
    mc.runtime.items.execute(msg, redelivered=True)
    record = stored(mc, run_id)
    assert record is not None and record["ok"] is False
    assert record["error"]["error_type"] == "PoisonMessage"
    assert "item 0 was redelivered 3 times" in record["error"]["message"]
    assert "GRAPHRUNNER_MAX_REDELIVERIES=2" in record["error"]["message"]


def test_an_unexpected_exception_fails_the_item_naming_it(
    mc: MemoryCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id = submit(mc, LINEAR)
    msg = item_message(mc, run_id)

    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(mc.store, "load_run", broken)  # read for the run's capabilities
    mc.runtime.items.execute(msg)
    record = stored(mc, run_id)
    assert record is not None and record["ok"] is False
    assert record["error"]["type"] == "permanent" and record["error"]["message"] == "RuntimeError: a bug"
    assert "RuntimeError" in record["error"]["traceback"]


@pytest.mark.parametrize(
    "error",
    [StoreUnavailable("cannot reach Redis at redis://x"), redis.ResponseError("NOSCRIPT")],
    ids=["unavailable", "redis-error"],
)
def test_store_trouble_is_raised_for_a_requeue_and_records_nothing(
    mc: MemoryCluster, monkeypatch: pytest.MonkeyPatch, error: Exception
) -> None:
    run_id = submit(mc, LINEAR)
    msg = item_message(mc, run_id)

    def down(*args: Any, **kwargs: Any) -> None:
        raise error

    with monkeypatch.context() as patch:
        patch.setattr(mc.store, "load_run", down)
        with pytest.raises(type(error)):
            mc.runtime.items.execute(msg)
    assert stored(mc, run_id) is None
    mc.runtime.items.execute(msg, redelivered=True)  # the requeued message
    record = stored(mc, run_id)
    assert record is not None and record["ok"] is True
