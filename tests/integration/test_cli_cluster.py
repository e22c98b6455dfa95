"""The CLI on a cluster: `run` (embedded, cluster, --local, --in-process) and the run commands."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from graphrunner.cli import main
from graphrunner.client import Client
from graphrunner.embedded import EmbeddedRedis, free_port

ROOT = Path(__file__).resolve().parents[2]
RUN_KEYS = {
    "run_id",
    "graph_id",
    "status",
    "output",
    "state",
    "step_count",
    "path",
    "errors_suppressed",
    "errors",
    "error",
}
SETTINGS_VARS = ("GRAPHRUNNER_REDIS_URL", "GRAPHRUNNER_BROKER_URL", "GRAPHRUNNER_QUIET", "GRAPHRUNNER_QUEUE")


def two_steps(graph_id: str, *, queue: str | None = None) -> str:
    """A graph of an echo, an assign and a return; `queue` routes its action node."""
    routed = f"\n    queue: {queue}" if queue else ""
    return f"""
id: {graph_id}
inputs:
  name: {{type: string, default: world}}
state:
  greeting: string
config:
  start: greet
nodes:
  greet:
    action: {{tool: echo, params: {{text: "Hello ${{inputs.name}}"}}}}{routed}
    assign: {{greeting: "${{result.text}}"}}
    next: done
  done:
    type: return
    output: {{greeting: "${{state.greeting}}"}}
"""


def sleeper(graph_id: str, seconds: float) -> str:
    """A graph whose second step sleeps `seconds` in the worker."""
    return f"""
id: {graph_id}
config:
  start: first
nodes:
  first:
    action: {{tool: echo, params: {{x: 1}}}}
    next: wait
  wait:
    action: {{tool: sleep, params: {{seconds: {seconds}}}}}
    next: done
  done:
    type: return
"""


FAILING = """
id: cli/failing
config:
  start: explode
nodes:
  explode:
    action: {tool: fail, params: {message: "the reactor is on fire"}}
    next: done
  done:
    type: return
"""


def write(tmp_path: Path, text: str, name: str = "graph.yaml") -> str:
    """Write a graph file and return its path as text."""
    path = tmp_path / name
    path.write_text(text.lstrip("\n"), encoding="utf-8")
    return str(path)


def unique(prefix: str) -> str:
    """A graph id no other test uses."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def env(redis_server: EmbeddedRedis, cluster: Client) -> dict[str, str | None]:
    """CliRunner environment: the test Redis, whose runs the in-thread worker executes."""
    return {
        "GRAPHRUNNER_REDIS_URL": redis_server.url,
        "GRAPHRUNNER_BROKER_URL": None,
        "GRAPHRUNNER_QUIET": None,
    }


def cli(env: dict[str, str | None], *args: str) -> Result:
    """Invoke `graphrunner ARGS` in this process."""
    return CliRunner().invoke(main, list(args), env=env)


def proc_env(redis_url: str | None = None, **extra: str) -> dict[str, str]:
    """A subprocess environment without graphrunner settings, plus `redis_url` if given."""
    base = {k: v for k, v in os.environ.items() if k not in SETTINGS_VARS}
    base["PYTHONIOENCODING"] = "utf-8"
    if redis_url:
        base["GRAPHRUNNER_REDIS_URL"] = redis_url
    return {**base, **extra}


