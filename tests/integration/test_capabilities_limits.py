"""Capabilities and limits on the cluster (DESIGN §2.8, §4, §7): denied dispatches run nothing,
children never widen their parent's capabilities, bad capabilities store nothing, the state size
limit keeps the last good state, on a worker in this process and in a worker process."""

from __future__ import annotations

import textwrap
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from support import settings_of, uid, write
from worker_procs import WorkerProcess

from graphrunner import InvalidCapabilities, LimitExceeded, load_graph, parse_graph
from graphrunner.cli import main
from graphrunner.client import Client
from graphrunner.embedded import EmbeddedRedis


def shell_graph(marker: Path, graph_id: str) -> str:
    return f"""
        id: {graph_id}
        config: {{start: hello}}
        nodes:
          hello: {{action: {{tool: echo, params: {{x: 1}}}}, assign: {{said: hi}}, next: touch}}
          touch:
            action: {{tool: shell, params: {{argv: [touch, "{marker}"]}}}}
            assign: {{touched: true}}
    """


def test_a_run_without_tool_shell_fails_at_the_shell_node_and_runs_nothing(
    cluster: Client, tmp_path: Path
) -> None:
    marker = tmp_path / "MARKER"
    graph = parse_graph(textwrap.dedent(shell_graph(marker, f"caps/shell-{uid()}")))
    run = cluster.submit(graph, capabilities=["tool:echo"])
    result = run.wait(timeout=30)
    assert result.status == "failed"
    assert result.error is not None and result.error.type == "permission_denied"
    assert result.error.node == "touch" and result.error.step == 2
    assert "tool 'shell' needs capability 'tool:shell'" in result.error.message
    assert not marker.exists()
    assert "touched" not in result.state and result.state["said"] == "hi"
    assert [(s["node"], s["status"]) for s in result.steps] == [("hello", "ok"), ("touch", "error")]
    assert run.snapshot().capabilities == ("tool:echo",)
    allowed = cluster.submit(graph, capabilities=["tool:echo", "tool:shell"]).wait(timeout=30)
    assert allowed.status == "completed" and marker.exists()


@pytest.mark.parametrize("parallel", [True, False])
def test_denied_foreach_items_run_nothing(cluster: Client, tmp_path: Path, parallel: bool) -> None:
    graph = parse_graph(
        textwrap.dedent(f"""
        id: caps/each-{uid()}
        config: {{start: each}}
        nodes:
          each:
            type: foreach
            over: [a, b, c]
            parallel: {str(parallel).lower()}
            action: {{tool: shell, params: {{argv: [touch, "{tmp_path}/${{item}}"]}}}}
            collect: done
    """)
    )
    result = cluster.submit(graph, capabilities=["tool:echo"]).wait(timeout=30)
    assert result.status == "failed"
    assert result.error is not None and result.error.type == "permission_denied"
    assert result.error.node == "each"
    assert "'tool:shell'" in result.error.message
    assert "done" not in result.state
    assert list(tmp_path.iterdir()) == []
    [record] = [s for s in result.steps if s["node"] == "each"]
    assert record["status"] == "error" and record["error"]["type"] == "permission_denied"


def test_a_child_run_never_gets_more_than_its_parent(cluster: Client, tmp_path: Path) -> None:
    marker = tmp_path / "MARKER"
    child_id, parent_id = f"caps/child-{uid()}", f"caps/parent-{uid()}"
    write(tmp_path, "child.yaml", shell_graph(marker, child_id))
    parent = write(
        tmp_path,
        "parent.yaml",
        f"""
        id: {parent_id}
        config: {{start: sub}}
        nodes:
          sub: {{type: subgraph, graph: {child_id}}}
        """,
    )
    caps = ["tool:echo", f"graph:{child_id}"]
    run = cluster.submit(parent, capabilities=caps)
    result = run.wait(timeout=30)
    assert result.status == "failed"
    assert result.error is not None and result.error.type == "permission_denied"
    assert result.error.node == "sub"
    assert "tool 'shell' needs capability 'tool:shell'" in result.error.message
    child = cluster.run(f"{run.id}.1").snapshot()
    assert child.capabilities == tuple(caps)
    assert child.error is not None and child.error.type == "permission_denied"
    assert not marker.exists()
    local = load_graph(parent).invoke_sync(capabilities=caps)
    assert local.error == result.error


def test_a_run_submitted_without_capabilities_gets_the_deployments_default(
    cluster: Client, tmp_path: Path
) -> None:
    marker = tmp_path / "MARKER"
    graph = parse_graph(textwrap.dedent(shell_graph(marker, f"caps/default-{uid()}")))
    settings = replace(cluster.settings, default_capabilities=("tool:echo",))
    with Client(settings=settings) as restricted:
        run = restricted.submit(graph)
        result = run.wait(timeout=30)
    assert run.snapshot().capabilities == ("tool:echo",)
    assert result.error is not None and result.error.type == "permission_denied"
    assert not marker.exists()


