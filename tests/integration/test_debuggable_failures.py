"""Debuggable failures on a real cluster: a failing tool's traceback in `steps`, `status` and the
result; a pause node's message in `status`, `wait`, `watch`, `steps` and `submit --wait`; and
`run`, `wait` and `submit --wait` saying when no worker consumes the queue a run waits on."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from support import uid, wait_for
from worker_procs import process_env

from graphrunner import Graph, parse_graph
from graphrunner.cli import main
from graphrunner.client import Client
from graphrunner.embedded import EmbeddedRedis

ROOT = Path(__file__).resolve().parents[2]
NO_WORKER = "no worker is consuming queue"


def graph(text: str) -> Graph:
    return parse_graph(textwrap.dedent(text), file="test.yaml")


def failing(graph_id: str) -> str:
    return f"""
    id: {graph_id}
    config: {{start: a}}
    nodes:
      a:
        action: {{tool: python, params: {{fn: "failure_targets:boom", args: {{x: 3}}}}}}
    """


def pausing(graph_id: str) -> str:
    return f"""
    id: {graph_id}
    state: {{ok: {{type: boolean, default: false}}}}
    config: {{start: ask}}
    nodes:
      ask: {{type: pause, message: approve the lengths, next: done}}
      done: {{type: return}}
    """


def napping(graph_id: str, seconds: float, queue: str | None = None) -> str:
    routed = f"\n        queue: {queue}" if queue else ""
    return f"""
    id: {graph_id}
    config: {{start: a}}
    nodes:
      a:
        action: {{tool: python, params: {{fn: "failure_targets:nap", args: {{seconds: {seconds}}}}}}}{routed}
    """


@pytest.fixture
def env(redis_server: EmbeddedRedis, cluster: Client) -> dict[str, str | None]:
    """CliRunner environment: the session's Redis, whose runs the in-thread worker executes."""
    return {
        "GRAPHRUNNER_REDIS_URL": redis_server.url,
        "GRAPHRUNNER_BROKER_URL": None,
        "GRAPHRUNNER_QUIET": "1",
    }


def cli(env: dict[str, str | None], *args: str) -> Result:
    return CliRunner().invoke(main, list(args), env=env)


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / f"{uid()}.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return str(path)


# -- tracebacks -----------------------------------------------------------------------------------


def test_a_python_tools_traceback_in_steps_status_and_the_result(
    env: dict[str, str | None], cluster: Client
) -> None:
    run = cluster.submit(graph(failing(f"t/tb-{uid()}")))
    result = run.wait(timeout=60)
    assert result.status == "failed" and result.error is not None
    trace = result.error.traceback
    assert (
        ", in boom\n" in trace and ", in check\n" in trace and trace.endswith("ValueError: I do not like 3")
    )
    assert "graphrunner" not in trace  # the function's frames, not the worker's

    records = json.loads(cli(env, "steps", run.id, "--json").output)
    assert records[-1]["error"]["traceback"] == trace
    status = json.loads(cli(env, "status", run.id, "--json").output)
    assert status["error"] == {**status["error"], "type": "node_exception", "node": "a", "step": 1}
    assert status["error"]["traceback"] == trace

    text = cli(env, "status", run.id).output.splitlines()
    assert "  Traceback (most recent call last):" in text and text[-1] == "  ValueError: I do not like 3"
    assert "Traceback" not in cli(env, "steps", run.id).output  # progress lines: on demand
    shown = cli(env, "steps", run.id, "--traceback").output.splitlines()
    assert (
        "    Traceback (most recent call last):" in shown and shown[-1] == "    ValueError: I do not like 3"
    )


def test_the_cluster_and_the_in_process_runner_keep_the_same_traceback(cluster: Client) -> None:
    g = graph(failing(f"t/tb-{uid()}"))
    distributed = cluster.submit(g).wait(timeout=60)
    local = g.invoke_sync({})
    assert distributed.error is not None and local.error is not None
    assert distributed.error.traceback == local.error.traceback


def test_a_parallel_foreach_keeps_its_first_failed_items_traceback(cluster: Client) -> None:
    text = f"""
    id: t/tb-fan-{uid()}
    config: {{start: fan}}
    nodes:
      fan:
        type: foreach
        over: [1, 3, 5]
        parallel: true
        action: {{tool: python, params: {{fn: "failure_targets:boom", args: {{x: "${{item}}"}}}}}}
    """
    result = cluster.submit(graph(text)).wait(timeout=60)
    assert result.error is not None and "first, item 1" in result.error.message
    assert ", in boom\n" in result.error.traceback


# -- a pause node's message --------------------------------------------------------------------------


