"""`graphrunner step`: one node, the result on stdout, usage errors exit 2 with nothing run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from yaml_files import HELLO, assert_no_traceback, write

from graphrunner.cli import main

ROUTED = """
id: routed
state:
  n: {type: integer, default: 0}
  log: {type: list, default: [], reducer: append}
config:
  start: bump
nodes:
  bump:
    action: {tool: echo, params: {value: "${state.n + 1}"}}
    assign: {n: "${result.value}", log: ["bump"]}
    next:
      - {to: big, when: state.n > 10}
      - {to: explode}
  explode:
    action: {tool: fail, params: {message: "the reactor is on fire"}}
    next: big
  big: {type: return}
"""
STEP_KEYS = {"state", "executed_node", "next_node", "step_count", "status", "error"}


@pytest.fixture(autouse=True)
def _loud(monkeypatch: pytest.MonkeyPatch) -> None:
    """Progress on unless a test asks for quiet."""
    monkeypatch.delenv("GRAPHRUNNER_QUIET", raising=False)


@pytest.fixture
def routed(tmp_path: Path) -> str:
    return str(write(tmp_path, "routed.yaml", ROUTED))


def step(*args: str, env: dict[str, str] | None = None) -> Result:
    """Invoke `graphrunner step ARGS` in this process."""
    return CliRunner().invoke(main, ["step", *args], env=env)


@pytest.mark.parametrize(("n", "target"), [(10, "big"), (0, "explode")])
def test_step_prints_the_json_object(routed: str, n: int, target: str) -> None:
    result = step(routed, "--node", "bump", "--state", json.dumps({"n": n}), "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout) == {
        "state": {"n": n + 1, "log": ["bump"]},
        "executed_node": "bump",
        "next_node": target,
        "step_count": 1,
        "status": "running",
        "error": None,
    }
    assert result.stderr.startswith("[graph:routed] step 1 bump ✓ ")


def test_state_from_a_file_and_inputs(tmp_path: Path) -> None:
    path = str(write(tmp_path, "hello.yaml", HELLO))
    state = tmp_path / "state.json"
    state.write_text(json.dumps({"greeting": "old"}), encoding="utf-8")
    result = step(path, "--node", "greet", "--state", f"@{state}", "-i", "name=Ada", "--json")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["state"] == {"greeting": "Hello Ada"}
    assert data["next_node"] == "done"


def test_an_end_node_has_a_null_next_node(routed: str) -> None:
    result = step(routed, "--node", "big", "--json", env={"GRAPHRUNNER_QUIET": "1"})
    assert result.exit_code == 0
    assert result.stderr == ""
    data = json.loads(result.stdout)
    assert (data["next_node"], data["status"]) == (None, "completed")


def test_human_output(routed: str) -> None:
    result = step(routed, "--node", "bump", "--state", '{"n": 20}')
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[:3] == ["executed node: bump", "status: running", "next node: big"]
    assert '"n": 21' in result.stdout


def test_a_failing_node_exits_1(routed: str) -> None:
    result = step(routed, "--node", "explode", "--json")
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert set(data) == STEP_KEYS
    assert data["status"] == "failed" and data["next_node"] is None
    assert data["error"]["type"] == "node_exception"
    assert data["error"]["message"] == "the reactor is on fire"
    assert "✗" in result.stderr
    human = step(routed, "--node", "explode")
    assert human.exit_code == 1
    assert "error: node_exception at node 'explode' (step 1): the reactor is on fire" in human.stdout
    assert_no_traceback(human)


def test_an_unknown_node_lists_the_known_ones(routed: str) -> None:
    result = step(routed, "--node", "nope", "--json")
    assert result.exit_code == 2
    assert result.stderr == "error: graph 'routed' has no node 'nope'; its nodes: big, bump, explode\n"
    assert result.stdout == ""
    assert_no_traceback(result)


def test_state_failing_the_schema_names_the_field(routed: str) -> None:
    result = step(routed, "--node", "bump", "--state", '{"n": "ten"}', "--json")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: state at node 'bump' of graph 'routed' fails its schema")
    assert "'n' must be integer, got str 'ten'" in result.stderr
    assert result.stdout == ""
    assert_no_traceback(result)


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("{bad", "malformed JSON"),
        ("[1, 2]", "expected a JSON object, got list"),
        ("@/no/such.json", "cannot read"),
    ],
)
def test_bad_state_option_is_a_usage_error(routed: str, value: str, why: str) -> None:
    result = step(routed, "--node", "bump", "--state", value)
    assert result.exit_code == 2
    assert "'--state'" in result.stderr and why in result.stderr
    assert result.stdout == ""
    assert_no_traceback(result)


def test_state_over_the_size_limit_exit_2(routed: str) -> None:
    big = json.dumps({"log": ["x" * 200]})
    result = step(routed, "--node", "bump", "--state", big, env={"GRAPHRUNNER_MAX_STATE_BYTES": "100"})
    assert result.exit_code == 2
    assert result.stderr.startswith("error: ") and "initial state of graph 'routed'" in result.stderr
    assert result.stdout == ""
    assert_no_traceback(result)


def test_bad_inputs_exit_2(tmp_path: Path) -> None:
    result = step(str(write(tmp_path, "hello.yaml", HELLO)), "--node", "greet")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: invalid inputs for graph 'hello'")
    assert "'name'" in result.stderr
    assert_no_traceback(result)


def test_unknown_graph_file_exit_2(tmp_path: Path) -> None:
    result = step(str(tmp_path / "missing.yaml"), "--node", "a")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: ") and "missing.yaml" in result.stderr
    assert result.stdout == ""
    assert_no_traceback(result)


def test_node_is_required(routed: str) -> None:
    result = step(routed)
    assert result.exit_code == 2
    assert "--node" in result.stderr


def test_help_documents_the_command() -> None:
    assert "  step " in CliRunner().invoke(main, ["--help"]).stdout
    help_text = CliRunner().invoke(main, ["step", "--help"]).stdout
    for text in ("--node", "--state", "--inputs", "--json", "No run is created"):
        assert text in help_text
