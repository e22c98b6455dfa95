"""`--json` on every command that prints a result (issue 18), with the shapes the README
documents; the commands that need a cluster are in tests/integration/test_cli_json_cluster.py."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from yaml_files import HELLO, write

from graphrunner.cli import main

REPO = Path(__file__).resolve().parents[2]
SERVERS = {"worker", "beat", "flower", "ui"}  # they run a server and print its log, not a result


def json_flag(command: click.Command) -> click.Option | None:
    return next((p for p in command.params if isinstance(p, click.Option) and "--json" in p.opts), None)


@pytest.mark.parametrize("name", sorted(set(main.commands) - SERVERS))
def test_every_command_that_prints_a_result_takes_json(name: str) -> None:
    command = main.commands[name]
    subcommands = command.commands if isinstance(command, click.Group) else {"": command}
    for sub, each in subcommands.items():
        flag = json_flag(each)
        assert flag is not None, f"graphrunner {name} {sub} has no --json"
        assert flag.is_flag and flag.help


@pytest.mark.parametrize("name", sorted(set(main.commands) - SERVERS))
def test_the_readme_documents_the_json_of_every_command(name: str) -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    table = readme[readme.index("### `--json`") :]
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    assert any(f"`{name}`" in row.split("|")[1] or f"`{name} " in row.split("|")[1] for row in rows), name


def test_schema_json_is_the_schema() -> None:
    plain = CliRunner().invoke(main, ["schema"])
    flagged = CliRunner().invoke(main, ["schema", "--json"])
    assert flagged.exit_code == 0, flagged.output
    assert json.loads(flagged.stdout) == json.loads(plain.stdout)


def test_state_takes_json_like_every_run_command() -> None:
    result = CliRunner().invoke(main, ["state", "some-run", "--json"], env={"GRAPHRUNNER_REDIS_URL": None})
    assert result.exit_code == 2
    assert "No such option" not in result.stderr
    assert "GRAPHRUNNER_REDIS_URL is not set" in result.stderr


def test_validate_json_shape(tmp_path: Path) -> None:
    path = write(tmp_path, "hello.yaml", HELLO)
    result = CliRunner().invoke(main, ["validate", str(path), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert set(report) == {"valid", "graph_id", "file", "errors", "warnings", "node_count"}
    two = json.loads(CliRunner().invoke(main, ["validate", str(path), str(path), "--json"]).stdout)
    assert two == [report, report]


def test_step_json_shape(tmp_path: Path) -> None:
    path = write(tmp_path, "hello.yaml", HELLO)
    args = ["step", str(path), "--node", "greet", "-i", "name=Ada", "--json"]
    result = CliRunner().invoke(main, args, env={"GRAPHRUNNER_QUIET": "1"})
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert set(data) == {"state", "executed_node", "next_node", "step_count", "status", "error"}
    assert (data["executed_node"], data["next_node"], data["status"]) == ("greet", "done", "running")
