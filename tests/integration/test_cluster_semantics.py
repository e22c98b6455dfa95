"""Semantics on the cluster: subgraphs as child runs, retries, node timeouts, pause/resume,
durable sleep, the node result cache and hooks (graph and deployment-wide); the same results
as the in-process runner where that is cheap to check."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from semantics_targets import records
from support import uid, wait_for, write
from worker_procs import dedicated_worker

from graphrunner import Graph, GraphValidationError, StateValidationError, load_graph, parse_graph
from graphrunner.cli import main
from graphrunner.client import Client, RunHandle
from graphrunner.embedded import EmbeddedRedis
from graphrunner.errors import InvalidRunId, ResumeError, RunNotFound
from graphrunner.results import RunResult
from graphrunner.runner import LocalRunner

ROOT = Path(__file__).resolve().parents[2]
TARGETS = "semantics_targets"


def graph_text(text: str) -> str:
    """Dedented YAML text."""
    return textwrap.dedent(text).lstrip("\n")


def hook(event: str, path: Path, *, answer: str | None = None, tag: str = "graph", **extra: Any) -> str:
    """One hook as a JSON (= YAML flow) mapping: the python target `hook` records the event."""
    args: dict[str, Any] = {"path": str(path), "event": "${event}", "tag": tag}
    if answer:
        args["answer"] = answer
    entry = {"event": event, "action": {"tool": "python", "params": {"fn": f"{TARGETS}:hook", "args": args}}}
    return json.dumps({**entry, **extra})


Records = list[Any]


def wait_for_records(path: Path, done: Callable[[Records], bool], timeout: float = 10) -> Records:
    """The records in `path` once `done(records)` holds: hooks after a step run after its commit."""
    deadline = time.monotonic() + timeout
    while True:
        found = records(path)
        if done(found) or time.monotonic() > deadline:
            return found
        time.sleep(0.02)


def fired(event: str, tag: str = "graph") -> Callable[[Records], bool]:
    """A `wait_for_records` condition: the hook tagged `tag` has recorded `event`."""
    return lambda found: any(r["tag"] == tag and r["event"]["name"] == event for r in found)


def steps_of(result: RunResult, status: str | None = None) -> list[dict[str, Any]]:
    """The transcript records of `result` with that status."""
    return [s for s in result.steps if status is None or s["status"] == status]


def local_run(graph: Graph, inputs: dict[str, Any] | None = None, **kwargs: Any) -> RunResult:
    """The same graph run in-process (a fresh LocalRunner)."""
    return graph.invoke_sync(inputs, **kwargs)


@pytest.fixture
def cli_env(redis_server: EmbeddedRedis, cluster: Client) -> dict[str, str | None]:
    """CliRunner environment: the test Redis, whose runs the cluster's in-thread worker executes."""
    return {
        "GRAPHRUNNER_REDIS_URL": redis_server.url,
        "GRAPHRUNNER_BROKER_URL": None,
        "GRAPHRUNNER_QUIET": None,
        "GRAPHRUNNER_QUEUE": None,
        "GRAPHRUNNER_HOOKS": None,
    }


def cli(env: dict[str, str | None], *args: str) -> Result:
    return CliRunner().invoke(main, list(args), env=env)


def no_traceback(result: Result) -> bool:
    """A user error is reported, never raised: no traceback, a clean exit."""
    return "Traceback" not in result.output + result.stderr and isinstance(
        result.exception, SystemExit | None
    )


# --- 1. subgraphs: child runs linked both ways, depth, capabilities --------------------------------


def nested_graphs(folder: Path) -> tuple[Path, dict[str, str]]:
    """parent -> child -> grandchild, with inputs/outputs projection at both levels."""
    ids = {k: f"sem/{k}-{uid()}" for k in ("parent", "child", "grandchild")}
    write(
        folder,
        "grandchild.yaml",
        f"""
        id: {ids["grandchild"]}
        inputs: {{word: {{type: string, required: true}}}}
        state:
          shout: string
        config: {{start: up}}
        nodes:
          up:
            action: {{tool: echo, params: {{text: "${{inputs.word}}!"}}}}
            assign: {{shout: "${{result.text}}"}}
            next: done
          done: {{type: return, output: {{shout: "${{state.shout}}"}}}}
        """,
    )
    write(
        folder,
        "child.yaml",
        f"""
        id: {ids["child"]}
        inputs: {{text: {{type: string, required: true}}}}
        state:
          trail: {{type: list, default: [], reducer: append}}
          loud: string
        config: {{start: mark}}
        nodes:
          mark: {{type: gate, assign: {{trail: ["child got ${{inputs.text}}"]}}, next: deeper}}
          deeper:
            type: subgraph
            graph: {ids["grandchild"]}
            inputs: {{word: "${{inputs.text}}"}}
            outputs: {{loud: shout}}
            assign: {{trail: ["grandchild said ${{result.shout}}"]}}
            next: done
          done: {{type: return, output: {{loud: "${{state.loud}}", trail: "${{state.trail}}"}}}}
        """,
    )
    parent = write(
        folder,
        "parent.yaml",
        f"""
        id: {ids["parent"]}
        inputs: {{name: {{type: string, required: true}}}}
        state:
          greeting: string
          trail: {{type: list, default: [], reducer: append}}
          summary: string
        config: {{start: greet}}
        nodes:
          greet:
            action: {{tool: echo, params: {{text: "hi ${{inputs.name}}"}}}}
            assign: {{greeting: "${{result.text}}", trail: [parent]}}
            next: nested
          nested:
            type: subgraph
            graph: {ids["child"]}
            inputs: {{text: greeting, trail: trail}}
            outputs: {{summary: loud}}
            assign: {{trail: ["child said ${{result.loud}}"]}}
            next: done
          done: {{type: return, output: {{summary: "${{state.summary}}", trail: "${{state.trail}}"}}}}
        """,
    )
    return parent, ids


