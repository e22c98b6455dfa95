"""`--json` of the commands that read a cluster, with the shapes the README documents, and `-i`
converted to the declared input type by `submit` (issue 18)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from graphrunner.cli import main
from graphrunner.client import Client
from graphrunner.embedded import EmbeddedRedis

pytestmark = pytest.mark.integration

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

TYPED = """
id: {graph_id}
inputs:
  name: {{type: string}}
  count: {{type: integer, default: 1}}
state:
  greeting: string
config: {{start: greet}}
nodes:
  greet:
    action: {{tool: echo, params: {{text: "Hello ${{inputs.name}}"}}}}
    assign: {{greeting: "${{result.text}}"}}
    next: done
  done:
    type: return
    output: {{greeting: "${{state.greeting}}", count: "${{inputs.count}}"}}
"""

PAUSING = """
id: {graph_id}
config: {{start: hold}}
nodes:
  hold: {{type: pause, next: done}}
  done: {{type: return}}
"""


@pytest.fixture
def env(redis_server: EmbeddedRedis, cluster: Client) -> dict[str, str | None]:
    """CliRunner environment: the test Redis, whose runs the in-thread worker executes."""
    return {
        "GRAPHRUNNER_REDIS_URL": redis_server.url,
        "GRAPHRUNNER_BROKER_URL": None,
        "GRAPHRUNNER_QUIET": "1",
    }


def cli(env: dict[str, str | None], *args: str) -> Result:
    return CliRunner().invoke(main, list(args), env=env)


def json_of(env: dict[str, str | None], *args: str, code: int = 0) -> Any:
    """The JSON `graphrunner ARGS --json` prints, exiting `code`."""
    result = cli(env, *args, "--json")
    assert result.exit_code == code, result.output
    return json.loads(result.stdout)


def graph_file(tmp_path: Path, text: str) -> tuple[str, str]:
    """A graph file of `text` with a unique id: (path, graph id)."""
    graph_id = f"cli/json-{uuid.uuid4().hex[:8]}"
    path = tmp_path / "graph.yaml"
    path.write_text(text.format(graph_id=graph_id), encoding="utf-8")
    return str(path), graph_id


def test_submit_converts_inputs_and_the_run_commands_print_json(
    env: dict[str, str | None], tmp_path: Path
) -> None:
    path, graph_id = graph_file(tmp_path, TYPED)
    submitted = json_of(env, "submit", path, "-i", "name=42", "-i", "count=3")
    assert set(submitted) == {"run_id"}
    run_id = submitted["run_id"]
    result = json_of(env, "wait", run_id, "--timeout", "60")
    assert set(result) == RUN_KEYS
    assert result["output"] == {"greeting": "Hello 42", "count": 3}
    assert json_of(env, "status", run_id) == result
    state = json_of(env, "state", run_id)
    assert state == json.loads(cli(env, "state", run_id).stdout) == {"greeting": "Hello 42"}
    records = json_of(env, "steps", run_id)
    assert all({"step", "node", "status"} <= set(r) for r in records)
    assert [r["node"] for r in records if "duration_ms" in r] == ["greet", "done"]
    [listed] = json_of(env, "list", "--graph", graph_id)
    assert set(listed) == {"run_id", "graph_id", "status", "step_count", "created_at", "updated_at"}
    assert (listed["run_id"], listed["status"], listed["step_count"]) == (run_id, "completed", 2)


def test_submit_refuses_an_input_that_is_not_its_type(env: dict[str, str | None], tmp_path: Path) -> None:
    path, graph_id = graph_file(tmp_path, TYPED)
    result = cli(env, "submit", path, "-i", "name=Ada", "-i", "count=three")
    assert result.exit_code == 2
    assert "input 'count' is declared integer, and 'three' is not an integer" in result.stderr
    assert json_of(env, "list", "--graph", graph_id) == []  # nothing was submitted


def test_resume_and_cancel_print_the_run_and_its_status(env: dict[str, str | None], tmp_path: Path) -> None:
    path, _ = graph_file(tmp_path, PAUSING)
    resumed_id = json_of(env, "submit", path)["run_id"]
    assert json_of(env, "wait", resumed_id, "--timeout", "60", code=1)["status"] == "paused"
    resumed = json_of(env, "resume", resumed_id)
    assert set(resumed) == {"run_id", "status"} and resumed["run_id"] == resumed_id
    assert json_of(env, "wait", resumed_id, "--timeout", "60")["status"] == "completed"

    cancelled_id = json_of(env, "submit", path)["run_id"]
    assert json_of(env, "wait", cancelled_id, "--timeout", "60", code=1)["status"] == "paused"
    assert json_of(env, "cancel", cancelled_id) == {"run_id": cancelled_id, "status": "cancelled"}


def test_operator_commands_print_json(env: dict[str, str | None]) -> None:
    swept = json_of(env, "sweep")
    assert set(swept) == {"checked", "repaired", "pruned", "skipped"}
    queues = json_of(env, "queues")
    assert set(queues) == {"queues", "held_by_workers", "timers", "dead_letters", "last_sweep_s", "dead"}
    pinged = json_of(env, "ping", "--worker", "nobody@nowhere", "--timeout", "0.5", code=1)
    assert pinged == {"answered": [], "missing": ["nobody@nowhere"]}
    queue = f"cli-json-{uuid.uuid4().hex[:8]}"  # a queue of its own: the session's runs are left alone
    assert json_of(env, "purge", "--queue", queue, "--yes") == {"purged": {queue: 0}}
