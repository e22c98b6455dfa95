"""The pure step engine driven directly: prepare, complete, no runner and no I/O."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from graphrunner import Graph, engine
from graphrunner.engine import ActionFailure, ActionOutcome, NoOutcome, RunStatus

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)

GRAPH = """
id: pure
state:
  n: {type: integer, default: 0}
  log: {type: list, default: [], reducer: append}
config: {start: work}
nodes:
  work:
    action: {tool: echo, params: {n: "${state.n}", drop: "${inputs.missing}", at: "${_now}"}}
    assign: {n: "${result.n + 1}", log: ["work"]}
    next:
      - {to: done, when: "state.n >= 1"}
      - {to: work}
  done: {type: return, output: {n: "${state.n}"}}
"""


def test_prepare_interpolates_params_and_drops_nulls(graph_of: Callable[[str], Graph]) -> None:
    graph = graph_of(GRAPH)
    snap = engine.begin(graph, {}, run_id="r1")
    plan = engine.prepare(graph, snap, NOW)
    assert plan.kind == "action" and plan.step == 1
    assert plan.call is not None
    assert plan.call.tool == "echo"
    assert plan.call.params == {"n": 0, "at": "2026-01-02T03:04:05Z"}


def test_complete_merges_then_routes_on_post_update_state(graph_of: Callable[[str], Graph]) -> None:
    graph = graph_of(GRAPH)
    snap = engine.begin(graph, {}, run_id="r1")
    plan = engine.prepare(graph, snap, NOW)
    step = engine.complete(graph, snap, plan, ActionOutcome(result={"n": 0}), NOW)
    assert step.update == {"n": 1, "log": ["work"]}
    assert step.snapshot.state == {"n": 1, "log": ["work"]}
    assert step.snapshot.node == "done"  # n >= 1 only after the update
    assert step.event.changed_keys == ("n", "log")
    assert step.snapshot.step == 1 and step.snapshot.path == ("work",)


def test_complete_is_pure_and_deterministic(graph_of: Callable[[str], Graph]) -> None:
    graph = graph_of(GRAPH)
    snap = engine.begin(graph, {}, run_id="r1")
    plan = engine.prepare(graph, snap, NOW)
    first = engine.complete(graph, snap, plan, ActionOutcome(result={"n": 0}), NOW)
    second = engine.complete(graph, snap, plan, ActionOutcome(result={"n": 0}), NOW)
    assert first.snapshot == second.snapshot
    assert snap.state == {"n": 0, "log": []}  # the input snapshot is untouched


def test_return_ends_the_run_with_output(graph_of: Callable[[str], Graph]) -> None:
    graph = graph_of(GRAPH)
    snap = engine.begin(graph, {}, run_id="r1").model_copy(update={"node": "done", "state": {"n": 5}})
    plan = engine.prepare(graph, snap, NOW)
    step = engine.complete(graph, snap, plan, NoOutcome(), NOW)
    assert step.snapshot.status is RunStatus.COMPLETED
    assert step.snapshot.output == {"n": 5}
    assert step.snapshot.node is None
    assert step.event.status == "end"


def test_failure_without_handling_fails_with_state(graph_of: Callable[[str], Graph]) -> None:
    graph = graph_of(GRAPH)
    snap = engine.begin(graph, {}, run_id="r1")
    plan = engine.prepare(graph, snap, NOW)
    failure = ActionFailure("permanent", "it broke", "Broken")
    step = engine.complete(graph, snap, plan, ActionOutcome(failure=failure, attempts=2), NOW)
    final = step.snapshot
    assert final.status is RunStatus.FAILED
    assert final.error is not None
    assert final.error.to_dict() == {
        "type": "node_exception",
        "message": "it broke",
        "node": "work",
        "step": 1,
    }
    assert final.node == "work"  # kept, so the run can be resumed here
    assert final.state["_last_error"]["attempts"] == 2
    assert step.exception is not None and step.exception.state == final.state


def test_max_steps_is_a_limit_before_the_node_runs(graph_of: Callable[[str], Graph]) -> None:
    graph = graph_of(GRAPH.replace("config: {start: work}", "config: {start: work, max_steps: 1}"))
    snap = engine.begin(graph, {}, run_id="r1").model_copy(update={"step": 1})
    plan = engine.prepare(graph, snap, NOW)
    assert plan.kind == "limit"
    step = engine.complete(graph, snap, plan, NoOutcome(), NOW)
    assert step.snapshot.status is RunStatus.FAILED
    assert step.snapshot.error is not None and step.snapshot.error.type == "limit_exceeded"
    assert step.snapshot.step == 1


def test_capabilities_deny_before_dispatch(graph_of: Callable[[str], Graph]) -> None:
    graph = graph_of(GRAPH)
    snap = engine.begin(graph, {}, run_id="r1", capabilities=["tool:shell"])
    plan = engine.prepare(graph, snap, NOW)
    assert plan.failure is not None
    assert plan.failure.classification == "permission_denied"
    assert "tool:echo" in plan.failure.message
    step = engine.complete(graph, snap, plan, NoOutcome(), NOW)
    assert step.snapshot.error is not None and step.snapshot.error.type == "permission_denied"


def test_snapshot_round_trips_through_json(graph_of: Callable[[str], Graph]) -> None:
    graph = graph_of(GRAPH)
    snap = engine.begin(graph, {}, run_id="r1")
    plan = engine.prepare(graph, snap, NOW)
    after = engine.complete(graph, snap, plan, ActionOutcome(result={"n": 0}), NOW).snapshot
    assert engine.RunSnapshot.model_validate_json(after.model_dump_json()) == after
