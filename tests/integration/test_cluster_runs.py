"""Graphs run on the cluster (real Redis, real Celery worker) agree with the in-process runner."""

from __future__ import annotations

import textwrap
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from graphrunner import StateValidationError, load_graph, parse_graph
from graphrunner.client import Client
from graphrunner.cluster.transport.messages import StepMessage
from graphrunner.cluster.worker.runtime import WorkerRuntime
from graphrunner.errors import GraphNotFound, InvalidRunId, RunConflict, RunNotFound, StoreUnavailable

GRAPHS = Path(__file__).resolve().parents[2] / "graphs"
EXAMPLES: list[tuple[str, dict[str, Any]]] = [
    ("hello.yaml", {"name": "Ada"}),
    ("branching.yaml", {"score": 80}),
    ("branching.yaml", {"score": 20}),
    ("foreach.yaml", {"words": ["x", "yy"]}),
]


@pytest.mark.parametrize(("name", "inputs"), EXAMPLES)
def test_examples_agree_with_the_in_process_runner(
    cluster: Client, name: str, inputs: dict[str, Any]
) -> None:
    distributed = cluster.submit(GRAPHS / name, inputs).wait(timeout=30)
    local = load_graph(GRAPHS / name).invoke_sync(inputs)
    assert distributed.status == local.status == "completed"
    assert distributed.path == local.path
    assert distributed.state == local.state
    assert distributed.output == local.output
    assert [s["node"] for s in distributed.steps] == local.path
    assert all(s["worker"] != "local" for s in distributed.steps)


SEMANTICS = """
    id: t/semantics
    state:
      log: {type: list, default: [], reducer: append}
      n: {type: integer, default: 0}
    config: {start: count, max_steps: 50, error_mode: continue}
    nodes:
      count:
        type: gate
        assign: {n: "${state.n + 1}", log: ["count ${state.n}"]}
        next: [{to: flaky, when: "state.n >= 3"}, {to: count}]
      flaky:
        action: {tool: fail, params: {message: suppressed}}
        next: cpu_step
      cpu_step:
        action: {tool: echo, params: {n: "${state.n}"}}
        queue: cpu
        assign: {log: ["cpu ${result.n}"]}
        next: done
      done: {type: return, output: {log: "${state.log}", n: "${state.n}"}}
"""


def test_loops_error_mode_and_node_queues_across_processes(cluster: Client) -> None:
    graph = parse_graph(textwrap.dedent(SEMANTICS), file="semantics.yaml")
    result = cluster.submit(graph).wait(timeout=30)
    local = graph.invoke_sync()
    assert result.status == local.status == "completed_with_errors"
    assert result.errors_suppressed == 1 and result.errors[0].node == "flaky"
    assert result.state == local.state and result.path == local.path
    assert result.output == {"log": ["count 0", "count 1", "count 2", "cpu 3"], "n": 3}


def test_failed_run_keeps_its_error_and_state(cluster: Client) -> None:
    graph = parse_graph(
        textwrap.dedent("""
        id: t/fails
        config: {start: a, max_steps: 3}
        nodes:
          a: {type: gate, assign: {v: 1}, next: a}
    """)
    )
    result = cluster.submit(graph).wait(timeout=30)
    assert result.status == "failed"
    assert result.error is not None and result.error.type == "limit_exceeded"
    assert result.state["v"] == 1 and result.step_count == 3


def test_the_same_run_id_starts_one_run(cluster: Client) -> None:
    run_id = f"idem-{uuid.uuid4().hex[:8]}"
    first = cluster.submit(GRAPHS / "hello.yaml", {"name": "A"}, run_id=run_id)
    second = cluster.submit(GRAPHS / "hello.yaml", {"name": "A"}, run_id=run_id)
    assert first.id == second.id == run_id
    assert first.wait(timeout=30).step_count == 3
    assert len(second.steps()) == 3
    with pytest.raises(RunConflict):
        cluster.submit(GRAPHS / "hello.yaml", {"name": "B"}, run_id=run_id)


def test_a_duplicated_step_message_is_applied_once(cluster: Client, worker_runtime: WorkerRuntime) -> None:
    run = cluster.submit(GRAPHS / "hello.yaml", {"name": "Dup"})
    result = run.wait(timeout=30)
    before = run.steps()
    for step in range(result.step_count):  # every message of the run delivered once more
        report = worker_runtime.executor.execute(StepMessage(run_id=run.id, step=step))
        assert report.outcome in ("not_running", "stale")
    assert run.steps() == before
    assert run.result().state == result.state