def graphrunner(*args: str, env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run `python -m graphrunner ARGS` in a subprocess."""
    return subprocess.run(
        [sys.executable, "-m", "graphrunner", *args],
        capture_output=True,
        encoding="utf-8",
        env=env,
        cwd=ROOT,
        timeout=timeout,
        check=False,
    )


def no_traceback(output: str) -> bool:
    """A user error never shows a Python traceback."""
    return "Traceback" not in output


# --- run: embedded Redis, in-process runner, cluster, --local ---------------------------------------


def test_run_without_redis_starts_and_stops_its_own(tmp_path: Path) -> None:
    env = proc_env(TMPDIR=str(tmp_path))
    proc = graphrunner("run", "graphs/hello.yaml", "-i", "name=Ada", "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert set(data) == RUN_KEYS
    assert data["status"] == "completed"
    assert data["path"] == ["greet", "shout", "done"]
    assert data["output"]["greeting"] == "HELLO, ADA!"
    lines = proc.stderr.splitlines()
    assert len(lines) == 3, proc.stderr
    assert lines[0].startswith("[graph:examples/hello] step 1 greet ✓")
    assert lines[2].startswith("[graph:examples/hello] step 3 done ⏹")
    assert list(tmp_path.glob("graphrunner-redis-*")) == []  # the embedded Redis was stopped and removed


def test_run_without_redis_quiet_and_human() -> None:
    proc = graphrunner("run", "graphs/hello.yaml", env=proc_env(GRAPHRUNNER_QUIET="1"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert proc.stdout.startswith("status: completed\n")
    assert "path: greet -> shout -> done" in proc.stdout


def test_run_in_process_needs_no_redis(tmp_path: Path) -> None:
    env = proc_env("redis://127.0.0.1:1/0", TMPDIR=str(tmp_path))  # nothing listens there: never used
    proc = graphrunner("run", "graphs/hello.yaml", "--in-process", "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["status"] == "completed" and data["path"] == ["greet", "shout", "done"]
    assert "[graph:examples/hello] step 2 shout ✓" in proc.stderr
    assert list(tmp_path.glob("graphrunner-redis-*")) == []


def test_run_failing_graph_without_redis_exits_1(tmp_path: Path) -> None:
    proc = graphrunner("run", write(tmp_path, FAILING), "--json", env=proc_env())
    assert proc.returncode == 1
    data = json.loads(proc.stdout)
    assert data["status"] == "failed" and data["error"]["node"] == "explode"
    assert "✗" in proc.stderr and no_traceback(proc.stderr)


def test_run_timeout_without_redis_abandons_the_run(tmp_path: Path) -> None:
    env = proc_env(TMPDIR=str(tmp_path))
    proc = graphrunner("run", write(tmp_path, sleeper("cli/slow-embedded", 2)), "--timeout", "0.5", env=env)
    assert proc.returncode == 1
    assert "timed out after 0.5s" in proc.stderr and "abandoned" in proc.stderr
    assert proc.stdout == "" and no_traceback(proc.stderr)
    assert list(tmp_path.glob("graphrunner-redis-*")) == []


def test_ctrl_c_stops_the_embedded_worker_and_redis(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "graphrunner", "run", write(tmp_path, sleeper("cli/interrupted", 2))]
    env = proc_env(TMPDIR=str(tmp_path), PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        encoding="utf-8",
        env=env,
        start_new_session=True,
    )
    assert proc.stderr is not None
    assert "step 1 first ✓" in proc.stderr.readline()
    assert "step 2 wait ⏲ sleeping" in proc.stderr.readline()  # running: the durable sleep is in flight
    os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the whole process group
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert out == ""
    assert err.startswith("error: interrupted") and no_traceback(err), err
    assert list(tmp_path.glob("graphrunner-redis-*")) == []


def test_run_on_the_cluster(env: dict[str, str | None], tmp_path: Path, cluster: Client) -> None:
    graph_id = unique("cli/run")
    result = cli(env, "run", write(tmp_path, two_steps(graph_id)), "-i", "name=Ada", "--json")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert set(data) == RUN_KEYS
    assert data["status"] == "completed" and data["output"] == {"greeting": "Hello Ada"}
    assert result.stderr.splitlines()[0].startswith(f"[graph:{graph_id}] step 1 greet ✓")
    steps = cluster.run(data["run_id"]).steps()  # executed by the cluster's worker, stored in its Redis
    assert [s["node"] for s in steps] == ["greet", "done"]
    assert all(s["worker"] != "local" for s in steps)


def test_run_on_the_cluster_from_a_subprocess(redis_server: EmbeddedRedis, cluster: Client) -> None:
    proc = graphrunner("run", "graphs/hello.yaml", "--json", env=proc_env(redis_server.url))
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["path"] == ["greet", "shout", "done"]
    assert cluster.run(data["run_id"]).status() == "completed"


def test_run_failing_on_the_cluster_exits_1(env: dict[str, str | None], tmp_path: Path) -> None:
    result = cli(env, "run", write(tmp_path, FAILING))
    assert result.exit_code == 1
    assert "status: failed" in result.stdout
    assert "error: node_exception at node 'explode' (step 1): the reactor is on fire" in result.stdout


def test_run_local_worker_serves_the_graphs_queues(
    redis_server: EmbeddedRedis, cluster: Client, tmp_path: Path
) -> None:
    queue = unique("only-here")  # a queue the cluster's worker does not consume
    path = write(tmp_path, two_steps(unique("cli/local"), queue=queue))
    proc = graphrunner("run", path, "--local", "--json", env=proc_env(redis_server.url), timeout=60)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["status"] == "completed" and data["path"] == ["greet", "done"]
    assert cluster.run(data["run_id"]).status() == "completed"


def test_run_timeout_on_the_cluster_leaves_the_run_going(env: dict[str, str | None], tmp_path: Path) -> None:
    path = write(tmp_path, sleeper(unique("cli/slow"), 5))
    started = time.monotonic()
    result = cli(env, "run", path, "--timeout", "0.5", "--json")
    assert time.monotonic() - started < 4
    assert result.exit_code == 1
    assert result.stdout == ""
    message = result.stderr.splitlines()[-1]
    assert message.startswith("error: run ") and "timed out after 0.5s" in message
    run_id = message.split()[2]
    assert f"keeps running on the cluster: graphrunner wait {run_id}" in message
    waited = cli(env, "wait", run_id, "--timeout", "30", "--json")
    assert waited.exit_code == 0, waited.stderr
    assert json.loads(waited.stdout)["path"] == ["first", "wait", "done"]


def test_run_bad_input_on_the_cluster_exits_2(env: dict[str, str | None], tmp_path: Path) -> None:
    path = write(tmp_path, two_steps(unique("cli/bad")))
    result = cli(env, "run", path, "--inputs", '{"name": 3}')  # -i name=3 is the text "3"
    assert result.exit_code == 2
    assert result.stderr.startswith("error: invalid inputs") and result.stdout == ""
    missing = cli(env, "run", str(tmp_path / "missing.yaml"))
    assert missing.exit_code == 2 and "missing.yaml" in missing.stderr


def test_run_local_and_in_process_do_not_combine(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["run", write(tmp_path, FAILING), "--local", "--in-process"])
    assert result.exit_code == 2
    assert "--local and --in-process" in result.stderr


def test_run_help_documents_in_process_and_local() -> None:
    text = CliRunner().invoke(main, ["run", "--help"]).stdout
    assert "--in-process" in text and "--local" in text and "GRAPHRUNNER_REDIS_URL" in text


def test_help_lists_the_run_commands() -> None:
    text = CliRunner().invoke(main, ["--help"]).stdout
    for command in ("run", "submit", "status", "wait", "watch", "state", "steps", "list"):
        assert f"  {command} " in text


# --- submit, status, wait, watch, state, steps, list ------------------------------------------------


def submitted(env: dict[str, str | None], path: str, *args: str) -> str:
    """Submit through the CLI and return the run id it printed."""
    result = cli(env, "submit", path, *args)
    assert result.exit_code == 0, result.stderr
    return result.stdout.strip()


def test_submit_then_read_the_run(env: dict[str, str | None], tmp_path: Path) -> None:
    graph_id = unique("cli/read")
    run_id = submitted(env, write(tmp_path, two_steps(graph_id)), "-i", "name=Bo")
    waited = cli(env, "wait", run_id, "--timeout", "30")
    assert waited.exit_code == 0, waited.stderr
    assert waited.stdout.startswith("status: completed\n") and f"run: {run_id}" in waited.stdout

    status = cli(env, "status", run_id, "--json")
    assert status.exit_code == 0
    data = json.loads(status.stdout)
    assert set(data) == RUN_KEYS
    assert data["run_id"] == run_id and data["graph_id"] == graph_id and data["step_count"] == 2
    human = cli(env, "status", run_id).stdout
    for line in (
        f"run: {run_id}",
        f"graph: {graph_id}",
        "status: completed",
        "steps: 2",
        "path: greet -> done",
    ):
        assert line in human.splitlines()
    assert "created: 20" in human

    state = cli(env, "state", run_id)
    assert state.exit_code == 0 and json.loads(state.stdout) == {"greeting": "Hello Bo"}

    steps = cli(env, "steps", run_id)
    assert steps.exit_code == 0
    lines = steps.stdout.splitlines()
    assert lines[0].startswith(f"[graph:{graph_id}] step 1 greet ✓") and lines[0].endswith("(+greeting)")
    assert lines[1].startswith(f"[graph:{graph_id}] step 2 done ⏹")
    records = json.loads(cli(env, "steps", run_id, "--json").stdout)
    assert [r["node"] for r in records] == ["greet", "done"]
    assert {"step", "node", "status", "duration_ms", "changed_keys", "worker"} <= set(records[0])


def test_submit_json_and_own_run_id(env: dict[str, str | None], tmp_path: Path) -> None:
    path = write(tmp_path, two_steps(unique("cli/own-id")))
    run_id = unique("my-run")
    result = cli(env, "submit", path, "--run-id", run_id, "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout) == {"run_id": run_id}
    assert submitted(env, path, "--run-id", run_id) == run_id  # the same run, not a second one
    conflict = cli(env, "submit", path, "--run-id", run_id, "-i", "name=Other")
    assert conflict.exit_code == 1 and "already exists" in conflict.stderr
    assert cli(env, "wait", run_id, "--json", "--timeout", "30").exit_code == 0


def test_wait_on_a_failed_run_exits_1(env: dict[str, str | None], tmp_path: Path) -> None:
    run_id = submitted(env, write(tmp_path, FAILING))
    result = cli(env, "wait", run_id, "--json", "--timeout", "30")
    assert result.exit_code == 1
    assert json.loads(result.stdout)["error"]["type"] == "node_exception"
    watched = cli(env, "watch", run_id)
    assert watched.exit_code == 1
    assert watched.stdout.splitlines()[-1] == f"run {run_id} failed (1 step)"


def test_watch_streams_past_and_new_steps(env: dict[str, str | None], tmp_path: Path) -> None:
    graph_id = unique("cli/watch")
    run_id = submitted(env, write(tmp_path, sleeper(graph_id, 1)))
    result = cli(env, "watch", run_id, "--timeout", "30")
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    # the durable sleep shows as a `sleeping` record, then the step itself
    assert [line.split()[3:5] for line in lines[:4]] == [
        ["first", "✓"],
        ["wait", "⏲"],
        ["wait", "✓"],
        ["done", "⏹"],
    ]
    assert "sleeping 1" in lines[1]
    assert all(line.startswith(f"[graph:{graph_id}] step ") for line in lines[:4])
    assert lines[4] == f"run {run_id} completed (3 steps)"
    assert result.stderr == ""


def test_wait_and_watch_timeout(env: dict[str, str | None], tmp_path: Path) -> None:
    run_id = submitted(env, write(tmp_path, sleeper(unique("cli/wait-timeout"), 2)))
    for command in ("wait", "watch"):
        result = cli(env, command, run_id, "--timeout", "0.3")
        assert result.exit_code == 1
        assert "did not finish within 0.3s; it is running at step " in result.stderr  # 1 or 2
        assert f"graphrunner wait {run_id}" in result.stderr
    assert cli(env, "wait", run_id, "--timeout", "30").exit_code == 0


def test_list_newest_first_with_filters(env: dict[str, str | None], tmp_path: Path) -> None:
    graph_id = unique("cli/list")
    path = write(tmp_path, two_steps(graph_id))
    ids = [submitted(env, path, "-i", f"name=n{i}") for i in range(3)]
    for run_id in ids:
        assert cli(env, "wait", run_id, "--timeout", "30").exit_code == 0
    listed = json.loads(cli(env, "list", "--graph", graph_id, "--json").stdout)
    assert [r["run_id"] for r in listed] == ids[::-1]
    assert set(listed[0]) == {"run_id", "graph_id", "status", "step_count", "created_at", "updated_at"}
    assert listed[0]["status"] == "completed" and listed[0]["step_count"] == 2
    assert listed[0]["created_at"].endswith("Z")
    page = json.loads(cli(env, "list", "--graph", graph_id, "--limit", "1", "--offset", "1", "--json").stdout)
    assert [r["run_id"] for r in page] == [ids[1]]
    table = cli(env, "list", "--graph", graph_id).stdout.splitlines()
    assert table[0].split() == ["RUN_ID", "GRAPH", "STATUS", "STEPS", "CREATED"]
    assert table[1].split()[:4] == [ids[2], graph_id, "completed", "2"]
    assert len(table) == 4
    completed = json.loads(cli(env, "list", "--status", "completed", "--limit", "500", "--json").stdout)
    assert set(ids) <= {r["run_id"] for r in completed}
    assert cli(env, "list", "--graph", unique("cli/nothing")).stdout == "no runs\n"


def test_run_commands_from_a_subprocess(redis_server: EmbeddedRedis, cluster: Client) -> None:
    env = proc_env(redis_server.url)
    submit = graphrunner("submit", "graphs/hello.yaml", "-i", "name=Sub", env=env)
    assert submit.returncode == 0, submit.stderr
    run_id = submit.stdout.strip()
    watch = graphrunner("watch", run_id, "--timeout", "30", env=env)
    assert watch.returncode == 0, watch.stderr
    assert watch.stdout.splitlines()[-1] == f"run {run_id} completed (3 steps)"
    status = graphrunner("status", run_id, "--json", env=env)
    assert json.loads(status.stdout)["output"]["greeting"] == "HELLO, SUB!"
    listed = graphrunner("list", "--graph", "examples/hello", "--json", env=env)
    assert listed.returncode == 0 and run_id in {r["run_id"] for r in json.loads(listed.stdout)}


# --- errors ------------------------------------------------------------------------------------------

READ_COMMANDS = [["status"], ["wait"], ["watch"], ["state"], ["steps"]]


@pytest.mark.parametrize("command", READ_COMMANDS, ids=lambda c: c[0])
def test_unknown_run_exits_1(env: dict[str, str | None], command: list[str]) -> None:
    result = cli(env, *command, "no-such-run")
    assert result.exit_code == 1
    assert result.stderr == "error: no run with id 'no-such-run'\n"
    assert result.stdout == ""


@pytest.mark.parametrize("command", READ_COMMANDS, ids=lambda c: c[0])
def test_malformed_run_id_exits_2(env: dict[str, str | None], command: list[str]) -> None:
    result = cli(env, *command, "{not a run id}")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: invalid run id")
    assert result.stdout == ""


def test_submit_malformed_run_id_exits_2(env: dict[str, str | None], tmp_path: Path) -> None:
    result = cli(env, "submit", write(tmp_path, FAILING), "--run-id", "bad id!")
    assert result.exit_code == 2 and result.stderr.startswith("error: invalid run id")


def test_list_unknown_status_exits_2(env: dict[str, str | None]) -> None:
    result = cli(env, "list", "--status", "exploded")
    assert result.exit_code == 2
    for status in (
        "pending",
        "running",
        "paused",
        "completed",
        "completed_with_errors",
        "failed",
        "cancelled",
    ):
        assert status in result.stderr


COMMANDS = [["submit", "graphs/hello.yaml"], *([*c, "some-run"] for c in READ_COMMANDS), ["list"]]


@pytest.mark.parametrize("args", COMMANDS, ids=lambda c: c[0])
def test_run_commands_need_a_redis_url(args: list[str]) -> None:
    result = CliRunner().invoke(main, args, env={"GRAPHRUNNER_REDIS_URL": None})
    assert result.exit_code == 2
    assert result.stderr.startswith("error: GRAPHRUNNER_REDIS_URL is not set")
    assert result.stdout == ""


def test_no_redis_url_from_a_subprocess() -> None:
    proc = graphrunner("status", "some-run", env=proc_env())
    assert proc.returncode == 2
    assert "GRAPHRUNNER_REDIS_URL is not set" in proc.stderr and no_traceback(proc.stderr)


UNREACHABLE = [
    ["submit", "graphs/hello.yaml"],
    ["status", "some-run"],
    ["watch", "some-run"],
    ["run", "graphs/hello.yaml"],
]


@pytest.mark.parametrize("args", UNREACHABLE, ids=lambda c: c[0])
def test_redis_not_answering_exits_1_quickly(args: list[str]) -> None:
    env: dict[str, Any] = {"GRAPHRUNNER_REDIS_URL": f"redis://127.0.0.1:{free_port()}/0"}
    started = time.monotonic()
    result = CliRunner().invoke(main, args, env={**env, "GRAPHRUNNER_BROKER_URL": None})
    assert time.monotonic() - started < 10
    assert result.exit_code == 1
    assert result.stderr.startswith("error: cannot reach Redis")
    assert "GRAPHRUNNER_REDIS_URL" in result.stderr and result.stdout == ""


def test_redis_not_answering_from_a_subprocess() -> None:
    proc = graphrunner("list", env=proc_env(f"redis://127.0.0.1:{free_port()}/0"), timeout=30)
    assert proc.returncode == 1
    assert proc.stderr.startswith("error: cannot reach Redis") and no_traceback(proc.stderr)