def test_subgraph_two_levels_deep_runs_as_linked_child_runs(cluster: Client, tmp_path: Path) -> None:
    path, ids = nested_graphs(tmp_path)
    run = cluster.submit(path, {"name": "Ada"})
    result = run.wait(timeout=30)
    assert result.status == "completed", result.error
    assert result.output == {"summary": "hi Ada!", "trail": ["parent", "child said hi Ada!"]}
    assert result.state == {
        "greeting": "hi Ada",
        "trail": ["parent", "child said hi Ada!"],
        "summary": "hi Ada!",
    }
    assert result.path == ["greet", "nested", "done"]

    child_id, grandchild_id = f"{run.id}.2", f"{run.id}.2.2"  # <parent>.<step of the subgraph node>
    parent, child, grandchild = (cluster.run(i).snapshot() for i in (run.id, child_id, grandchild_id))
    assert parent.children == (child_id,) and parent.parent is None
    assert child.parent is not None and child.parent.run_id == run.id
    assert child.children == (grandchild_id,)
    assert grandchild.parent is not None and grandchild.parent.run_id == child_id
    assert grandchild.children == ()
    assert (parent.graph_id, child.graph_id, grandchild.graph_id) == (
        ids["parent"],
        ids["child"],
        ids["grandchild"],
    )
    assert (parent.depth, child.depth, grandchild.depth) == (0, 1, 2)
    assert child.status.value == grandchild.status.value == "completed"
    # projection in: the child's input from a parent field, its state seeded from another
    assert child.inputs == {"text": "hi Ada"}
    assert child.state["trail"] == ["parent", "child got hi Ada", "grandchild said hi Ada!"]
    assert grandchild.inputs == {"word": "hi Ada"} and grandchild.output == {"shout": "hi Ada!"}
    # no worker waited on a child: the parent's subgraph step is one record, committed at the end
    assert [s["node"] for s in run.steps()] == ["greet", "nested", "done"]

    local = local_run(load_graph(path), {"name": "Ada"})
    assert local.status == "completed"
    assert (local.state, local.output, local.path) == (result.state, result.output, result.path)


def recursive_graph(folder: Path) -> Path:
    graph_id = f"sem/recurse-{uid()}"
    return write(
        folder,
        "recurse.yaml",
        f"""
        id: {graph_id}
        state: {{n: {{type: integer, default: 0}}}}
        config: {{start: again, max_depth: 2}}
        nodes:
          again:
            type: subgraph
            graph: {graph_id}
            assign: {{n: 1}}
            next: done
          done: {{type: return}}
        """,
    )


def test_recursion_beyond_max_depth_fails_every_level(cluster: Client, tmp_path: Path) -> None:
    path = recursive_graph(tmp_path)
    run = cluster.submit(path)
    result = run.wait(timeout=30)
    assert result.status == "failed"
    assert result.error is not None and result.error.node == "again"
    assert "max_depth 2" in result.error.message
    # depth 0 -> 1 -> 2; the run at depth 2 may not start a third level
    deepest = cluster.run(f"{run.id}.1.1").snapshot()
    assert deepest.depth == 2 and deepest.children == ()
    assert deepest.status.value == "failed"
    assert deepest.error is not None and deepest.error.node == "again"
    assert "deeper than max_depth 2" in deepest.error.message
    assert cluster.run(f"{run.id}.1").snapshot().status.value == "failed"
    with pytest.raises(RunNotFound):
        cluster.run(f"{run.id}.1.1.1")

    local = local_run(load_graph(path))
    assert local.status == "failed" and local.error is not None
    assert (local.error.node, local.error.type) == ("again", result.error.type)


def test_recursion_beyond_max_depth_is_limit_exceeded(cluster: Client, tmp_path: Path) -> None:
    # Regression (fixed in 0103fb0): the run whose subgraph node would nest deeper than
    # max_depth failed with `node_exception` instead of `limit_exceeded`, because
    # engine/step.py `_after_child` turned every failed ChildOutcome, including engine.too_deep's
    # limit_exceeded error, into a "permanent" SubgraphFailed failure (cluster and in-process).
    path = recursive_graph(tmp_path)
    run = cluster.submit(path)
    run.wait(timeout=30)
    deepest = cluster.run(f"{run.id}.1.1").snapshot()
    assert deepest.error is not None
    assert deepest.error.type == "limit_exceeded", deepest.error
    at_the_limit = asyncio.run(LocalRunner().invoke(load_graph(path), depth=2))  # in-process, directly
    assert at_the_limit.error is not None and at_the_limit.error.node == "again"
    assert at_the_limit.error.type == "limit_exceeded", at_the_limit.error


def test_a_child_run_inherits_the_parents_capabilities(cluster: Client, tmp_path: Path) -> None:
    child_id, parent_id = f"sem/caps-child-{uid()}", f"sem/caps-parent-{uid()}"
    write(
        tmp_path,
        "child.yaml",
        f"""
        id: {child_id}
        config: {{start: run_shell}}
        nodes:
          run_shell:
            action: {{tool: shell, params: {{argv: [echo, hi]}}}}
            assign: {{out: "${{result.stdout}}"}}
        """,
    )
    path = write(
        tmp_path,
        "parent.yaml",
        f"""
        id: {parent_id}
        config: {{start: hello}}
        nodes:
          hello: {{action: {{tool: echo, params: {{x: 1}}}}, next: sub}}
          sub: {{type: subgraph, graph: {child_id}, next: done}}
          done: {{type: return}}
        """,
    )
    caps = ["tool:echo", "graph:*"]
    run = cluster.submit(path, capabilities=caps)
    result = run.wait(timeout=30)
    assert result.status == "failed"
    assert result.error is not None and result.error.node == "sub"
    assert "tool:shell" in result.error.message
    child = cluster.run(f"{run.id}.2").snapshot()
    assert child.capabilities == tuple(caps)  # inherited, never widened
    assert child.status.value == "failed"
    assert child.error is not None and child.error.type == "permission_denied"
    assert child.error.node == "run_shell" and "tool:shell" in child.error.message
    assert "out" not in child.state  # nothing ran

    local = local_run(load_graph(path), capabilities=caps)
    assert local.status == "failed" and local.error == result.error
    assert cluster.submit(path).wait(timeout=30).status == "completed"  # the default: everything