def test_garbage_messages_are_dropped_and_the_worker_keeps_going(
    cluster: Client, worker_runtime: WorkerRuntime
) -> None:
    app = worker_runtime.app
    for args in ([], ["only-run-id"], ["{bad id}", 0], ["x", -1], [1, 2, 3], ["x", "zero"]):
        app.send_task("graphrunner.step", args=args, queue="graphrunner")
    app.send_task("graphrunner.step", kwargs={"evil": True}, queue="graphrunner")
    assert cluster.submit(GRAPHS / "hello.yaml", {"name": "After"}).wait(timeout=30).status == "completed"


def test_bad_input_is_refused_before_a_run_exists(cluster: Client) -> None:
    with pytest.raises(GraphNotFound, match="no-such/graph"):
        cluster.submit("no-such/graph")
    with pytest.raises(StateValidationError, match="score"):
        cluster.submit(GRAPHS / "branching.yaml", {"score": "high"})
    with pytest.raises(InvalidRunId):
        cluster.submit(GRAPHS / "hello.yaml", run_id="{not allowed}")
    with pytest.raises(RunNotFound):
        cluster.run("never-submitted").status()


def test_a_tool_that_raises_fails_the_run_cleanly(cluster: Client) -> None:
    graph = parse_graph(
        textwrap.dedent("""
        id: t/raises
        config: {start: a}
        nodes:
          a: {action: {tool: python, params: {fn: "json:loads", args: {s: "not json"}}}}
    """)
    )
    result = cluster.submit(graph).wait(timeout=30)
    assert result.status == "failed"
    assert result.error is not None and result.error.type == "node_exception"
    assert "JSONDecodeError" in result.error.message


def test_a_redis_that_does_not_answer_is_a_clear_error_within_seconds() -> None:
    from graphrunner.embedded import free_port

    started = time.monotonic()
    with (
        Client(f"redis://127.0.0.1:{free_port()}/0", retry_seconds=2) as client,
        pytest.raises(StoreUnavailable, match=r"cannot reach Redis at redis://127\.0\.0\.1"),
    ):
        client.submit(GRAPHS / "hello.yaml")
    assert time.monotonic() - started < 10


def test_list_runs_by_graph_and_status(cluster: Client) -> None:
    graph = parse_graph(
        textwrap.dedent(f"""
        id: t/list-{uuid.uuid4().hex[:6]}
        config: {{start: a}}
        nodes: {{a: {{type: gate}}}}
    """)
    )
    ids = [cluster.submit(graph).id for _ in range(3)]
    for run_id in ids:
        cluster.run(run_id).wait(timeout=30)
    listed = cluster.list_runs(graph_id=graph.id)
    created = {r.run_id: r.created_at for r in listed}
    assert sorted(created) == sorted(ids)
    assert list(created.values()) == sorted(created.values(), reverse=True)  # newest first
    assert [created[i] for i in ids] == sorted(created[i] for i in ids)  # (ms: submits may tie)
    assert {r.status for r in listed} == {"completed"}
    assert {r.run_id for r in cluster.list_runs(graph_id=graph.id, status="completed")} == set(ids)
    assert cluster.list_runs(graph_id=graph.id, status="failed") == []


def test_a_duplicate_delivered_while_the_step_runs_is_fenced_off(
    cluster: Client, worker_runtime: WorkerRuntime, tmp_path: Path
) -> None:
    graph = parse_graph(
        textwrap.dedent(f"""
        id: t/race
        state: {{log: {{type: list, default: [], reducer: append}}}}
        config: {{start: slow}}
        nodes:
          slow:
            action: {{tool: python, params: {{fn: "crash_targets:slow_step", args: {{marker: "{tmp_path}", seconds: 0.5}}}}}}
            assign: {{log: [slow]}}
            next: b
          b: {{type: gate, assign: {{log: [b]}}}}
    """)
    )
    run = cluster.submit(graph)
    worker_runtime.app.send_task(
        "graphrunner.step", args=[run.id, 0], queue="graphrunner"
    )  # a second delivery
    result = run.wait(timeout=30)
    assert result.state["log"] == ["slow", "b"]
    assert [(s["step"], s["node"]) for s in result.steps] == [(1, "slow"), (2, "b")]
    calls = (tmp_path / "calls").read_text().splitlines()
    assert len(calls) == 2  # both deliveries ran the action (at least once); one commit won


def test_env_requires_fails_the_run_before_any_node_on_the_worker(
    cluster: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GRAPHRUNNER_TEST_MISSING", raising=False)
    graph = parse_graph(
        textwrap.dedent("""
        id: t/env
        config: {start: a, env_requires: [GRAPHRUNNER_TEST_MISSING]}
        nodes: {a: {type: gate, assign: {ran: true}}}
    """)
    )
    result = cluster.submit(graph).wait(timeout=30)
    assert result.status == "failed"
    assert result.error is not None and result.error.type == "env_missing"
    assert "GRAPHRUNNER_TEST_MISSING" in result.error.message
    assert "ran" not in result.state and result.path == []
    assert [(s["step"], s["node"], s["status"]) for s in result.steps] == [(0, None, "error")]
