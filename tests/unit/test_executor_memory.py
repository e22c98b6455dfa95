"""The step executor over a MemoryStore: whole runs through the real executor, in this process.

Each test drives the messages a run's commits send (tests/unit/memory_cluster.py), so the
fencing, the one-message-per-commit rule, redeliveries, failures, timers and child runs are
checked without Redis or a Celery worker.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import engine_targets
import pytest
import redis
from memory_cluster import LINEAR, NAP, MemoryCluster, child_graphs, statuses, submit

from graphrunner.cluster.transport.messages import Outgoing, StepMessage
from graphrunner.engine import RunStatus
from graphrunner.errors import StoreUnavailable
from graphrunner.loading import load_graph
from graphrunner.services import StepServices
from graphrunner.store import Committed, Fence
from graphrunner.store.memory_store import MemoryStore


@pytest.fixture(params=[True, False], ids=["direct", "outbox"])
def mc(request: pytest.FixtureRequest) -> Iterator[MemoryCluster]:
    """A cluster whose commits push their messages (direct) or publish them from the outbox."""
    cluster = MemoryCluster(MemoryStore(direct=request.param))
    yield cluster
    cluster.close()


@pytest.fixture
def direct() -> Iterator[MemoryCluster]:
    cluster = MemoryCluster()
    yield cluster
    cluster.close()


# -- one message per commit --------------------------------------------------------------------------


def test_a_linear_run_completes_and_every_commit_sends_one_next_step(mc: MemoryCluster) -> None:
    run_id = submit(mc, LINEAR)
    assert mc.waiting() == [StepMessage(run_id=run_id, step=0)]
    handled = mc.drive()
    assert [h.outcome for h in handled] == ["committed"] * 3
    assert [(m.run_id, m.step, m.phase) for m in mc.taken] == [(run_id, 0, 0), (run_id, 1, 0), (run_id, 2, 0)]
    snap = mc.snap(run_id)
    assert snap.status is RunStatus.COMPLETED and snap.output == {"trail": ["first", "second"]}
    assert snap.path == ("first", "second", "done")
    assert statuses(mc, run_id) == ["ok", "ok", "end"]
    assert mc.waiting() == [] and mc.store.outbox(run_id) == []
    assert mc.store.stalled(time.time() + 10 * mc.settings.stall_after) == []


def test_a_message_delivered_twice_commits_once_and_sends_nothing_more(direct: MemoryCluster) -> None:
    run_id = submit(direct, LINEAR)
    first = direct.take()
    assert first is not None
    assert direct.executor.execute(first).outcome == "committed"
    assert direct.executor.execute(first).outcome == "stale"
    assert direct.waiting() == [StepMessage(run_id=run_id, step=1)]
    assert statuses(direct, run_id) == ["ok"]


def test_a_late_duplicate_changes_nothing_at_any_later_step(direct: MemoryCluster) -> None:
    # Regression: a duplicate consumed after the original had committed re-enqueued the next
    # step, and did so again at every following step, multiplying the run's messages.
    run_id = submit(direct, LINEAR)
    first = direct.take()
    assert first is not None and direct.executor.execute(first).outcome == "committed"
    for step in (1, 2):
        assert direct.executor.execute(first, redelivered=True).outcome == "stale"
        assert direct.waiting() == [StepMessage(run_id=run_id, step=step)]
        assert direct.step().outcome == "committed"
    assert direct.executor.execute(first).outcome == "not_running"
    assert direct.waiting() == []
    assert [m.step for m in direct.taken] == [0, 1, 2]  # one message per step, no more
    assert direct.snap(run_id).status is RunStatus.COMPLETED
    assert direct.store.count_redelivery(run_id, "1.0") == 1  # a stale redelivery is not counted


def test_a_message_of_another_phase_or_step_is_dropped(direct: MemoryCluster) -> None:
    run_id = submit(direct, NAP)
    assert direct.step().outcome == "suspended"
    before = direct.snap(run_id)
    assert before.phase == 1 and before.wait is not None and before.wait.kind == "timer"
    for msg in (
        StepMessage(run_id=run_id, step=0, phase=0),  # the delivery before the suspension
        StepMessage(run_id=run_id, step=0, phase=2),  # a phase the step never reached
        StepMessage(run_id=run_id, step=1, phase=1),  # a step not taken yet
    ):
        assert direct.executor.execute(msg).outcome == "stale"
    assert direct.snap(run_id) == before
    assert direct.waiting() == [] and statuses(direct, run_id) == ["sleeping"]
    assert direct.executor.execute(StepMessage(run_id="ghost", step=0)).outcome == "unknown_run"


# -- redeliveries and failures -------------------------------------------------------------------------


def test_a_redelivered_message_is_counted_and_the_step_runs() -> None:
    mc = MemoryCluster(max_redeliveries=2)
    try:
        run_id = submit(mc, LINEAR)
        msg = mc.take()
        assert msg is not None
        assert mc.executor.execute(msg, redelivered=True).outcome == "committed"
        assert mc.store.count_redelivery(run_id, "1.0") == 2  # this delivery was the first counted
        assert mc.drive()[-1].outcome == "committed"
        assert mc.snap(run_id).status is RunStatus.COMPLETED
    finally:
        mc.close()


def test_a_step_redelivered_past_the_limit_fails_the_run_naming_step_and_node() -> None:
    mc = MemoryCluster(max_redeliveries=2)
    try:
        run_id = submit(mc, LINEAR)
        msg = mc.take()
        assert msg is not None
        for _ in range(2):  # two deliveries whose worker died before committing
            mc.store.count_redelivery(run_id, "1.0")
        assert mc.executor.execute(msg, redelivered=True).outcome == "poison"
        snap = mc.snap(run_id)
        assert snap.status is RunStatus.FAILED and snap.error is not None
        assert (snap.error.type, snap.error.node, snap.error.step) == ("limit_exceeded", "first", 1)
        assert "step 1 (node 'first') was redelivered 3 times" in snap.error.message
        assert "GRAPHRUNNER_MAX_REDELIVERIES=2" in snap.error.message
        assert mc.records(run_id)[-1]["error"] == snap.error.to_dict()
        assert mc.waiting() == [] and mc.store.stalled(time.time() + 3600) == []
    finally:
        mc.close()


class BrokenServices(StepServices):
    """Step services with a bug: completing a step raises."""

    async def finish(self, *args: Any, **kwargs: Any) -> Any:
        raise ZeroDivisionError("division by zero")


def test_an_unexpected_exception_fails_the_run_naming_node_and_exception(direct: MemoryCluster) -> None:
    executor = direct.with_services(BrokenServices.from_settings(direct.settings, cache=direct.store))
    run_id = submit(direct, LINEAR)
    assert direct.step(executor).outcome == "failed_unexpectedly"
    snap = direct.snap(run_id)
    assert snap.status is RunStatus.FAILED and snap.error is not None
    assert (snap.error.type, snap.error.node, snap.error.step) == ("node_exception", "first", 1)
    assert "node 'first' failed unexpectedly" in snap.error.message
    assert "ZeroDivisionError: division by zero" in snap.error.message
    assert direct.waiting() == [] and statuses(direct, run_id) == ["error"]


class UnreachableStore(MemoryStore):
    """A store whose commits fail with `error` while `down`."""

    def __init__(self, error: Exception) -> None:
        super().__init__()
        self.error = error
        self.down = False

    def commit(self, fence: Fence, *args: Any, **kwargs: Any) -> Committed:
        if self.down:
            raise self.error
        return super().commit(fence, *args, **kwargs)


@pytest.mark.parametrize(
    "error",
    [StoreUnavailable("cannot reach Redis at redis://x"), redis.ResponseError("NOSCRIPT")],
    ids=["unavailable", "redis-error"],
)
def test_store_trouble_is_raised_for_a_requeue_and_changes_nothing(error: Exception) -> None:
    store = UnreachableStore(error)
    mc = MemoryCluster(store)
    try:
        run_id = submit(mc, LINEAR)
        before = mc.snap(run_id)
        msg = mc.take()
        assert msg is not None
        store.down = True
        with pytest.raises(type(error)):
            mc.executor.execute(msg)
        assert mc.snap(run_id) == before and mc.records(run_id) == [] and mc.waiting() == []
        store.down = False
        assert mc.executor.execute(msg).outcome == "committed"  # the requeued message
        assert mc.waiting() == [StepMessage(run_id=run_id, step=1)]
    finally:
        mc.close()


# -- timers --------------------------------------------------------------------------------------------


def flaky_graph(key: str) -> str:
    return f"""
    id: unit/flaky
    state: {{got: any}}
    config: {{start: call}}
    nodes:
      call:
        action: {{tool: python, params: {{fn: "engine_targets:flaky", args: {{key: {key}, failures: 1}}}}}}
        retry: {{max_attempts: 2, initial: 1.2, jitter: 0}}
        assign: {{got: "${{result}}"}}
        next: done
      done: {{type: return, output: {{got: "${{state.got}}"}}}}
    """


def due_of(mc: MemoryCluster, run_id: str) -> float:
    """When the timer the run's suspended step waits on comes due."""
    sent = mc.store.sent(run_id)
    assert sent is not None
    due = mc.store.timer_due(run_id, sent.tag)
    assert due is not None
    return due