def pausing_child_graphs(folder: Path) -> Path:
    """A parent whose subgraph pauses for approval; the verdict comes back through `result`."""
    child_id, parent_id = f"sem/ask-child-{uid()}", f"sem/ask-parent-{uid()}"
    write(
        folder,
        "child.yaml",
        f"""
        id: {child_id}
        state: {{approved: {{type: boolean, default: false}}}}
        config: {{start: ask}}
        nodes:
          ask: {{type: pause, next: [{{to: good, when: "state.approved"}}, {{to: bad}}]}}
          bad: {{type: return, output: {{verdict: rejected}}}}
          good: {{type: return, output: {{verdict: approved}}}}
        """,
    )
    return write(
        folder,
        "parent.yaml",
        f"""
        id: {parent_id}
        state: {{verdict: string}}
        config: {{start: sub}}
        nodes:
          sub: {{type: subgraph, graph: {child_id}, assign: {{verdict: "${{result.verdict}}"}}, next: done}}
          done: {{type: return, output: {{verdict: "${{state.verdict}}"}}}}
        """,
    )


def test_a_child_that_pauses_parks_its_parent_until_the_child_is_resumed(
    cluster: Client, tmp_path: Path
) -> None:
    run = cluster.submit(pausing_child_graphs(tmp_path))
    child_id = f"{run.id}.1"

    def child_paused() -> bool:  # the parent lists the child just before the child run is created
        try:
            return cluster.run(child_id).status() == "paused"
        except RunNotFound:
            return False

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not child_paused():
        time.sleep(0.05)
    assert cluster.run(child_id).status() == "paused"
    wait_for(lambda: run.status() == "paused", 30, "the parent to pause with its child")
    parent = run.snapshot()  # paused, its step still suspended on the child, naming it
    assert parent.wait is not None and parent.wait.kind == "child" and parent.wait.child == child_id
    assert parent.paused_at is not None and parent.paused_at.run_id == child_id
    result = cluster.resume(child_id, state_patch={"approved": True}).wait(timeout=30)
    assert result.status == "completed"
    assert run.wait(timeout=30).output == {"verdict": "approved"}


def test_a_child_that_pauses_in_process_pauses_its_parent(tmp_path: Path) -> None:
    # in-process nothing can park the parent, so it ends paused at the subgraph node, with
    # nothing assigned (the cluster parks it until the child is resumed: test above)
    local = local_run(load_graph(pausing_child_graphs(tmp_path)))
    assert local.status == "paused", local.error
    assert local.path == ["sub"] and local.state.get("verdict") is None


def test_an_error_hook_retry_runs_the_subgraph_again_as_a_new_child_run(
    cluster: Client, tmp_path: Path
) -> None:
    child_id = f"sem/failing-child-{uid()}"
    write(
        tmp_path,
        "child.yaml",
        f"""
        id: {child_id}
        config: {{start: bad}}
        nodes:
          bad: {{action: {{tool: fail, params: {{message: nope}}}}}}
        """,
    )
    log = tmp_path / "hooks.jsonl"
    path = write(
        tmp_path,
        "parent.yaml",
        f"""
        id: sem/retrying-parent-{uid()}
        config:
          start: sub
          hooks:
            - {hook("error", log, answer="retry")}
        nodes:
          sub: {{type: subgraph, graph: {child_id}, next: done}}
          done: {{type: return}}
        """,
    )
    run = cluster.submit(path)
    result = run.wait(timeout=30)
    assert result.status == "failed" and result.error is not None and result.error.node == "sub"
    assert "ended failed: nope" in result.error.message
    children = run.snapshot().children
    assert len(children) == 4 and len(set(children)) == 4  # the first try and 3 hook retries
    assert children[0] == f"{run.id}.1" and all(c.startswith(f"{run.id}.1.") for c in children[1:])
    assert {cluster.run(c).status() for c in children} == {"failed"}
    assert len(records(log)) == 4
    assert [(s["step"], s["node"], s["status"]) for s in result.steps] == [(1, "sub", "error")]
    local = local_run(load_graph(path))
    assert (local.status, local.error) == (result.status, result.error)


# --- 2. retries ----------------------------------------------------------------------------------


def flaky_graph(graph_id: str, failures: int, retry: str, *, recover: bool = False) -> str:
    """A python call that fails `failures` times; with `recover`, `on_error` routes to a gate."""
    text = graph_text(f"""
        id: {graph_id}
        inputs: {{path: {{type: string, required: true}}}}
        state: {{got: any, calls: integer}}
        config: {{start: call}}
        nodes:
          call:
            action: {{tool: python, params: {{fn: "{TARGETS}:flaky", args: {{path: "${{inputs.path}}", failures: {failures}}}}}}}
            retry: {retry}
            assign: {{got: "${{result.value}}", calls: "${{result.calls}}"}}
            next: done
          done: {{type: return}}
    """)
    if recover:
        text = text.replace("    next: done\n", "    on_error: recover\n    next: done\n").replace(
            "  done:",
            '  recover: {type: gate, assign: {got: "${state._last_error.attempts}"}, next: done}\n  done:',
        )
    return text


def test_retry_then_success_with_retry_records(cluster: Client, tmp_path: Path) -> None:
    graph = parse_graph(flaky_graph(f"sem/retry-{uid()}", 2, "{max_attempts: 3, initial: 0, jitter: 0}"))
    result = cluster.submit(graph, {"path": str(tmp_path / "cluster")}).wait(timeout=30)
    assert result.status == "completed", result.error
    assert result.state == {"got": "ok", "calls": 3}
    assert len(records(tmp_path / "cluster")) == 3
    retries = steps_of(result, "retry")
    assert [(r["step"], r["node"], r["attempts"], r["retry_in_s"]) for r in retries] == [
        (1, "call", 1, 0),
        (1, "call", 2, 0),
    ]
    for r in retries:
        assert r["error"]["type"] == "transient" and r["error"]["error_type"] == "ConnectionError"
    assert "attempt 1 of 2 failing" in retries[0]["error"]["message"]
    assert [s["status"] for s in result.steps] == ["retry", "retry", "ok", "end"]
    assert result.steps[2]["attempts"] == 3

    local = local_run(graph, {"path": str(tmp_path / "local")})
    assert local.state == result.state and local.path == result.path
    assert [s["status"] for s in local.steps] == [s["status"] for s in result.steps]


