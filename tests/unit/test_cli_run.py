"""`graphrunner run`: inputs, progress on stderr, the result on stdout, exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from yaml_files import HELLO, assert_no_traceback, write

from graphrunner import __version__
from graphrunner.cli import main
from graphrunner.cli.common import parse_value

ECHO_INPUTS = """
id: echo-inputs
inputs:
  a: any
  b: any
  c: any
config:
  start: done
nodes:
  done:
    type: return
    output: {a: "${inputs.a}", b: "${inputs.b}", c: "${inputs.c}"}
"""

FAILING = """
id: failing
config:
  start: explode
nodes:
  explode:
    action: {tool: fail, params: {message: "the reactor is on fire"}}
    next: done
  done:
    type: return
"""

SLOW = """
id: slow
config:
  start: wait
nodes:
  wait:
    action: {tool: sleep, params: {seconds: 5}}
    next: done
  done:
    type: return
"""

INVALID = """
id: invalid
config:
  start: a
nodes:
  a:
    action: {tool: echo}
    next: nowhere
"""


@pytest.fixture(autouse=True)
def _loud(monkeypatch: pytest.MonkeyPatch) -> None:
    """Progress on unless a test asks for quiet."""
    monkeypatch.delenv("GRAPHRUNNER_QUIET", raising=False)


def run(*args: str, env: dict[str, str] | None = None) -> Result:
    """Invoke `graphrunner run --in-process ARGS` in this process (no Redis, no worker)."""
    return CliRunner().invoke(main, ["run", "--in-process", *args], env=env)


def test_run_prints_the_result_json(tmp_path: Path) -> None:
    result = run(str(write(tmp_path, "hello.yaml", HELLO)), "-i", "name=Ada", "--json")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["status"] == "completed"
    assert data["output"] == {"greeting": "Hello Ada"}
    assert data["path"] == ["greet", "done"]
    assert data["graph_id"] == "hello"
    assert data["error"] is None
    assert set(data) == {
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


def test_progress_lines_on_stderr(tmp_path: Path) -> None:
    result = run(str(write(tmp_path, "hello.yaml", HELLO)), "-i", "name=Ada", "--json")
    lines = result.stderr.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("[graph:hello] step 1 greet ✓ ")
    assert lines[0].endswith("(+greeting)")
    assert lines[1].startswith("[graph:hello] step 2 done ⏹ ")


def test_quiet_silences_progress(tmp_path: Path) -> None:
    path = str(write(tmp_path, "hello.yaml", HELLO))
    result = run(path, "-i", "name=Ada", "--json", env={"GRAPHRUNNER_QUIET": "1"})
    assert result.exit_code == 0
    assert result.stderr == ""
    assert json.loads(result.stdout)["status"] == "completed"


def test_human_summary(tmp_path: Path) -> None:
    result = run(str(write(tmp_path, "hello.yaml", HELLO)), "--input", "name=Ada")
    assert result.exit_code == 0
    assert result.stdout.startswith("status: completed\n")
    assert '"greeting": "Hello Ada"' in result.stdout
    assert "path: greet -> done" in result.stdout
    assert "[graph:hello]" not in result.stdout


def test_failing_node_exits_1(tmp_path: Path) -> None:
    result = run(str(write(tmp_path, "failing.yaml", FAILING)), "--json")
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert data["status"] == "failed"
    assert data["error"]["type"] == "node_exception"
    assert data["error"]["node"] == "explode"
    assert "✗" in result.stderr and "the reactor is on fire" in result.stderr
    assert_no_traceback(result)


def test_failing_node_human_summary(tmp_path: Path) -> None:
    result = run(str(write(tmp_path, "failing.yaml", FAILING)))
    assert result.exit_code == 1
    assert "status: failed" in result.stdout
    assert "error: node_exception at node 'explode' (step 1): the reactor is on fire" in result.stdout


def test_inputs_json_file_and_pairs_merge(tmp_path: Path) -> None:
    path = str(write(tmp_path, "echo.yaml", ECHO_INPUTS))
    inputs = tmp_path / "inputs.json"
    inputs.write_text(json.dumps({"a": "from file", "b": [1, 2]}), encoding="utf-8")
    result = run(path, "--inputs", f"@{inputs}", "-i", "a=3", "-i", "c=text", "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["output"] == {"a": 3, "b": [1, 2], "c": "text"}
    inline = run(path, "--inputs", '{"a": {"x": true}}', "--json")
    assert json.loads(inline.stdout)["output"]["a"] == {"x": True}


@pytest.mark.parametrize(
    ("text", "value"),
    [("Ada", "Ada"), ("3", 3), ("1.5", 1.5), ("true", True), ("null", None), ('"3"', "3"), ("[1]", [1])],
)
def test_input_values_parse_as_json_when_they_can(text: str, value: Any) -> None:
    assert parse_value(text) == value


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["--inputs", "{bad"], "--inputs"),
        (["--inputs", "[1, 2]"], "--inputs"),
        (["--inputs", "@/no/such/inputs.json"], "--inputs"),
        (["-i", "no-equals-sign"], "--input"),
        (["-i", "=value"], "--input"),
    ],
)
def test_bad_inputs_options_are_usage_errors(tmp_path: Path, args: list[str], option: str) -> None:
    result = run(str(write(tmp_path, "hello.yaml", HELLO)), *args)
    assert result.exit_code == 2
    assert option in result.stderr
    assert result.stdout == ""
    assert_no_traceback(result)


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--inputs", '{"name": 3}'], "'name'"),  # JSON values are taken as they are (-i name=3 is "3")
        (["-i", "name=Ada", "-i", "nickname=Ad"], "'nickname'"),
        ([], "'name'"),
    ],
)
def test_inputs_failing_the_schema_exit_2(tmp_path: Path, args: list[str], named: str) -> None:
    result = run(str(write(tmp_path, "hello.yaml", HELLO)), *args, "--json")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: invalid inputs for graph 'hello'")
    assert named in result.stderr
    assert result.stdout == ""
    assert_no_traceback(result)


def test_graph_not_found_exit_2(tmp_path: Path) -> None:
    result = run(str(tmp_path / "missing.yaml"))
    assert result.exit_code == 2
    assert result.stderr.startswith("error: ") and "missing.yaml" in result.stderr
    assert_no_traceback(result)


@pytest.mark.parametrize(
    ("text", "code"),
    [(INVALID, "[dangling_edge]"), ("id: x\nnodes: [a\n", "[invalid_yaml]"), ("- a\n", "[invalid_schema]")],
)
def test_invalid_graph_exit_2(tmp_path: Path, text: str, code: str) -> None:
    result = run(str(write(tmp_path, "graph.yaml", text)))
    assert result.exit_code == 2
    assert code in result.stderr
    assert "is invalid" in result.stderr
    assert result.stdout == ""
    assert_no_traceback(result)


def test_timeout_bounds_the_run(tmp_path: Path) -> None:
    result = run(str(write(tmp_path, "slow.yaml", SLOW)), "--timeout", "0.2", "--json")
    assert result.exit_code == 1
    assert "timed out after 0.2s" in result.stderr
    assert result.stdout == ""
    assert_no_traceback(result)


def test_timeout_must_be_positive(tmp_path: Path) -> None:
    assert run(str(write(tmp_path, "hello.yaml", HELLO)), "--timeout", "0").exit_code == 2


def test_console_script(tmp_path: Path) -> None:
    path = str(write(tmp_path, "hello.yaml", HELLO))
    env = {k: v for k, v in os.environ.items() if k != "GRAPHRUNNER_QUIET"}
    env["PYTHONIOENCODING"] = "utf-8"
    command = [sys.executable, "-m", "graphrunner", "run", "--in-process", path, "-i", "name=Ada", "--json"]
    proc = subprocess.run(command, capture_output=True, encoding="utf-8", env=env, check=False)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["path"] == ["greet", "done"]
    assert "[graph:hello] step 1 greet ✓" in proc.stderr
    quiet = subprocess.run(
        command, capture_output=True, encoding="utf-8", env={**env, "GRAPHRUNNER_QUIET": "1"}, check=False
    )
    assert quiet.returncode == 0
    assert quiet.stderr == ""
    bad = subprocess.run(
        [*command, "--inputs", "{nope"], capture_output=True, encoding="utf-8", env=env, check=False
    )
    assert bad.returncode == 2
    assert "--inputs" in bad.stderr and "Traceback" not in bad.stderr


def test_help_lists_the_commands_and_version() -> None:
    runner = CliRunner()
    help_text = runner.invoke(main, ["--help"]).stdout
    for command in ("run", "validate", "schema"):
        assert f"  {command} " in help_text
    version = runner.invoke(main, ["--version"])
    assert version.exit_code == 0
    assert version.stdout.strip() == f"graphrunner, version {__version__}"