@pytest.mark.parametrize(
    ("bad", "expected"),
    [
        ("tool:shell", "capabilities must be a list of patterns"),
        ([1, 2], "capability 0 must be a non-empty pattern"),
        (["tool:echo", None], "got NoneType None"),
        (["tool:echo", ""], "capability 1 must be a non-empty pattern"),
    ],
)
def test_bad_capabilities_on_submit_change_nothing(cluster: Client, bad: Any, expected: str) -> None:
    graph = parse_graph(f"id: caps/bad-{uid()}\nconfig: {{start: a}}\nnodes: {{a: {{type: gate}}}}\n")
    run_id = f"bad-caps-{uid()}"
    with pytest.raises(InvalidCapabilities, match=expected):
        cluster.submit(graph, run_id=run_id, capabilities=bad)
    assert cluster.store.load_run(run_id) is None
    assert cluster.store.load_graph(graph.content_hash) is None


def test_cli_submit_takes_capabilities_and_refuses_bad_ones(
    cluster: Client, redis_server: EmbeddedRedis, tmp_path: Path
) -> None:
    marker = tmp_path / "MARKER"
    path = write(tmp_path, "g.yaml", shell_graph(marker, f"caps/cli-{uid()}"))
    env = {
        "GRAPHRUNNER_REDIS_URL": redis_server.url,
        "GRAPHRUNNER_BROKER_URL": None,
        "GRAPHRUNNER_QUEUE": None,
    }
    run_id = f"cli-caps-{uid()}"
    bad = CliRunner().invoke(main, ["submit", str(path), "--run-id", run_id, "--capability", ""], env=env)
    assert bad.exit_code == 2 and "capability 0 must be a non-empty pattern" in bad.stderr
    assert cluster.store.load_run(run_id) is None
    ok = CliRunner().invoke(
        main, ["submit", str(path), "--run-id", run_id, "--capability", "tool:echo"], env=env
    )
    assert ok.exit_code == 0, ok.output
    result = cluster.run(run_id).wait(timeout=30)
    assert result.error is not None and result.error.type == "permission_denied"
    assert not marker.exists()


# --- the state size limit (the cluster fixture's worker has the default, 1 MB) ---------------------

GROWING = """
    id: limits/grow-{uid}
    inputs: {{text: {{type: string, default: ""}}}}
    state: {{log: {{type: list, default: [], reducer: append}}}}
    config: {{start: small}}
    nodes:
      small: {{type: gate, assign: {{log: [small]}}, next: big}}
      big:
        action: {{tool: echo, params: {{text: "${{inputs.text}}"}}}}
        assign: {{log: ["${{result.text}}", "${{result.text}}"]}}
        next: after
      after: {{type: gate, assign: {{log: [after]}}}}
"""


def test_a_step_over_the_state_limit_fails_the_run_and_keeps_the_last_good_state(cluster: Client) -> None:
    graph = parse_graph(textwrap.dedent(GROWING.format(uid=uid())))
    result = cluster.submit(graph, {"text": "x" * 600_000}).wait(timeout=60)
    assert result.status == "failed"
    assert result.error is not None and result.error.type == "limit_exceeded"
    assert result.error.node == "big"
    assert "over the limit of 1048576 bytes (GRAPHRUNNER_MAX_STATE_BYTES)" in result.error.message
    assert result.state == {"log": ["small"]}
    assert result.path == ["small", "big"]


def test_oversized_inputs_are_refused_at_submit(cluster: Client) -> None:
    graph = parse_graph(textwrap.dedent(GROWING.format(uid=uid())))
    run_id = f"too-big-{uid()}"
    with pytest.raises(LimitExceeded, match=r"the inputs of graph .* over the limit of 1048576"):
        cluster.submit(graph, {"text": "x" * 1_100_000}, run_id=run_id)
    assert cluster.store.load_run(run_id) is None


# --- a worker process: the limit from its environment ------------------------------------------------


def test_a_worker_process_takes_the_state_limit_from_its_environment(
    redis_server: EmbeddedRedis, worker_env: dict[str, Any], tmp_path: Path
) -> None:
    queue = f"caps-{uid()}"
    env = {**worker_env, "GRAPHRUNNER_QUEUE": queue, "GRAPHRUNNER_MAX_STATE_BYTES": "2000"}
    proc = WorkerProcess(f"limit-{uid()}", env, tmp_path)
    client = Client(settings=settings_of(redis_url=redis_server.url, queue=queue))
    try:
        proc.wait_ready()
        grown = client.submit(parse_graph(textwrap.dedent(GROWING.format(uid=uid()))), {"text": "x" * 1200})
        result = grown.wait(timeout=30)
        assert result.error is not None and result.error.type == "limit_exceeded"
        assert "over the limit of 2000 bytes" in result.error.message
        assert result.state == {"log": ["small"]}
    finally:
        client.close()
        proc.stop()