def test_retries_exhausted_then_on_error_routes_to_recovery(cluster: Client, tmp_path: Path) -> None:
    text = flaky_graph(f"sem/exhausted-{uid()}", 99, "{max_attempts: 3, initial: 0, jitter: 0}", recover=True)
    graph = parse_graph(text)
    result = cluster.submit(graph, {"path": str(tmp_path / "cluster")}).wait(timeout=30)
    assert result.status == "completed", result.error
    assert result.path == ["call", "recover", "done"]
    last = result.state["_last_error"]
    assert (last["node"], last["type"], last["attempts"], last["step"]) == ("call", "transient", 3, 1)
    assert result.state["got"] == 3
    assert len(records(tmp_path / "cluster")) == 3
    assert [(s["status"], s.get("attempts")) for s in result.steps[:3]] == [
        ("retry", 1),
        ("retry", 2),
        ("error", 3),
    ]
    local = local_run(graph, {"path": str(tmp_path / "local")})
    assert local.state == result.state and local.path == result.path


def test_a_long_backoff_suspends_the_step_instead_of_sleeping(cluster: Client, tmp_path: Path) -> None:
    graph = parse_graph(flaky_graph(f"sem/backoff-{uid()}", 1, "{max_attempts: 2, initial: 1.5, jitter: 0}"))
    started = time.monotonic()
    run = cluster.submit(graph, {"path": str(tmp_path / "calls")})
    waits: list[dict[str, Any]] = []
    while time.monotonic() - started < 10:
        snap = run.snapshot()
        if snap.status.finished:
            break
        if snap.wait is not None:
            waits.append(dict(snap.wait))
        time.sleep(0.05)
    result = run.wait(timeout=30)
    elapsed = time.monotonic() - started
    assert result.status == "completed", result.error
    assert result.state == {"got": "ok", "calls": 2}
    assert elapsed >= 1.5
    assert waits and {w["kind"] for w in waits} == {"retry"}  # seen while it waited
    assert waits[0]["attempt"] == 2
    (retry,) = steps_of(result, "retry")
    assert retry["attempts"] == 1 and retry["retry_in_s"] == pytest.approx(1.5)
    assert result.steps[1]["attempts"] == 2
    snap = run.snapshot()
    assert snap.wait is None and snap.phase == 0


# --- 3. node timeouts ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def slow_http() -> Iterator[str]:
    """A local HTTP server that answers after 5 s (or when the test is over)."""
    release = threading.Event()

    class Slow(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            release.wait(5)
            try:
                self.send_response(200)
                self.send_header("content-length", "2")
                self.end_headers()
                self.wfile.write(b"ok")
            except OSError:
                pass  # the client gave up

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Slow)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/slow"
    finally:
        release.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


TIMEOUT_ACTIONS = {
    "python": f'{{tool: python, params: {{fn: "{TARGETS}:slow", args: {{seconds: 5}}}}}}',
    "shell": '{tool: shell, params: {argv: [sleep, "5"]}}',
    "http": '{tool: http, params: {method: GET, url: "URL"}}',
}


@pytest.mark.parametrize("tool", list(TIMEOUT_ACTIONS))
def test_node_timeout_fails_the_node_within_the_timeout(cluster: Client, slow_http: str, tool: str) -> None:
    action = TIMEOUT_ACTIONS[tool].replace("URL", slow_http)
    graph = parse_graph(
        graph_text(f"""
        id: sem/timeout-{tool}-{uid()}
        config: {{start: hang}}
        nodes:
          hang:
            action: {action}
            timeout: 0.5
            retry: {{max_attempts: 1}}
            next: done
          done: {{type: return}}
        """)
    )
    started = time.monotonic()
    result = cluster.submit(graph).wait(timeout=30)
    elapsed = time.monotonic() - started
    assert result.status == "failed"
    assert result.error is not None
    assert result.error.type == "timeout", result.error
    assert result.error.node == "hang"
    assert "node 'hang'" in result.error.message and "0.5s" in result.error.message
    assert elapsed < 3, elapsed  # the timeout, not the 5 s of work
    assert result.state["_last_error"]["type"] == "timeout"


# --- 4. pause and resume -------------------------------------------------------------------------


def approval_graph(graph_id: str) -> str:
    return graph_text(f"""
        id: {graph_id}
        state:
          approved: {{type: boolean, default: false}}
          log: {{type: list, default: [], reducer: append}}
        config: {{start: ask}}
        nodes:
          ask:
            type: pause
            message: approve?
            assign: {{log: [asked]}}
            next: [{{to: ship, when: "state.approved"}}, {{to: reject}}]
          ship: {{type: gate, assign: {{log: [shipped]}}, next: done}}
          reject: {{type: gate, assign: {{log: [rejected]}}, next: done}}
          done: {{type: return, output: {{log: "${{state.log}}"}}}}
    """)


def paused_run(cluster: Client, graph: Graph) -> RunHandle:
    run = cluster.submit(graph)
    assert run.wait(timeout=30).status == "paused"
    return run


def test_pause_then_resume_with_a_patch_through_the_client(cluster: Client) -> None:
    graph = parse_graph(approval_graph(f"sem/approve-{uid()}"))
    local = local_run(graph)
    approved, rejected = paused_run(cluster, graph), paused_run(cluster, graph)
    snap = approved.snapshot()
    assert (snap.status.value, snap.node, snap.state["log"]) == ("paused", "ask", ["asked"])
    assert local.status == "paused" and local.state == snap.state and local.path == ["ask"]

    result = cluster.resume(approved.id, state_patch={"approved": True}).wait(timeout=30)
    assert result.status == "completed", result.error
    assert result.output == {"log": ["asked", "shipped"]}
    assert result.state["approved"] is True
    assert result.path == ["ask", "ship", "done"]
    resumed = [s for s in result.steps if s["status"] == "resumed"]
    assert len(resumed) == 1 and resumed[0]["from"] == "paused" and resumed[0]["changed_keys"] == ["approved"]

    other = cluster.resume(rejected.id).wait(timeout=30)  # no patch: routes on the state as it was
    assert other.output == {"log": ["asked", "rejected"]}


def test_a_failed_run_resumes_at_its_node(cluster: Client, tmp_path: Path) -> None:
    graph = parse_graph(flaky_graph(f"sem/resume-failed-{uid()}", 1, "{max_attempts: 1}"))
    run = cluster.submit(graph, {"path": str(tmp_path / "calls")})
    failed = run.wait(timeout=30)
    assert failed.status == "failed" and failed.error is not None and failed.error.node == "call"
    result = cluster.resume(run.id).wait(timeout=30)
    assert result.status == "completed", result.error
    assert result.state["calls"] == 2 and result.path == ["call", "call", "done"]