def test_a_retry_backoff_waits_on_a_timer_not_on_the_queue(direct: MemoryCluster) -> None:
    key = f"backoff-{uuid.uuid4().hex}"
    run_id = submit(direct, flaky_graph(key))
    before = time.time()
    assert direct.step().outcome == "suspended"
    snap = direct.snap(run_id)
    assert snap.wait is not None and (snap.wait.kind, snap.wait.attempt, snap.phase) == ("retry", 2, 1)
    due = due_of(direct, run_id)
    assert due >= before + 1.2 and due == pytest.approx(snap.wait.due, abs=0.001)
    assert direct.waiting() == [] and statuses(direct, run_id) == ["retry"]
    assert direct.store.pump_timers(due - 0.5) == []  # not due yet: nothing moves
    assert direct.waiting() == []
    handled = direct.drive()  # the driver moves the timer when it is due
    assert [h.outcome for h in handled] == ["committed", "committed"]
    assert direct.taken[1] == StepMessage(run_id=run_id, step=0, phase=1)
    assert direct.snap(run_id).output == {"got": {"value": "ok"}} and engine_targets.calls[key] == 2
    assert statuses(direct, run_id) == ["retry", "ok", "end"]


def test_a_timer_that_comes_early_is_armed_again_without_a_commit(direct: MemoryCluster) -> None:
    run_id = submit(direct, NAP)
    direct.step()
    before = direct.snap(run_id)
    due = due_of(direct, run_id)
    [moved] = direct.store.pump_timers(due + 1)  # a clock ahead of this one moved it
    assert direct.waiting() == [StepMessage(run_id=run_id, step=0, phase=1)]
    assert direct.step().outcome == "waiting"
    assert direct.snap(run_id) == before and direct.waiting() == []
    [again] = direct.store.pump_timers(due + 1)  # looked at again when it is due
    polled, first = Outgoing.model_validate_json(again.body), Outgoing.model_validate_json(moved.body)
    assert polled.args == first.args and polled.due == pytest.approx(due, abs=0.01)