def test_the_pause_message_in_status_wait_watch_and_steps(
    env: dict[str, str | None], cluster: Client, tmp_path: Path
) -> None:
    run = cluster.submit(graph(pausing(f"t/pause-{uid()}")))
    assert run.wait(timeout=60).status == "paused"

    waited = cli(env, "wait", run.id)
    assert waited.exit_code == 1 and "message: approve the lengths" in waited.output.splitlines()
    waited_json = cli(env, "wait", run.id, "--json")
    assert waited_json.exit_code == 1 and json.loads(waited_json.output)["message"] == "approve the lengths"
    assert "message: approve the lengths" in cli(env, "status", run.id).output.splitlines()
    assert json.loads(cli(env, "status", run.id, "--json").output)["message"] == "approve the lengths"
    assert json.loads(cli(env, "steps", run.id, "--json").output)[-1]["message"] == "approve the lengths"
    watched = cli(env, "watch", run.id)
    assert watched.exit_code == 1 and "ask ⏸" in watched.output and "— approve the lengths" in watched.output

    submitted = cli(env, "submit", write(tmp_path, pausing(f"t/pause-{uid()}")), "--wait", "--json")
    assert submitted.exit_code == 1
    assert json.loads(submitted.output) == {**json.loads(submitted.output), "status": "paused"}
    assert json.loads(submitted.output)["message"] == "approve the lengths"


def test_submit_wait_prints_the_result_and_timeout_needs_wait(
    env: dict[str, str | None], tmp_path: Path
) -> None:
    path = write(tmp_path, napping(f"t/nap-{uid()}", 0))
    done = cli(env, "submit", path, "--wait", "--timeout", "60")
    assert done.exit_code == 0 and "status: completed" in done.output
    refused = cli(env, "submit", path, "--timeout", "5")
    assert refused.exit_code == 2 and "--timeout needs --wait" in refused.output


# -- no worker consuming the run's queue --------------------------------------------------------------


@contextmanager
def command(*args: str, redis_url: str) -> Iterator[list[str]]:
    """`python -m graphrunner ARGS` running while the block runs; its stderr lines as they come."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "graphrunner", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        encoding="utf-8",
        env=process_env(redis_url),
        cwd=ROOT,
    )
    stream = proc.stderr
    assert stream is not None
    err: list[str] = []
    reader = threading.Thread(target=lambda: err.extend(iter(stream.readline, "")), daemon=True)
    reader.start()
    try:
        yield err
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        reader.join(timeout=10)
        stream.close()


def warned(err: list[str]) -> list[str]:
    return [line for line in err if NO_WORKER in line]


@pytest.mark.parametrize("how", ["run", "submit --wait", "wait"])
def test_a_run_no_worker_takes_is_pointed_out_and_waited_for(
    private_redis: EmbeddedRedis, tmp_path: Path, how: str
) -> None:
    path = write(tmp_path, napping(f"t/nobody-{uid()}", 0))
    if how == "wait":
        with Client(private_redis.url) as client:
            args = ["wait", client.submit(path).id]
    else:
        args = [*how.split()[:1], path, *how.split()[1:]]
    with command(*args, redis_url=private_redis.url) as err:
        wait_for(lambda: bool(warned(err)), 90, f"the no-worker warning of `graphrunner {how}`")
    line = warned(err)[0]
    assert line.startswith("warning: no worker is consuming queue 'graphrunner' on redis://")
    assert "start one with `graphrunner worker`" in line and "still waiting" in line
    assert len(warned(err)) == 1


def test_a_queue_no_worker_consumes_is_named_with_the_option_that_serves_it(
    redis_server: EmbeddedRedis, cluster: Client, tmp_path: Path
) -> None:
    queue, graph_id = f"nowhere-{uid()}", f"t/nowhere-{uid()}"
    path = write(tmp_path, napping(graph_id, 0, queue=queue))
    try:
        with command("run", path, redis_url=redis_server.url) as err:
            wait_for(lambda: bool(warned(err)), 90, "the no-worker warning")
        line = warned(err)[0]
        assert f"queue '{queue}'" in line and f"`graphrunner worker -Q {queue}`" in line
        assert "(the workers that answered consume other queues)" in line
    finally:
        for summary in cluster.list_runs(graph_id=graph_id, status="running"):
            cluster.cancel(summary.run_id)  # its message stays on a queue nobody consumes


def test_no_warning_while_the_worker_is_busy_with_other_runs(
    redis_server: EmbeddedRedis, cluster: Client
) -> None:
    busy = [cluster.submit(graph(napping(f"t/busy-{uid()}", 8))) for _ in range(2)]  # both slots
    queued = cluster.submit(graph(napping(f"t/queued-{uid()}", 0)))
    with command("wait", queued.id, "--timeout", "120", redis_url=redis_server.url) as err:
        wait_for(lambda: queued.status() == "completed", 120, "the queued run")
    assert warned(err) == [], err
    for run in busy:
        assert run.wait(timeout=60).status == "completed"
