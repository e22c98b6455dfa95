"""`graphrunner validate`: human and JSON reports, exit codes, no tracebacks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from yaml_files import HELLO, assert_no_traceback, write

from graphrunner.cli import main

BROKEN_EDGES = """
id: broken
config:
  start: a
nodes:
  a:
    action: {tool: no_such_tool}
    next: missing
  done:
    type: return
"""

NEEDS_ENV = """
id: needs-env
config:
  start: done
  env_requires: [GRAPHRUNNER_TEST_SURELY_UNSET_VAR]
nodes:
  done:
    type: return
"""


def validate(*args: str, env: dict[str, str] | None = None) -> Result:
    """Invoke `graphrunner validate ARGS` in-process."""
    return CliRunner().invoke(main, ["validate", *args], env=env)


def test_valid_graph(tmp_path: Path) -> None:
    path = write(tmp_path, "hello.yaml", HELLO)
    result = validate(str(path))
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == f"{path}: valid (2 nodes, 0 warnings)"
    assert result.stderr == ""


def test_valid_graph_json(tmp_path: Path) -> None:
    result = validate(str(write(tmp_path, "hello.yaml", HELLO)), "--json")
    assert result.exit_code == 0
    report = json.loads(result.stdout)
    assert report["valid"] is True
    assert report["graph_id"] == "hello"
    assert (report["errors"], report["warnings"], report["node_count"]) == ([], [], 2)


def test_invalid_graph_lists_errors(tmp_path: Path) -> None:
    path = write(tmp_path, "broken.yaml", BROKEN_EDGES)
    result = validate(str(path))
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert any(line.startswith("error: ") and "[dangling_edge]" in line for line in lines)
    assert any(line.startswith("error: ") and "[unknown_tool]" in line for line in lines)
    assert any(line.startswith("error: ") and "[unreachable_node]" in line for line in lines)
    assert lines[-1].startswith(f"{path}: invalid (3 errors")
    assert_no_traceback(result)


def test_invalid_graph_json_has_the_codes(tmp_path: Path) -> None:
    result = validate("--json", str(write(tmp_path, "broken.yaml", BROKEN_EDGES)))
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["valid"] is False
    codes = {e["code"] for e in report["errors"]}
    assert codes == {"dangling_edge", "unknown_tool", "unreachable_node"}
    nodes = {e["code"]: e["node"] for e in report["errors"]}
    assert nodes == {"dangling_edge": "a", "unknown_tool": "a", "unreachable_node": "done"}


def test_malformed_yaml(tmp_path: Path) -> None:
    path = write(tmp_path, "bad.yaml", "id: x\nnodes: [a\n")
    result = validate(str(path))
    assert result.exit_code == 1
    assert "[invalid_yaml]" in result.stdout
    assert f"{path}: invalid (1 error)" in result.stdout
    assert_no_traceback(result)


def test_yaml_list_document(tmp_path: Path) -> None:
    result = validate("--json", str(write(tmp_path, "list.yaml", "- a\n- b\n")))
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert [e["code"] for e in report["errors"]] == ["invalid_schema"]
    assert "mapping" in report["errors"][0]["message"]
    assert_no_traceback(result)


def test_missing_file_is_a_usage_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    result = validate(str(missing))
    assert result.exit_code == 2
    assert "nope.yaml" in result.stderr
    assert result.stderr.startswith("error: ")
    assert f"{missing}: not found" in result.stdout
    assert_no_traceback(result)


def test_missing_file_json_object(tmp_path: Path) -> None:
    result = validate("--json", str(tmp_path / "nope.yaml"))
    assert result.exit_code == 2
    report = json.loads(result.stdout)
    assert report["valid"] is False
    assert [e["code"] for e in report["errors"]] == ["graph_not_found"]
    assert "nope.yaml" in report["errors"][0]["message"]


def test_several_graphs_give_a_json_list_and_the_worst_exit(tmp_path: Path) -> None:
    good = write(tmp_path, "hello.yaml", HELLO)
    bad = write(tmp_path, "broken.yaml", BROKEN_EDGES)
    result = validate("--json", str(good), str(bad))
    assert result.exit_code == 1
    reports = json.loads(result.stdout)
    assert [r["valid"] for r in reports] == [True, False]
    result = validate("--json", str(good), str(bad), str(tmp_path / "gone.yaml"))
    assert result.exit_code == 2
    assert [r["valid"] for r in json.loads(result.stdout)] == [True, False, False]


def test_env_flag_reports_env_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GRAPHRUNNER_TEST_SURELY_UNSET_VAR", raising=False)
    path = str(write(tmp_path, "needs-env.yaml", NEEDS_ENV))
    without = json.loads(validate("--json", path).stdout)
    assert without["warnings"] == []
    result = validate("--json", "--env", path)
    assert result.exit_code == 0
    warnings = json.loads(result.stdout)["warnings"]
    assert [w["code"] for w in warnings] == ["env_missing"]
    assert "GRAPHRUNNER_TEST_SURELY_UNSET_VAR" in warnings[0]["message"]
    human = validate("--env", path)
    assert "warning: " in human.stdout and "[env_missing]" in human.stdout
    assert "valid (1 node, 1 warning)" in human.stdout


def test_graph_id_on_the_graph_path(tmp_path: Path) -> None:
    write(tmp_path, "hello.yaml", HELLO)
    result = validate("hello", env={"GRAPHRUNNER_GRAPH_PATH": str(tmp_path)})
    assert result.exit_code == 0
    assert result.stdout.strip() == "hello: valid (2 nodes, 0 warnings)"
    missing = validate("nobody", env={"GRAPHRUNNER_GRAPH_PATH": str(tmp_path)})
    assert missing.exit_code == 2
    assert "'nobody'" in missing.stderr


def test_no_graph_argument_is_a_usage_error() -> None:
    assert validate().exit_code == 2


def test_console_script(tmp_path: Path) -> None:
    bad = write(tmp_path, "bad.yaml", "id: x\nnodes: [a\n")
    good = write(tmp_path, "hello.yaml", HELLO)
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    command = [sys.executable, "-m", "graphrunner", "validate"]
    proc = subprocess.run([*command, str(good)], capture_output=True, encoding="utf-8", env=env, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "valid (2 nodes, 0 warnings)" in proc.stdout
    proc = subprocess.run([*command, str(bad)], capture_output=True, encoding="utf-8", env=env, check=False)
    assert proc.returncode == 1
    assert "[invalid_yaml]" in proc.stdout
    proc = subprocess.run(
        [*command, "--json", str(tmp_path / "missing.yaml")],
        capture_output=True,
        encoding="utf-8",
        env=env,
        check=False,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert "missing.yaml" in proc.stderr
    assert json.loads(proc.stdout)["errors"][0]["code"] == "graph_not_found"


def test_graph_over_the_size_limit_is_invalid(tmp_path: Path) -> None:
    path = str(write(tmp_path, "hello.yaml", HELLO))
    result = validate("--json", path, env={"GRAPHRUNNER_MAX_GRAPH_BYTES": "10"})
    assert result.exit_code == 1
    assert [e["code"] for e in json.loads(result.stdout)["errors"]] == ["invalid_yaml"]


def test_malformed_setting_is_a_usage_error(tmp_path: Path) -> None:
    path = str(write(tmp_path, "hello.yaml", HELLO))
    result = validate(path, env={"GRAPHRUNNER_MAX_GRAPH_BYTES": "lots"})
    assert result.exit_code == 2
    assert result.stderr.startswith("error: GRAPHRUNNER_MAX_GRAPH_BYTES")
    assert_no_traceback(result)
