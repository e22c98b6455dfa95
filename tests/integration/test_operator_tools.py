"""Operator tools against real worker processes: `celery -A graphrunner`, `graphrunner ping`,
`graphrunner purge`, and the worker configuration module a team edits."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from support import wait_for
from worker_procs import WorkerProcess

from graphrunner import parse_graph
from graphrunner.client import Client
from graphrunner.cluster.transport.queues import report
from graphrunner.embedded import EmbeddedRedis

ECHO = """
    id: t/ops
    config: {start: a}
    nodes:
      a: {action: {tool: echo, params: {x: 1}}, next: done}
      done: {type: return}
"""


@pytest.fixture
def env(private_redis: EmbeddedRedis, worker_env: dict[str, Any]) -> dict[str, Any]:
    return {**worker_env, "GRAPHRUNNER_REDIS_URL": private_redis.url}


def run(env: dict[str, Any], *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(args), env=env, input=stdin, capture_output=True, text=True, timeout=120, check=False
    )


def graphrunner(env: dict[str, Any], *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return run(env, sys.executable, "-m", "graphrunner", *args, stdin=stdin)


def celery(env: dict[str, Any], *args: str) -> subprocess.CompletedProcess[str]:
    return run(env, sys.executable, "-m", "celery", "-A", "graphrunner", *args)


def test_celery_command_line_talks_to_graphrunner_workers(env: dict[str, Any], tmp_path: Path) -> None:
    worker = WorkerProcess("ops1", env, tmp_path)
    try:
        worker.wait_ready()
        pinged = _retry(lambda: celery(env, "inspect", "ping", "--timeout", "10")).stdout
        found = re.search(r"(ops1@\S+): OK", pinged)
        assert found, pinged
        name = found.group(1)
        status = celery(env, "status", "--timeout", "10")
        assert status.returncode == 0 and "ops1@" in status.stdout, status.stdout + status.stderr
        stats = celery(env, "inspect", "stats", "--timeout", "10", "--json")
        assert stats.returncode == 0 and '"pool"' in stats.stdout, stats.stderr
        active = celery(env, "inspect", "active", "--timeout", "10")
        assert active.returncode == 0, active.stderr
        pong = graphrunner(env, "ping", "--worker", name, "--timeout", "10")
        assert pong.returncode == 0 and f"{name}: pong" in pong.stdout, pong.stdout + pong.stderr
        missing = graphrunner(env, "ping", "--worker", "nobody@nowhere", "--timeout", "1")
        assert missing.returncode == 1 and "nobody@nowhere" in missing.stderr
    finally:
        worker.stop()


def _retry(call: Any) -> subprocess.CompletedProcess[str]:
    """A worker answers control commands a moment after it logs ready."""
    deadline = time.monotonic() + 60
    while True:
        result: subprocess.CompletedProcess[str] = call()
        if result.returncode == 0 or time.monotonic() > deadline:
            assert result.returncode == 0, result.stdout + result.stderr
            return result
        time.sleep(1)


def test_celery_command_line_without_redis_says_what_is_missing(worker_env: dict[str, Any]) -> None:
    env = {k: v for k, v in worker_env.items() if k != "GRAPHRUNNER_REDIS_URL"}
    result = celery(env, "inspect", "ping")
    assert result.returncode != 0
    assert "GRAPHRUNNER_REDIS_URL is not set" in result.stderr


def test_purge_asks_first_and_runs_survive_it(
    private_redis: EmbeddedRedis, env: dict[str, Any], tmp_path: Path
) -> None:
    client = Client(private_redis.url)
    try:
        runs = [client.submit(parse_graph(textwrap.dedent(ECHO))) for _ in range(5)]
        assert report(client.cluster).depths["graphrunner"] == 5
        unanswered = graphrunner(env, "purge")
        assert unanswered.returncode == 1 and "nothing purged" in unanswered.stderr
        refused = graphrunner(env, "purge", stdin="n\n")
        assert refused.returncode == 1 and "Drop 5 message(s) waiting on graphrunner?" in refused.stderr
        assert report(client.cluster).depths["graphrunner"] == 5
        purged = graphrunner(env, "purge", "--yes", "--json")
        assert purged.returncode == 0, purged.stderr
        assert '"graphrunner": 5' in purged.stdout
        assert report(client.cluster).depths["graphrunner"] == 0
        fast = {**env, "GRAPHRUNNER_STALL_AFTER": "2", "GRAPHRUNNER_SWEEP_INTERVAL": "1"}
        worker = WorkerProcess("ops2", fast, tmp_path)
        try:
            worker.wait_ready()
            results = [r.wait(timeout=120) for r in runs]  # the sweeper sends the lost steps again
        finally:
            worker.stop()
        assert [r.status for r in results] == ["completed"] * 5
    finally:
        client.close()


CONFIG = """
from graphrunner import register_tool