def test_pause_then_resume_through_the_cli(cluster: Client, cli_env: dict[str, str | None]) -> None:
    graph = parse_graph(approval_graph(f"sem/approve-cli-{uid()}"))
    run = paused_run(cluster, graph)
    result = cli(cli_env, "resume", run.id, "--state", '{"approved": true}', "--wait", "--json")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["run_id"] == run.id and data["status"] == "completed"
    assert data["output"] == {"log": ["asked", "shipped"]}
    assert data["path"] == ["ask", "ship", "done"]

    other = paused_run(cluster, graph)
    quick = cli(cli_env, "resume", other.id, "--json")  # without --wait: at once
    assert quick.exit_code == 0, quick.stderr
    assert json.loads(quick.stdout)["run_id"] == other.id
    assert other.wait(timeout=30).output == {"log": ["asked", "rejected"]}


def test_resume_bad_input_through_the_client(cluster: Client) -> None:
    graph = parse_graph(approval_graph(f"sem/approve-bad-{uid()}"))
    run = paused_run(cluster, graph)
    before, before_steps = run.snapshot(), run.steps()

    with pytest.raises(StateValidationError, match="approved") as info:
        cluster.resume(run.id, state_patch={"approved": "yes"})
    assert "approved" in info.value.fields or "approved" in str(info.value)
    assert run.snapshot() == before and run.steps() == before_steps  # unchanged, still paused
    assert run.status() == "paused"

    with pytest.raises(RunNotFound, match="never-"):
        cluster.resume(f"never-{uid()}")
    with pytest.raises(InvalidRunId):
        cluster.resume("{not a run id}")

    done = cluster.resume(run.id, state_patch={"approved": True}).wait(timeout=30)
    assert done.status == "completed"
    with pytest.raises(ResumeError, match="completed and cannot be resumed"):
        cluster.resume(run.id)
    assert run.steps() == done.steps


def test_resume_bad_input_through_the_cli(cluster: Client, cli_env: dict[str, str | None]) -> None:
    graph = parse_graph(approval_graph(f"sem/approve-badcli-{uid()}"))
    run = paused_run(cluster, graph)
    before = run.snapshot()

    unknown = cli(cli_env, "resume", "no-such-run-" + uid())
    assert unknown.exit_code in (1, 2) and unknown.stderr.startswith("error: no run with id")
    assert no_traceback(unknown)

    malformed = cli(cli_env, "resume", "{bad id}")
    assert malformed.exit_code == 2 and malformed.stderr.startswith("error: invalid run id")
    assert no_traceback(malformed)

    wrong_type = cli(cli_env, "resume", run.id, "--state", '{"approved": "yes"}')
    assert wrong_type.exit_code == 2 and "approved" in wrong_type.stderr
    assert no_traceback(wrong_type)
    for not_an_object in ("[1, 2]", '"approved"', "{not json", "true"):
        bad = cli(cli_env, "resume", run.id, "--state", not_an_object)
        assert bad.exit_code == 2, (not_an_object, bad.output)
        assert "--state" in bad.stderr and no_traceback(bad)
    assert run.snapshot() == before  # none of them touched the run

    assert cli(cli_env, "resume", run.id, "--wait").exit_code == 0
    completed = cli(cli_env, "resume", run.id)
    assert completed.exit_code == 1
    assert "cannot be resumed" in completed.stderr and no_traceback(completed)