def test_a_durable_sleep_sends_its_step_again_only_when_due(direct: MemoryCluster) -> None:
    text = """
    id: unit/short-nap
    state: {slept: any}
    config: {start: nap}
    nodes:
      nap: {action: {tool: sleep, params: {seconds: 0.3}}, assign: {slept: "${result.slept}"}, next: done}
      done: {type: return}
    """
    run_id = submit(direct, text)
    assert direct.step().outcome == "suspended"
    due = due_of(direct, run_id)
    assert direct.waiting() == [] and direct.store.pump_timers(due - 0.2) == []
    assert [h.outcome for h in direct.drive()] == ["committed", "committed"]
    assert direct.snap(run_id).state == {"slept": 0.3}
    assert statuses(direct, run_id) == ["sleeping", "ok", "end"]


# -- child runs ----------------------------------------------------------------------------------------


def test_a_child_run_wakes_its_parent_with_its_last_commit(direct: MemoryCluster, tmp_path: Path) -> None:
    run_id = direct.client.submit(load_graph(child_graphs(tmp_path))).id
    child_id = f"{run_id}.2"
    direct.drive(until=lambda: direct.store.load_run(child_id) is not None)
    parent = direct.snap(run_id)
    assert parent.wait is not None and (parent.wait.kind, parent.wait.child) == ("child", child_id)
    assert parent.children == (child_id,)
    assert direct.waiting() == [StepMessage(run_id=child_id, step=0)]

    direct.drive(until=lambda: direct.snap(child_id).status.finished)
    assert direct.snap(child_id).status is RunStatus.COMPLETED
    # sent by that commit, naming the child
    assert direct.waiting() == [StepMessage(run_id=run_id, step=1, phase=1, child=child_id)]
    assert direct.step().outcome == "committed"
    direct.drive()
    parent = direct.snap(run_id)
    assert parent.status is RunStatus.COMPLETED and parent.output == {"heard": "HI"}
    assert [r["node"] for r in direct.records(run_id)] == ["greet", "sub", "done"]
    assert [m.run_id for m in direct.taken].count(run_id) == 4  # greet, sub, its wake-up, done


def test_a_stray_wake_up_before_the_child_has_finished_changes_nothing(
    direct: MemoryCluster, tmp_path: Path
) -> None:
    run_id = direct.client.submit(load_graph(child_graphs(tmp_path))).id
    child_id = f"{run_id}.2"
    direct.drive(until=lambda: direct.store.load_run(child_id) is not None)
    before = direct.snap(run_id)
    stray = StepMessage(run_id=run_id, step=1, phase=1)
    assert direct.executor.execute(stray).outcome == "waiting"
    assert direct.snap(run_id) == before
    assert direct.waiting() == [StepMessage(run_id=child_id, step=0)]
    direct.drive()
    assert direct.snap(run_id).status is RunStatus.COMPLETED
