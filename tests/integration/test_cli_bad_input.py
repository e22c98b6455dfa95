"""Every bad input of issue 2 through the real command line: a clear located error, no traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

GOOD = """
    id: ok
    config: {start: a}
    nodes:
      a: {action: {tool: echo, params: {x: 1}}, next: done}
      done: {type: return}
"""


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GRAPHRUNNER_QUIET": "1"}
    env.pop("GRAPHRUNNER_REDIS_URL", None)  # `run` starts an embedded Redis and worker
    return subprocess.run(
        [sys.executable, "-m", "graphrunner", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def malformed(tmp: Path) -> str:
    return "id: x\nnodes: [a,\n"


def unclosed_mapping(tmp: Path) -> str:
    return "id: x\nconfig: {start: a\nnodes: {}\n"


def not_a_mapping(tmp: Path) -> str:
    return "- a\n- b\n"


def ten_megabytes(tmp: Path) -> str:
    return textwrap.dedent(GOOD) + "#" + "x" * 10_000_000 + "\n"


def deeply_nested(tmp: Path) -> str:
    return "id: deep\nconfig: {start: a}\nnodes: {a: {type: gate}}\nx: " + "[" * 10_000 + "]" * 10_000 + "\n"


def bad_expression(tmp: Path) -> str:
    return textwrap.dedent(GOOD).replace("{x: 1}", '{x: "${state.n +}"}')


def unclosed_expression(tmp: Path) -> str:
    return textwrap.dedent(GOOD).replace("{x: 1}", '{x: "${state.n"}')


def unknown_namespace(tmp: Path) -> str:
    return textwrap.dedent(GOOD).replace(
        "next: done", "next: [{to: done, when: 'secrets.token == 1'}, {to: done}]"
    )


def replaced(old: str, new: str) -> Callable[[Path], str]:
    """GOOD with one piece replaced (issue 12's malformed graphs)."""
    return lambda tmp: textwrap.dedent(GOOD).replace(old, new, 1)


CASES: dict[str, tuple[Callable[[Path], str], str, str]] = {
    "malformed-yaml": (malformed, "invalid_yaml", ":3:"),
    "unclosed-mapping": (unclosed_mapping, "started on line 2", ":3:"),
    "not-a-mapping": (not_a_mapping, "must be a mapping", ":1:"),
    "10-MB-file": (ten_megabytes, "byte limit", "g.yaml"),
    "nested-10000-deep": (deeply_nested, "nested too deeply", "g.yaml"),
    "expression-does-not-parse": (bad_expression, "bad_expression", ":5:"),
    "unclosed-expression": (unclosed_expression, "unclosed '${'", ":5:"),
    "condition-on-unknown-namespace": (unknown_namespace, "unknown namespace 'secrets'", ":5:"),
    "reducer-list-of-a-float": (
        replaced("id: ok", "id: ok\nstate: {s: {type: list, reducer: [1.5]}}"),
        "a reducer is a name or a mapping",
        ":3:",
    ),
    "branches-a-float": (
        replaced("next: done}", "next: {type: conditional, branches: 1.5}}"),
        "needs a list of branches",
        ":5:",
    ),
    "superscript-node-name": (
        replaced("done: {type: return}", 'done: {type: return}\n  "²": {type: return}'),
        "node name '²'",
        ":7:",
    ),
    "integer-over-4300-digits": (
        replaced("{x: 1}", "{x: " + "9" * 4400 + "}"),
        "more than 4300 digits",
        ":5:",
    ),
    "bracket-in-unknown-key": (replaced("id: ok", "id: ok\nx[y: 1"), "unknown key 'x[y'", ":3:"),
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("command", ["validate", "run"])
def test_bad_graph_gets_a_located_error(tmp_path: Path, case: str, command: str) -> None:
    make, expected, location = CASES[case]
    path = tmp_path / "g.yaml"
    path.write_text(make(tmp_path), encoding="utf-8")
    proc = cli(command, str(path))
    assert proc.returncode == (1 if command == "validate" else 2), proc.stderr
    output = proc.stdout + proc.stderr
    assert expected in output
    assert location in output
    assert "Traceback" not in output


def test_reducer_given_the_wrong_shape(tmp_path: Path) -> None:
    path = tmp_path / "g.yaml"
    path.write_text(
        textwrap.dedent("""
        id: shapes
        state: {log: {type: list, default: [], reducer: append}}
        config: {start: a}
        nodes:
          a: {type: gate, assign: {log: "not a list"}}
    """)
    )
    proc = cli("run", str(path), "--json")
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    error = json.loads(proc.stdout)["error"]
    assert error["type"] == "reducer_error" and error["node"] == "a"
    assert "reducer 'append' of field 'log'" in error["message"]


@pytest.mark.parametrize("where", [["--in-process"], []], ids=["in-process", "embedded cluster"])
def test_expression_failing_at_run_time(tmp_path: Path, where: list[str]) -> None:
    path = tmp_path / "g.yaml"
    path.write_text(
        textwrap.dedent("""
        id: divide
        inputs: {a: number, b: number}
        config: {start: go}
        nodes:
          go: {type: gate, assign: {out: "${inputs.a / inputs.b}"}}
    """)
    )
    proc = cli("run", str(path), *where, "-i", "a=1", "-i", "b=0")
    assert proc.returncode == 1, proc.stderr  # a failed run, not a hang or a crash
    assert "Traceback" not in proc.stdout + proc.stderr
    assert "node 'go': assign.out: expression 'inputs.a / inputs.b' failed: division by zero" in proc.stdout


def test_inputs_nested_1200_deep(tmp_path: Path) -> None:
    path = tmp_path / "g.yaml"
    path.write_text(textwrap.dedent(GOOD))
    inputs = tmp_path / "deep.json"
    inputs.write_text('{"x": ' + "[" * 1200 + "]" * 1200 + "}")
    proc = cli("run", str(path), "--in-process", "--inputs", f"@{inputs}")
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    assert "nested too deeply" in proc.stderr and "64 levels" in proc.stderr
