"""Run operations over a MemoryStore: cancel, resume and concurrency keys, with the real executor
taking the messages they send (tests/unit/memory_cluster.py)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from memory_cluster import LINEAR, MemoryCluster, statuses, submit, write

from graphrunner import parse_graph
from graphrunner.cluster.transport.messages import StepMessage
from graphrunner.engine import RunStatus
from graphrunner.errors import CancelError, ResumeError, RunNotFound, RunRefused
from graphrunner.loading import load_graph

APPROVAL = """
id: unit/approval
state: {approved: {type: boolean, default: false}}
config: {start: ask}
nodes:
  ask: {type: pause, next: [{to: good, when: "state.approved"}, {to: bad}]}
  bad: {type: return, output: {verdict: rejected}}
  good: {type: return, output: {verdict: approved}}
"""


@pytest.fixture
def mc() -> Iterator[MemoryCluster]:
    cluster = MemoryCluster()
    yield cluster
    cluster.close()


# -- cancel ----------------------------------------------------------------------------------------


def test_a_cancelled_run_takes_no_further_step(mc: MemoryCluster) -> None:
    run_id = submit(mc, LINEAR)
    assert mc.step().outcome == "committed"
    assert mc.waiting() == [StepMessage(run_id=run_id, step=1)]
    mc.client.cancel(run_id)
    snap = mc.snap(run_id)
    assert snap.status is RunStatus.CANCELLED and snap.step == 1
    last = mc.records(run_id)[-1]
    assert (last["status"], last["from"], last["step"]) == ("cancelled", "running", 2)  # at step 2
    assert mc.step().outcome == "not_running"  # its queued message is dropped
    assert mc.waiting() == [] and mc.snap(run_id).status is RunStatus.CANCELLED
    with pytest.raises(CancelError, match="already finished"):
        mc.client.cancel(run_id)
    with pytest.raises(RunNotFound):
        mc.client.cancel("ghost")


def test_a_cancelled_run_resumes_where_it_stopped(mc: MemoryCluster) -> None:
    run_id = submit(mc, LINEAR)
    mc.step()
    mc.client.cancel(run_id)
    mc.step()  # the dropped message
    mc.client.resume(run_id)
    snap = mc.snap(run_id)
    assert snap.status is RunStatus.RUNNING and snap.phase == 1
    assert snap.wait is not None and snap.wait.kind == "restart"
    assert mc.waiting() == [StepMessage(run_id=run_id, step=1, phase=1)]
    assert [h.outcome for h in mc.drive()] == ["committed", "committed"]
    snap = mc.snap(run_id)
    assert snap.status is RunStatus.COMPLETED and snap.path == ("first", "second", "done")
    assert snap.output == {"trail": ["first", "second"]}
    assert statuses(mc, run_id) == ["ok", "cancelled", "resumed", "ok", "end"]


def test_resume_refuses_a_running_run_that_is_not_stalled(mc: MemoryCluster) -> None:
    run_id = submit(mc, LINEAR)
    mc.step()
    with pytest.raises(ResumeError, match=r"is running .* not stalled"):
        mc.client.resume(run_id)
    assert mc.waiting() == [StepMessage(run_id=run_id, step=1)]
    assert len(mc.drive()) == 2


def test_a_failed_run_resumes_at_its_failed_node(mc: MemoryCluster) -> None:
    key = f"resume-{uuid.uuid4().hex}"
    text = f"""
    id: unit/fails-once
    state: {{got: any}}
    config: {{start: call}}
    nodes:
      call:
        action: {{tool: python, params: {{fn: "engine_targets:flaky", args: {{key: {key}, failures: 1}}}}}}
        retry: {{max_attempts: 1}}
        assign: {{got: "${{result}}"}}
        next: done
      done: {{type: return, output: {{got: "${{state.got}}"}}}}
    """
    run_id = submit(mc, text)
    mc.drive()
    assert mc.snap(run_id).status is RunStatus.FAILED
    mc.client.resume(run_id)
    mc.drive()
    snap = mc.snap(run_id)
    assert snap.status is RunStatus.COMPLETED and snap.output == {"got": {"value": "ok"}}
    assert statuses(mc, run_id) == ["error", "resumed", "ok", "end"]


def test_a_paused_run_resumes_with_a_state_patch(mc: MemoryCluster) -> None:
    run_id = submit(mc, APPROVAL)
    mc.drive()
    assert mc.snap(run_id).status is RunStatus.PAUSED and mc.waiting() == []
    assert mc.store.stalled(10**10) == []  # a paused run is not watched
    mc.client.resume(run_id, {"approved": True})
    assert len(mc.waiting()) == 1
    mc.drive()
    snap = mc.snap(run_id)
    assert snap.status is RunStatus.COMPLETED and snap.output == {"verdict": "approved"}
    assert snap.path == ("ask", "good")


def test_a_run_cancelled_while_paused_resumes_past_its_pause(mc: MemoryCluster) -> None:
    run_id = submit(mc, APPROVAL)
    mc.drive()
    mc.client.cancel(run_id)
    assert mc.records(run_id)[-1]["from"] == "paused"
    mc.client.resume(run_id)
    mc.drive()
    snap = mc.snap(run_id)
    assert snap.status is RunStatus.COMPLETED and snap.output == {"verdict": "rejected"}
    assert snap.path == ("ask", "bad")


def test_cancelling_a_parent_cancels_its_active_child(mc: MemoryCluster, tmp_path: Path) -> None:
    write(tmp_path, "child.yaml", APPROVAL.replace("unit/approval", "unit/approval-child"))
    parent = write(
        tmp_path,
        "parent.yaml",
        """
        id: unit/asks-child
        config: {start: sub}
        nodes:
          sub: {type: subgraph, graph: unit/approval-child, next: done}
          done: {type: return}
        """,
    )
    run_id = mc.client.submit(load_graph(parent)).id
    child_id = f"{run_id}.1"
    mc.drive(until=lambda: not any(mc.store.queues.values()) and mc.store.load_run(child_id) is not None)
    assert mc.snap(child_id).status is RunStatus.PAUSED
    assert mc.snap(run_id).status is RunStatus.PAUSED  # paused with its child, no message
    mc.client.cancel(run_id)
    assert mc.snap(run_id).status is RunStatus.CANCELLED
    assert mc.snap(child_id).status is RunStatus.CANCELLED
    assert mc.records(child_id)[-1]["reason"] == f"its parent run {run_id} was cancelled"
    # the child's last commit woke it
    assert mc.waiting() == [StepMessage(run_id=run_id, step=0, phase=1, child=child_id)]
    assert mc.step().outcome == "not_running" and mc.waiting() == []


# -- concurrency keys --------------------------------------------------------------------------------


def test_a_concurrency_key_is_handed_on_when_its_holder_finishes(mc: MemoryCluster) -> None:
    graph = parse_graph(LINEAR, file="unit.yaml")
    first = mc.client.submit(graph, run_id="first", concurrency_key="k").id
    second = mc.client.submit(graph, run_id="second", concurrency_key="k").id
    with pytest.raises(RunRefused, match="held by active run first"):
        mc.client.submit(graph, run_id="third", concurrency_key="k", when_busy="refuse")
    assert mc.store.load_run("third") is None
    assert mc.snap(second).status is RunStatus.PENDING
    assert mc.waiting() == [StepMessage(run_id=first, step=0)]  # none for the waiting run
    assert mc.store.key_holder("k") == first

    mc.drive(until=lambda: mc.snap(first).status.finished)
    assert mc.store.key_holder("k") == second
    assert mc.snap(second).status is RunStatus.RUNNING
    assert mc.waiting() == [StepMessage(run_id=second, step=0)]
    admitted = mc.records(second)[0]
    assert (admitted["status"], admitted["key"], admitted["after"]) == ("admitted", "k", first)
    mc.drive()
    assert mc.snap(second).status is RunStatus.COMPLETED
    assert mc.store.key_holder("k") is None
    assert [m.run_id for m in mc.taken] == [first] * 3 + [second] * 3


def test_a_cancelled_waiting_run_never_gets_the_key(mc: MemoryCluster) -> None:
    graph = parse_graph(LINEAR, file="unit.yaml")
    first = mc.client.submit(graph, run_id="first", concurrency_key="k").id
    second = mc.client.submit(graph, run_id="second", concurrency_key="k").id
    third = mc.client.submit(graph, run_id="third", concurrency_key="k").id
    mc.client.cancel(second)
    mc.drive(until=lambda: mc.snap(first).status.finished)
    assert mc.store.key_holder("k") == third
    assert mc.snap(second).status is RunStatus.CANCELLED
    mc.drive()
    assert mc.snap(third).status is RunStatus.COMPLETED and mc.store.key_holder("k") is None
    assert second not in {m.run_id for m in mc.taken}


def test_cancelling_the_holder_hands_the_key_on(mc: MemoryCluster) -> None:
    graph = parse_graph(LINEAR, file="unit.yaml")
    first = mc.client.submit(graph, run_id="first", concurrency_key="k").id
    second = mc.client.submit(graph, run_id="second", concurrency_key="k").id
    mc.client.cancel(first)
    assert mc.store.key_holder("k") == second
    mc.drive()
    assert mc.snap(second).status is RunStatus.COMPLETED
    assert [m.run_id for m in mc.taken] == [first] + [second] * 3  # first's message was dropped
