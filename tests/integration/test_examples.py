"""Every example graph in graphs/ is validated and run, in-process and through the real CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from graphrunner import load_graph
from graphrunner.loading import inspect_graph

GRAPHS = Path(__file__).resolve().parents[2] / "graphs"
CASES: list[tuple[str, dict[str, Any], str, list[str]]] = [
    ("hello.yaml", {"name": "Ada"}, "completed", ["greet", "shout", "done"]),
    ("branching.yaml", {"score": 80}, "completed", ["grade", "publish", "done"]),
    ("branching.yaml", {"score": 20}, "completed", ["grade", "review", "recover", "done"]),
    ("foreach.yaml", {"words": ["a", "bb", "ccc"]}, "completed", ["measure", "report", "done"]),
    ("scheduled.yaml", {"team": "ops"}, "completed", ["summarise", "done"]),
]


def test_every_example_is_covered() -> None:
    assert {c[0] for c in CASES} == {p.name for p in GRAPHS.glob("*.yaml")}


@pytest.mark.parametrize("path", sorted(GRAPHS.glob("*.yaml")), ids=lambda p: p.name)
def test_example_is_valid_without_warnings(path: Path) -> None:
    graph, report = inspect_graph(path)
    assert graph is not None, [i.render() for i in report.errors]
    assert report.warnings == []


@pytest.mark.parametrize(("name", "inputs", "status", "path"), CASES)
def test_example_runs_in_process(name: str, inputs: dict[str, Any], status: str, path: list[str]) -> None:
    result = load_graph(GRAPHS / name).invoke_sync(inputs)
    assert result.status == status, result.error
    assert result.path == path


@pytest.mark.parametrize(("name", "inputs", "status", "path"), CASES)
def test_example_runs_from_the_command_line(
    name: str, inputs: dict[str, Any], status: str, path: list[str]
) -> None:
    env = {**os.environ, "GRAPHRUNNER_QUIET": "1"}
    cmd = [
        sys.executable,
        "-m",
        "graphrunner",
        "run",
        str(GRAPHS / name),
        "--inputs",
        json.dumps(inputs),
        "--json",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["status"] == status
    assert result["path"] == path
    assert proc.stderr == ""
    in_process = load_graph(GRAPHS / name).invoke_sync(inputs)
    assert result["state"] == in_process.state
    assert result["output"] == in_process.output


RYE = GRAPHS / "rye"  # Rye graph tools, run as written (docs/running-rye-graphs.md)


@pytest.mark.parametrize("path", sorted(RYE.glob("*.yaml")), ids=lambda p: p.name)
def test_rye_example_is_valid_without_warnings(path: Path) -> None:
    graph, report = inspect_graph(path)
    assert graph is not None, [i.render() for i in report.errors]
    assert (graph.spec.dialect, report.warnings) == ("rye", [])


@pytest.mark.parametrize(("threshold", "verdict"), [(10, "few"), (2, "many")])
def test_the_rye_example_counts_and_compares_text_as_numbers(threshold: int, verdict: str) -> None:
    inputs = {"directory": str(RYE), "pattern": "*.yaml", "threshold": threshold}
    result = load_graph(RYE / "count-files.yaml").invoke_sync(inputs)
    assert (result.status, result.path) == ("completed", ["count", verdict, "summarise", "done"]), (
        result.error
    )
    assert (result.output["count"], result.output["summary"]) == ("2\n", f"2 files: {verdict}")


def test_the_rye_example_runs_from_the_command_line_on_the_embedded_redis() -> None:
    cmd = [sys.executable, "-m", "graphrunner", "run", str(RYE / "count-files.yaml"), "--json"]
    cmd += ["-i", f"directory={RYE}", "-i", "pattern=*.yaml"]
    env = {**os.environ, "GRAPHRUNNER_QUIET": "1"}
    env.pop("GRAPHRUNNER_REDIS_URL", None)
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert (result["status"], result["output"]["summary"]) == ("completed", "2 files: few")
    assert result["state"]["inputs"] == {"directory": str(RYE), "pattern": "*.yaml", "threshold": 10}


def test_hello_output() -> None:
    result = load_graph(GRAPHS / "hello.yaml").invoke_sync({"name": "Ada"})
    assert result.output == {"greeting": "HELLO, ADA!", "log": ["greeted Ada", "shouted"], "steps": 2}


def test_branching_recovery_reads_last_error() -> None:
    result = load_graph(GRAPHS / "branching.yaml").invoke_sync({"score": 20})
    assert result.state["meta"] == {"recovered_from": "review", "reason": "score 20 needs a human review"}
    assert result.steps[1]["status"] == "error" and result.steps[1]["next_node"] == "recover"


def test_foreach_collects_in_order() -> None:
    result = load_graph(GRAPHS / "foreach.yaml").invoke_sync({"words": ["a", "bb", "ccc", "dddddd"]})
    assert [r["length"] for r in result.state["lengths"]] == [1, 2, 3, 6]
    assert result.output["summary"] == {"count": 4, "longest": True}
