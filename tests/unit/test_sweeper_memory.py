"""The sweeper over a MemoryStore: it repairs exactly what a run is missing, and nothing else.

A run is looked at once it is past its progress deadline; the tests move the deadline into
the past (`touch`) instead of waiting GRAPHRUNNER_STALL_AFTER.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from memory_cluster import LINEAR, NAP, MemoryCluster, child_graphs, statuses, submit
from parallel_graphs import PARENT as PARALLEL_PARENT
from parallel_graphs import folder

from graphrunner import Graph, parse_graph
from graphrunner.cluster.transport.messages import StepMessage
from graphrunner.cluster.waits import children
from graphrunner.cluster.worker.sweeper import Repair, SweepReport
from graphrunner.engine import RunStatus
from graphrunner.errors import WaitTimeout
from graphrunner.loading import load_graph
from graphrunner.settings import Settings
from graphrunner.store import Fence
from graphrunner.store.memory_store import MemoryStore


@pytest.fixture
def mc() -> Iterator[MemoryCluster]:
    cluster = MemoryCluster()
    yield cluster
    cluster.close()


def sweep_overdue(mc: MemoryCluster, *run_ids: str) -> SweepReport:
    """A sweeper pass once `run_ids` are past their progress deadline."""
    for run_id in run_ids:
        mc.store.touch(run_id, time.time() - 1)
    return mc.client.sweep()


def actions(report: SweepReport) -> list[tuple[str, str]]:
    return [(r.run_id, r.action) for r in report.repaired]


def test_a_lost_step_message_is_sent_again_once(mc: MemoryCluster) -> None:
    run_id = submit(mc, LINEAR)
    mc.step()
    mc.store.queues[mc.settings.queue].clear()  # taken by a worker that died before running it
    report = sweep_overdue(mc, run_id)
    assert report.checked == 1
    [repair] = report.repaired
    assert (repair.run_id, repair.step, repair.node, repair.action) == (run_id, 1, "second", "resent_step")
    assert mc.waiting() == [StepMessage(run_id=run_id, step=1)]
    assert mc.records(run_id)[-1]["status"] == "swept"
    assert mc.store.stalled(time.time()) == []  # looked at again after another STALL_AFTER

    again = sweep_overdue(mc, run_id)  # the message it sent is waiting: nothing is lost
    assert again.checked == 1 and again.repaired == []
    assert mc.waiting() == [StepMessage(run_id=run_id, step=1)]
    mc.drive()
    assert mc.snap(run_id).status is RunStatus.COMPLETED
    assert statuses(mc, run_id) == ["ok", "swept", "ok", "end"]


def test_a_run_whose_message_is_queued_is_left_alone(mc: MemoryCluster) -> None:
    run_id = submit(mc, LINEAR)
    mc.step()
    before = mc.snap(run_id)
    report = sweep_overdue(mc, run_id)
    assert report.checked == 1 and report.repaired == []
    assert mc.waiting() == [StepMessage(run_id=run_id, step=1)]
    assert mc.snap(run_id) == before and statuses(mc, run_id) == ["ok"]
    assert mc.store.stalled(time.time()) == []


def test_only_runs_past_their_deadline_are_looked_at(mc: MemoryCluster) -> None:
    late, fresh = submit(mc, LINEAR), submit(mc, LINEAR)
    mc.store.queues[mc.settings.queue].clear()
    report = sweep_overdue(mc, late)
    assert actions(report) == [(late, "resent_step")] and report.checked == 1
    assert mc.waiting() == [StepMessage(run_id=late, step=0)]
    assert mc.snap(fresh).status is RunStatus.RUNNING  # lost too, but not overdue yet


def test_a_timer_not_due_yet_is_not_lost(mc: MemoryCluster) -> None:
    run_id = submit(mc, NAP)
    assert mc.step().outcome == "suspended"
    report = sweep_overdue(mc, run_id)
    assert report.checked == 1 and report.repaired == [] and mc.waiting() == []


def test_an_unpublished_outbox_is_published() -> None:
    mc = MemoryCluster(MemoryStore(direct=False))
    try:
        run_id = submit(mc, LINEAR)
        mc.step()
        pending = mc.cluster.publisher.encode(mc.cluster.publisher.step(mc.snap(run_id), None))
        mc.store.queues[mc.settings.queue].clear()
        mc.store.push([pending], run_id)  # committed to the outbox by a worker that died before publishing
        assert mc.waiting() == [] and mc.store.outbox(run_id) == [pending]
        report = sweep_overdue(mc, run_id)
        assert actions(report) == [(run_id, "published_outbox")]
        assert mc.store.outbox(run_id) == [] and mc.waiting() == [StepMessage(run_id=run_id, step=1)]
        mc.drive()
        assert mc.snap(run_id).status is RunStatus.COMPLETED
    finally:
        mc.close()


def test_a_commit_publishes_only_its_own_outbox_messages() -> None:
    # On RabbitMQ the next step can commit (and publish) before the previous publisher has
    # dropped its message from the outbox: each publishes exactly its own, once, and drops it
    # by entry, so neither is published twice nor dropped unpublished (issue 27).
    mc = MemoryCluster(MemoryStore(direct=False))
    try:
        run_id = submit(mc, LINEAR)
        publisher = mc.cluster.publisher
        first, second = (publisher.encode(publisher.step(mc.snap(run_id), None)) for _ in range(2))
        mc.store.queues[mc.settings.queue].clear()
        mc.store.push([first, second], run_id)  # both committed, neither published yet
        assert publisher.flush(run_id, [second]) == 1  # the later commit's publisher is first
        assert mc.store.outbox(run_id) == [first]
        assert publisher.flush(run_id, [first]) == 1
        assert mc.store.outbox(run_id) == []
        assert len(mc.store.queues[mc.settings.queue]) == 2  # each published once
    finally:
        mc.close()


def test_a_parent_whose_wake_up_was_lost_is_woken(mc: MemoryCluster, tmp_path: Path) -> None:
    run_id = mc.client.submit(load_graph(child_graphs(tmp_path))).id
    child_id = f"{run_id}.2"
    mc.drive(until=lambda: mc.store.load_run(child_id) is not None)
    assert actions(sweep_overdue(mc, run_id)) == []  # its child is still running: nothing is missing
    mc.drive(until=lambda: mc.snap(child_id).status.finished)
    mc.store.queues[mc.settings.queue].clear()  # the wake-up the child's last commit sent is lost
    report = sweep_overdue(mc, run_id)
    assert actions(report) == [(run_id, "woke_parent")]
    assert mc.waiting() == [StepMessage(run_id=run_id, step=1, phase=1)]
    mc.drive()
    assert mc.snap(run_id).status is RunStatus.COMPLETED and mc.snap(run_id).output == {"heard": "HI"}


def test_a_finished_holders_key_is_handed_on(mc: MemoryCluster) -> None:
    graph = parse_graph(LINEAR, file="unit.yaml")
    first = mc.client.submit(graph, run_id="first", concurrency_key="k").id
    second = mc.client.submit(graph, run_id="second", concurrency_key="k").id
    mc.store.queues[mc.settings.queue].clear()
    snap = mc.snap(first)  # its worker commits it finished and dies before handing the key on
    done = snap.model_copy(update={"status": RunStatus.COMPLETED, "path": ()})
    assert mc.cluster.commit(Fence.of(snap), done)
    assert mc.store.key_holder("k") == first and mc.snap(second).status is RunStatus.PENDING

    report = mc.client.sweep()
    assert report.repaired == [Repair(first, 0, "first", 0.0, "handed_on_key")]
    assert mc.store.key_holder("k") == second
    assert mc.waiting() == [StepMessage(run_id=second, step=0)]
    assert mc.client.sweep().repaired == []  # handed on once
    mc.drive()
    assert mc.snap(second).status is RunStatus.COMPLETED and mc.store.key_holder("k") is None


def test_a_pass_is_skipped_while_another_holds_the_lock(mc: MemoryCluster) -> None:
    run_id = submit(mc, LINEAR)
    mc.store.queues[mc.settings.queue].clear()
    assert mc.store.lock_sweep(60)
    report = sweep_overdue(mc, run_id)
    assert report.skipped and report.checked == 0 and mc.waiting() == []
    mc.store.unlock_sweep()
    assert actions(mc.client.sweep()) == [(run_id, "resent_step")]


def test_expired_runs_are_pruned() -> None:
    mc = MemoryCluster(MemoryStore(retention_seconds=1))
    try:
        run_id = submit(mc, LINEAR)
        mc.drive()
        deadline = time.monotonic() + 20
        while mc.store.load_run(run_id) is not None:
            assert time.monotonic() < deadline, "the finished run did not expire"
            time.sleep(0.05)
        assert mc.client.sweep().pruned == 1
    finally:
        mc.close()


def parallel_parent(tmp_path: Path) -> Graph:
    """`research`: two branches (kids `slow` and `fast`) merged into the parent's state."""
    path = folder(tmp_path) / "research.yaml"
    path.write_text(PARALLEL_PARENT)
    return load_graph(path, settings=Settings(graph_path=(tmp_path,)))