class Shout:
    name = "team.shout"
    version = "1"

    async def run(self, params, context):
        return {"text": str(params["text"]).upper()}


register_tool(Shout())

hooks = [{"event": "graph_completed", "action": {"tool": "team.shout", "params": {"text": "${event.status}"}}}]
"""

SHOUT = """
    id: t/shout
    config: {start: a}
    nodes:
      a: {action: {tool: team.shout, params: {text: hello}}, result_key: out, next: done}
      done: {type: return, output: "${state.out.text}"}
    state:
      out: {type: object}
"""


def test_worker_loads_the_team_configuration_file_without_pythonpath(
    private_redis: EmbeddedRedis, env: dict[str, Any], tmp_path: Path
) -> None:
    config = tmp_path / "elsewhere" / "worker_config.py"
    config.parent.mkdir()
    config.write_text(CONFIG)
    worker = WorkerProcess("ops3", {**env, "GRAPHRUNNER_WORKER_CONFIG": str(config)}, tmp_path)
    client = Client(private_redis.url)
    try:
        worker.wait_ready()
        graph = tmp_path / "shout.yaml"
        graph.write_text(textwrap.dedent(SHOUT))
        result = _submit_unvalidated(client, graph).wait(timeout=60)
        assert result.status == "completed", result.error
        assert result.output == "HELLO"
    finally:
        client.close()
        worker.stop()


def _submit_unvalidated(client: Client, graph: Path) -> Any:
    """The producer does not have the team's tool: it registers a stand-in of the same name."""
    from graphrunner.tools import ToolRegistry, default_registry

    class StandIn:
        name = "team.shout"
        version = "1"

        async def run(self, params: dict[str, Any], context: Any) -> Any:
            raise AssertionError("runs on the worker only")

    registry = ToolRegistry([default_registry().get("echo"), StandIn()])
    from graphrunner.loading import load_graph

    return client.submit(load_graph(graph, registry=registry))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("raise RuntimeError('no credentials')", "importing it raised RuntimeError: no credentials"),
        ("import not_a_module_anywhere", "cannot import it: No module named 'not_a_module_anywhere'"),
        (
            "hooks = [{'event': 'graph_completed', 'action': {'tool': 'nope'}}]",
            "hooks.0.action: unknown tool 'nope'",
        ),
        ("hooks = [{'event': 'graph_finished', 'action': {'tool': 'echo'}}]", "hooks.0.event"),
        ("hooks = 'all of them'", "`hooks` must be a list of hooks, got str"),
    ],
)
def test_a_bad_worker_configuration_stops_the_worker_at_start_up(
    env: dict[str, Any], tmp_path: Path, text: str, message: str
) -> None:
    config = tmp_path / "worker_config.py"
    config.write_text(text + "\n")
    result = graphrunner({**env, "GRAPHRUNNER_WORKER_CONFIG": str(config)}, "worker")
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"worker configuration {config} (GRAPHRUNNER_WORKER_CONFIG)" in result.stderr
    assert message in result.stderr


def test_a_missing_worker_configuration_file_is_named(env: dict[str, Any], tmp_path: Path) -> None:
    missing = tmp_path / "nope.py"
    result = graphrunner({**env, "GRAPHRUNNER_WORKER_CONFIG": str(missing)}, "worker")
    assert result.returncode == 2
    assert f"worker configuration {missing} (GRAPHRUNNER_WORKER_CONFIG): no such file" in result.stderr


def test_the_shipped_worker_configuration_loads_and_its_hook_runs(
    private_redis: EmbeddedRedis, env: dict[str, Any], tmp_path: Path
) -> None:
    root = Path(__file__).resolve().parents[2]
    worker = WorkerProcess(
        "ops4", {**env, "GRAPHRUNNER_WORKER_CONFIG": str(root / "workers" / "worker_config.py")}, tmp_path
    )
    client = Client(private_redis.url)
    try:
        worker.wait_ready()
        result = client.submit(parse_graph(textwrap.dedent(ECHO))).wait(timeout=60)
        assert result.status == "completed"
        wait_for(lambda: "run finished" in worker.log.read_text(), 30, "the audit hook's log line")
        assert result.run_id in worker.log.read_text()
    finally:
        client.close()
        worker.stop()