def test_resume_of_an_unknown_run_from_a_subprocess(redis_server: EmbeddedRedis) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRAPHRUNNER_")}
    proc = subprocess.run(
        [sys.executable, "-m", "graphrunner", "resume", "no-such-run", "--state", '{"approved": true}'],
        capture_output=True,
        encoding="utf-8",
        env={**env, "GRAPHRUNNER_REDIS_URL": redis_server.url},
        cwd=ROOT,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 1
    assert proc.stderr == "error: no run with id 'no-such-run'\n" and proc.stdout == ""


# --- 5. durable sleep on a single-slot worker ------------------------------------------------------


def test_a_durable_sleep_holds_no_worker_slot(
    redis_server: EmbeddedRedis, worker_env: dict[str, Any], tmp_path: Path
) -> None:
    sleeper = parse_graph(
        graph_text(f"""
        id: sem/sleeper-{uid()}
        config: {{start: nap}}
        nodes:
          nap: {{action: {{tool: sleep, params: {{seconds: 2}}}}, next: done}}
          done: {{type: return}}
        """)
    )
    busy = parse_graph(
        graph_text(f"""
        id: sem/busy-{uid()}
        state: {{n: {{type: integer, default: 0}}}}
        config: {{start: tick, max_steps: 50}}
        nodes:
          tick:
            action: {{tool: echo, params: {{n: "${{state.n}}"}}}}
            assign: {{n: "${{result.n + 1}}"}}
            next: [{{to: done, when: "state.n >= 5"}}, {{to: tick}}]
          done: {{type: return, output: {{n: "${{state.n}}"}}}}
        """)
    )
    with dedicated_worker(redis_server, worker_env, tmp_path, concurrency=1) as client:
        started = time.monotonic()
        a = client.submit(sleeper)
        b = client.submit(busy)
        b_result = b.wait(timeout=30)
        b_done = time.monotonic() - started
        a_status_then = a.snapshot()
        a_result = a.wait(timeout=30)
        a_done = time.monotonic() - started
    assert b_result.status == "completed" and b_result.output == {"n": 5}
    assert b_result.step_count == 6
    assert a_status_then.status.value == "running"  # B finished while A slept
    assert a_status_then.wait is not None and a_status_then.wait.kind == "timer"
    assert b_done < a_done and b_done < 2.0
    assert a_result.status == "completed" and a_result.state == {}
    assert a_done >= 2.0
    sleeping = steps_of(a_result, "sleeping")
    assert len(sleeping) == 1 and sleeping[0]["sleep_s"] == 2 and sleeping[0]["node"] == "nap"
    workers = {s["worker"] for s in a_result.steps + b_result.steps}
    assert len(workers) == 1  # all on the one pool process of the dedicated worker
    assert not any(w.endswith(f":{os.getpid()}") for w in workers)


# --- 6. the node result cache --------------------------------------------------------------------


def cached_graph(graph_id: str) -> str:
    return graph_text(f"""
        id: {graph_id}
        inputs: {{x: {{type: integer, required: true}}, path: {{type: string, required: true}}}}
        config: {{start: calc}}
        nodes:
          calc:
            action: {{tool: python, params: {{fn: "{TARGETS}:doubled", args: {{path: "${{inputs.path}}", x: "${{inputs.x}}"}}}}}}
            cache_result: true
            assign: {{y: "${{result.doubled}}"}}
            next: done
          done: {{type: return, output: {{y: "${{state.y}}"}}}}
    """)


def test_cache_result_runs_the_tool_once_per_input(cluster: Client, tmp_path: Path) -> None:
    graph = parse_graph(cached_graph(f"sem/cache-{uid()}"))
    calls = str(tmp_path / "cluster-calls")
    first = cluster.submit(graph, {"x": 3, "path": calls}).wait(timeout=30)
    second = cluster.submit(graph, {"x": 3, "path": calls}).wait(timeout=30)
    assert first.output == second.output == {"y": 6}
    assert records(calls) == [{"x": 3}]  # the tool ran once
    assert (first.steps[0]["cache_hit"], first.steps[0]["attempts"]) == (False, 1)
    assert (second.steps[0]["cache_hit"], second.steps[0]["attempts"]) == (True, 0)
    third = cluster.submit(graph, {"x": 4, "path": calls}).wait(timeout=30)
    assert third.output == {"y": 8} and third.steps[0]["cache_hit"] is False
    assert records(calls) == [{"x": 3}, {"x": 4}]
    redis = cluster.store.redis
    ttls = [
        redis.ttl(k) for k in redis.scan_iter(match="*cache:*") if json.loads(redis.get(k)) == {"doubled": 8}
    ]
    assert ttls and all(0 < t <= 86400 for t in ttls)  # GRAPHRUNNER_CACHE_TTL's default, a day


def test_cache_ttl_comes_from_the_worker_settings(
    redis_server: EmbeddedRedis, worker_env: dict[str, Any], tmp_path: Path
) -> None:
    graph = parse_graph(cached_graph(f"sem/cache-ttl-{uid()}"))
    calls = str(tmp_path / "calls")
    with dedicated_worker(redis_server, worker_env, tmp_path, GRAPHRUNNER_CACHE_TTL="1") as client:
        first = client.submit(graph, {"x": 7, "path": calls}).wait(timeout=30)
        second = client.submit(graph, {"x": 7, "path": calls}).wait(timeout=30)
        time.sleep(1.2)  # the cached result expires
        third = client.submit(graph, {"x": 7, "path": calls}).wait(timeout=30)
    assert first.output == second.output == third.output == {"y": 14}
    assert [r.steps[0]["cache_hit"] for r in (first, second, third)] == [False, True, False]
    assert len(records(calls)) == 2


def test_cache_result_in_process_is_per_runner(tmp_path: Path) -> None:
    graph = parse_graph(cached_graph(f"sem/cache-local-{uid()}"))
    calls = str(tmp_path / "local-calls")
    runner = LocalRunner()
    first = asyncio.run(runner.invoke(graph, {"x": 3, "path": calls}))
    second = asyncio.run(runner.invoke(graph, {"x": 3, "path": calls}))
    assert first.output == second.output == {"y": 6}
    assert len(records(calls)) == 1 and second.steps[0]["cache_hit"] is True
    asyncio.run(runner.invoke(graph, {"x": 5, "path": calls}))
    assert len(records(calls)) == 2
    for _ in range(2):  # graph.invoke: a fresh runner and cache each time
        assert local_run(graph, {"x": 3, "path": calls}).steps[0]["cache_hit"] is False
    assert len(records(calls)) == 4


# --- 7. hooks ------------------------------------------------------------------------------------

EVENTS = ("graph_started", "after_step", "error", "limit", "graph_completed")


def all_events_graph(graph_id: str, log: Path, extra_hooks: tuple[str, ...] = ()) -> str:
    hooks = "\n".join(f"    - {h}" for h in (*(hook(e, log) for e in EVENTS), *extra_hooks))
    return (
        graph_text(f"""
        id: {graph_id}
        state: {{n: {{type: integer, default: 0}}}}
        config:
          start: boom
          max_steps: 3
          hooks:
        """)
        + hooks
        + "\n"
        + graph_text("""
        nodes:
          boom: {action: {tool: fail, params: {message: kaboom}}, on_error: spin}
          spin: {type: gate, assign: {n: "${state.n + 1}"}, next: spin}
        """)
    )


def test_every_hook_event_fires_on_the_cluster_with_its_context(cluster: Client, tmp_path: Path) -> None:
    graph_id = f"sem/hooks-{uid()}"
    log = tmp_path / "cluster.jsonl"
    result = cluster.submit(parse_graph(all_events_graph(graph_id, log))).wait(timeout=30)
    assert result.status == "failed" and result.error is not None
    assert result.error.type == "limit_exceeded"
    # hooks fire after their step commits, and the commit already sent the next step: the hooks
    # of consecutive steps may run at the same time on two workers, so the log is put in step order
    seen = sorted((r["event"] for r in wait_for_records(log, fired("graph_completed"))), key=step_of_event)
    assert [e["name"] for e in seen] == [
        "graph_started",
        "error",
        "after_step",
        "after_step",
        "after_step",
        "limit",
        "graph_completed",
    ]
    assert seen[0] == {"name": "graph_started", "graph_id": graph_id}
    assert seen[1]["node"] == "boom" and seen[1]["classification"] == "permanent"
    assert seen[1]["error"]["message"] == "kaboom" and seen[1]["step_count"] == 1  # the failing step
    assert seen[2] == {
        "name": "after_step",
        "node": "boom",
        "next_node": "spin",
        "step_count": 1,
        "result": None,
    }
    assert seen[5] == {"name": "limit", "limit_code": "max_steps", "current_value": 3, "current_max": 3}
    assert seen[6]["status"] == "failed" and seen[6]["steps"] == 3
    assert result.error is not None and seen[6]["error"] == result.error.to_dict()

    local_log = tmp_path / "local.jsonl"
    local = local_run(parse_graph(all_events_graph(graph_id, local_log)))
    assert local.status == result.status and local.state == result.state
    assert [r["event"] for r in records(local_log)] == seen  # in-process: all fired before invoke returns


def step_of_event(event: dict[str, Any]) -> int:
    """The step a hook event belongs to (the step being taken when it fired)."""
    name = event["name"]
    if name == "graph_started":
        return 0
    if name in ("after_step", "error"):
        return int(event["step_count"])
    if name == "limit":
        return int(event["current_value"]) + 1
    return int(event["steps"]) + 1  # graph_completed


ANSWERS = [
    # answer, failures of the node, status, path, log, node calls, hook calls
    ("", 1, "completed", ["work", "recover", "done"], ["recovered"], 1, 1),
    ("continue", 1, "completed_with_errors", ["work", "done"], [], 1, 1),
    ("fail", 1, "failed", ["work"], [], 1, 1),
    ("retry", 1, "completed", ["work", "done"], ["worked"], 2, 1),
    # at most 3 hook retries per step; then the error is handled as without an answer
    ("retry", 99, "completed", ["work", "recover", "done"], ["recovered"], 4, 4),
]


def answering_graph(graph_id: str, log: Path, calls: Path, answer: str, failures: int) -> str:
    return graph_text(f"""
        id: {graph_id}
        state: {{log: {{type: list, default: [], reducer: append}}}}
        config:
          start: work
          hooks:
            - {hook("error", log, answer=answer or None)}
        nodes:
          work:
            action: {{tool: python, params: {{fn: "{TARGETS}:flaky", args: {{path: "{calls}", failures: {failures}}}}}}}
            retry: {{max_attempts: 1}}
            on_error: recover
            assign: {{log: [worked]}}
            next: done
          recover: {{type: gate, assign: {{log: [recovered]}}, next: done}}
          done: {{type: return, output: {{log: "${{state.log}}"}}}}
    """)


@pytest.mark.parametrize(("answer", "failures", "status", "path", "log", "node_calls", "hook_calls"), ANSWERS)
def test_graph_error_hook_answers_control_flow(
    cluster: Client,
    tmp_path: Path,
    answer: str,
    failures: int,
    status: str,
    path: list[str],
    log: list[str],
    node_calls: int,
    hook_calls: int,
) -> None:
    graph_id = f"sem/answer-{answer or 'none'}-{uid()}"
    text = answering_graph(graph_id, tmp_path / "hooks", tmp_path / "calls", answer, failures)
    result = cluster.submit(parse_graph(text)).wait(timeout=30)
    assert result.status == status, result.error
    assert result.path == path and result.state["log"] == log
    assert len(records(tmp_path / "calls")) == node_calls
    assert len(records(tmp_path / "hooks")) == hook_calls
    if status == "failed":
        assert result.error is not None and result.error.node == "work"
    if answer == "continue":
        assert result.errors_suppressed == 1 and result.errors[0].node == "work"

    local_text = answering_graph(graph_id, tmp_path / "lhooks", tmp_path / "lcalls", answer, failures)
    local = local_run(parse_graph(local_text))
    assert (local.status, local.path, local.state["log"]) == (status, path, log)
    assert len(records(tmp_path / "lcalls")) == node_calls


def test_a_hook_that_raises_does_not_break_the_run(cluster: Client, tmp_path: Path) -> None:
    raising = tmp_path / "raised"
    broken = {
        "action": {
            "tool": "python",
            "params": {"fn": f"{TARGETS}:hook_raises", "args": {"path": str(raising)}},
        }
    }
    hooks = "\n".join(
        f"    - {json.dumps({'event': e, **broken})}"
        for e in ("graph_started", "error", "after_step", "graph_completed")
    )
    text = (
        graph_text(f"""
        id: sem/hook-raises-{uid()}
        state: {{log: {{type: list, default: [], reducer: append}}}}
        config:
          start: work
          hooks:
        """)
        + hooks
        + "\n"
        + graph_text("""
        nodes:
          work: {action: {tool: fail, params: {message: nope}}, on_error: recover}
          recover: {type: gate, assign: {log: [recovered]}, next: done}
          done: {type: return, output: {log: "${state.log}"}}
        """)
    )
    result = cluster.submit(parse_graph(text)).wait(timeout=30)
    assert result.status == "completed", result.error
    assert result.path == ["work", "recover", "done"] and result.output == {"log": ["recovered"]}
    # graph_started, error, after_step x3 (work, recover, done), graph_completed: each one raised
    assert len(wait_for_records(raising, lambda found: len(found) >= 6)) == 6


def test_deployment_hooks_see_every_event_after_the_graph_hooks_and_only_observe(
    redis_server: EmbeddedRedis, worker_env: dict[str, Any], tmp_path: Path
) -> None:
    log = tmp_path / "events.jsonl"
    deploy = [hook(e, log, tag="deploy") for e in EVENTS if e != "error"]
    deploy.append(hook("error", log, tag="deploy", answer="fail"))  # ignored: deployment hooks observe
    deploy.append(hook("after_step", log, tag="deploy-when", when="event.node == 'boom'"))
    hooks_file = tmp_path / "hooks.yaml"
    hooks_file.write_text("hooks:\n" + "".join(f"  - {h}\n" for h in deploy), encoding="utf-8")
    # the graph's own error hook answers `continue`: the run goes on past `boom`
    graph = parse_graph(
        all_events_graph(
            f"sem/deploy-{uid()}", log, (hook("error", log, tag="graph-answer", answer="continue"),)
        ).replace("on_error: spin", "next: spin")
    )
    with dedicated_worker(redis_server, worker_env, tmp_path, GRAPHRUNNER_HOOKS=str(hooks_file)) as client:
        result = client.submit(graph).wait(timeout=30)
        found = wait_for_records(log, fired("graph_completed", "deploy"))  # before the worker stops
    # the graph hook's `continue` decided; the deployment's `fail` did not end the run at boom
    assert result.status == "failed" and result.error is not None
    assert result.error.type == "limit_exceeded" and result.path == ["boom", "spin", "spin"]
    assert result.errors_suppressed == 1
    seen = [(r["tag"], r["event"]["name"]) for r in found]
    assert seen == [
        ("graph", "graph_started"),
        ("deploy", "graph_started"),
        ("graph", "error"),
        ("graph-answer", "error"),
        ("deploy", "error"),
        ("graph", "after_step"),
        ("deploy", "after_step"),
        ("deploy-when", "after_step"),
        ("graph", "after_step"),
        ("deploy", "after_step"),
        ("graph", "after_step"),
        ("deploy", "after_step"),
        ("graph", "limit"),
        ("deploy", "limit"),
        ("graph", "graph_completed"),
        ("deploy", "graph_completed"),
    ]
    by_tag: dict[str, list[Any]] = {}
    for r in found:
        by_tag.setdefault(r["tag"], []).append(r["event"])
    assert by_tag["deploy"] == by_tag["graph"]  # the same events with the same context


BAD_HOOKS_FILES = {
    "unknown-event": "hooks:\n  - {event: on_fire, action: {tool: echo, params: {}}}\n",
    "unknown-tool": "hooks:\n  - {event: error, action: {tool: teleport, params: {}}}\n",
    "bad-expression": 'hooks:\n  - {event: error, when: "event.node ==", action: {tool: echo, params: {}}}\n',
    "not-hooks": "- {event: error, action: {tool: echo, params: {}}}\n",
}


@pytest.mark.parametrize("case", list(BAD_HOOKS_FILES))
def test_a_bad_deployment_hooks_file_stops_the_worker_command(
    cli_env: dict[str, str | None], tmp_path: Path, case: str
) -> None:
    path = tmp_path / f"{case}.yaml"
    path.write_text(BAD_HOOKS_FILES[case], encoding="utf-8")
    result = cli({**cli_env, "GRAPHRUNNER_HOOKS": str(path)}, "worker", "-c", "1")
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("error: ") and str(path) in result.stderr
    assert no_traceback(result)
    expected = {
        "unknown-event": "hooks.0.event: Input should be 'graph_started'",
        "unknown-tool": "hooks.0.action: unknown tool 'teleport'",
        "bad-expression": "hooks.0.when: does not parse",
        "not-hooks": "expected a mapping with one key, 'hooks:'",
    }
    assert expected[case] in result.stderr


def test_a_bad_expression_in_the_hooks_file_is_located_as_written(
    cli_env: dict[str, str | None], tmp_path: Path
) -> None:
    # Regression (fixed in 0103fb0): the error read "config.hooks.0.when: config.hooks.0.when:
    # does not parse: ...", a doubled location naming `config.hooks`, which a hooks file does not
    # have: loading/hooks_file.py prefixed compile_hooks' graph-file issues with their location.
    path = tmp_path / "hooks.yaml"
    path.write_text(BAD_HOOKS_FILES["bad-expression"], encoding="utf-8")
    result = cli({**cli_env, "GRAPHRUNNER_HOOKS": str(path)}, "worker")
    assert result.exit_code == 2
    assert "config.hooks" not in result.stderr, result.stderr
    assert result.stderr.count("hooks.0.when") == 1


def test_a_bad_deployment_hooks_file_from_a_subprocess(worker_env: dict[str, Any], tmp_path: Path) -> None:
    path = tmp_path / "hooks.yaml"
    path.write_text(BAD_HOOKS_FILES["unknown-event"], encoding="utf-8")
    missing = tmp_path / "missing.yaml"
    for hooks_file in (path, missing):
        proc = subprocess.run(
            [sys.executable, "-m", "graphrunner", "worker", "-c", "1"],
            capture_output=True,
            encoding="utf-8",
            env={**worker_env, "GRAPHRUNNER_HOOKS": str(hooks_file)},
            cwd=ROOT,
            timeout=60,
            check=False,
        )
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.startswith("error: ") and str(hooks_file) in proc.stderr
        assert "Traceback" not in proc.stderr and proc.stdout == ""


def test_a_graph_hook_naming_an_unknown_event_fails_at_load(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "hooked.yaml",
        """
        id: sem/bad-hook
        config:
          start: a
          hooks:
            - {event: graph_started, action: {tool: echo, params: {}}}
            - {event: on_fire, action: {tool: echo, params: {}}}
        nodes: {a: {type: gate}}
        """,
    )
    with pytest.raises(GraphValidationError) as info:
        load_graph(path)
    (issue,) = info.value.issues
    assert issue.location == "config.hooks.1.event"
    assert "hooks.1.event" in str(info.value) and "on_fire" in str(info.value)


# --- 8. bad input at load ----------------------------------------------------------------------------


def test_a_subgraph_naming_a_missing_graph_is_unknown_graph(
    cluster: Client, cli_env: dict[str, str | None], tmp_path: Path
) -> None:
    path = write(
        tmp_path,
        "orphan.yaml",
        f"""
        id: sem/orphan-{uid()}
        config: {{start: sub}}
        nodes:
          sub: {{type: subgraph, graph: sem/no-such-graph}}
        """,
    )
    with pytest.raises(GraphValidationError) as info:
        load_graph(path)
    assert [(i.code, i.node) for i in info.value.issues] == [("unknown_graph", "sub")]
    assert "sem/no-such-graph" in str(info.value)
    with pytest.raises(GraphValidationError, match="unknown_graph"):
        cluster.submit(path)
    result = cli(cli_env, "validate", str(path), "--json")
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["valid"] is False
    assert [(e["code"], e["node"]) for e in report["errors"]] == [("unknown_graph", "sub")]


@pytest.mark.parametrize("retry", ["{initial: -1}", "[{max_attempts: 2}, {initial: -1, on: [permanent]}]"])
def test_a_negative_retry_delay_is_a_load_error(tmp_path: Path, retry: str) -> None:
    path = write(
        tmp_path,
        "negative.yaml",
        f"""
        id: sem/negative
        config: {{start: call}}
        nodes:
          call:
            action: {{tool: echo, params: {{}}}}
            retry: {retry}
        """,
    )
    with pytest.raises(GraphValidationError) as info:
        load_graph(path)
    (issue,) = info.value.issues
    assert issue.node == "call" and issue.location is not None
    assert issue.location.startswith("nodes.call.retry") and issue.location.endswith("initial")
    assert "node 'call'" in str(info.value) and "initial" in str(info.value)