def test_kids_never_created_are_created(
    mc: MemoryCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lost: list[tuple[str, ...]] = []
    create = children.create

    def dies_after_the_commit(*args: Any) -> None:  # the worker's first creation never happens
        if not lost:
            lost.append(tuple(args[4]))
            return
        create(*args)

    monkeypatch.setattr(children, "create", dies_after_the_commit)
    run_id = mc.client.submit(parallel_parent(tmp_path)).id
    mc.step()
    assert lost == [("slow", "fast")] and mc.waiting() == []
    assert mc.snap(run_id).wait.open == ("slow", "fast")
    report = sweep_overdue(mc, run_id)
    assert actions(report) == [(run_id, "created_kids")]
    assert {m.run_id for m in mc.waiting()} == {f"{run_id}.1.slow", f"{run_id}.1.fast"}
    assert actions(sweep_overdue(mc, run_id)) == []  # both exist now: nothing is missing
    mc.drive()
    done = mc.snap(run_id)
    assert done.status is RunStatus.COMPLETED and done.state["log"] == ["slow", "fast"]


def test_a_parent_whose_kids_wake_up_was_lost_is_woken(mc: MemoryCluster, tmp_path: Path) -> None:
    run_id = mc.client.submit(parallel_parent(tmp_path)).id
    slow, fast = f"{run_id}.1.slow", f"{run_id}.1.fast"
    mc.drive(until=lambda: mc.store.load_run(fast) is not None and mc.snap(fast).status.finished)
    assert actions(sweep_overdue(mc, run_id)) == []  # `fast` finished, its wake-up is on the queue
    mc.drive(until=lambda: mc.snap(slow).status.finished)
    mc.store.queues[mc.settings.queue].clear()  # the wake-up of the last kid is lost
    assert mc.snap(run_id).wait.open == ("slow",)
    report = sweep_overdue(mc, run_id)
    assert actions(report) == [(run_id, "woke_parent")]
    assert mc.waiting() == [StepMessage(run_id=run_id, step=0, phase=mc.snap(run_id).phase)]
    mc.drive()
    done = mc.snap(run_id)
    assert done.status is RunStatus.COMPLETED and done.state["log"] == ["slow", "fast"]


def test_a_wait_that_times_out_says_where_the_run_is(mc: MemoryCluster) -> None:
    """A stuck run's `WaitTimeout` names its status, step, node and what it waits on."""
    linear = mc.client.submit(parse_graph(LINEAR, file="unit.yaml"))
    mc.step()
    with pytest.raises(WaitTimeout) as stuck:
        linear.wait(timeout=0.2)
    assert str(stuck.value) == (
        f"run {linear.id} did not finish within 0.2s; it is running at step 2 (node 'second')"
    )
    napping = mc.client.submit(parse_graph(NAP, file="unit.yaml"))
    mc.drive(until=lambda: mc.snap(napping.id).wait is not None)
    with pytest.raises(WaitTimeout, match=r"at step 1 \(node 'nap'\), waiting on a durable timer"):
        napping.wait(timeout=0.2)
