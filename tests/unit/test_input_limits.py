"""Inputs, state and resume patches must be JSON data within the nesting limit (issue 12):
deep, huge, NaN, non-string keys and other hostile values are clear errors, never a
RecursionError or another traceback; the CLI exits 2 for them."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner
from yaml_files import HELLO, assert_no_traceback, write

from graphrunner import Graph, RunResult
from graphrunner.cli import main
from graphrunner.cli.common import print_json
from graphrunner.engine import begin
from graphrunner.engine.start import resume
from graphrunner.errors import LimitExceeded, StateValidationError
from graphrunner.limits import MAX_DEPTH

OPEN = """
id: open
inputs: {name: {type: string}, blob: {type: any}}
state: {x: {type: any}}
config: {start: done}
nodes:
  done: {type: return, output: {x: "${state.x}", n: "${size(inputs)}"}}
"""
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def nested(levels: int, kind: str = "dict") -> Any:
    value: Any = 1
    for _ in range(levels):
        value = {"a": value} if kind == "dict" else [value]
    return value


@pytest.fixture
def graph(graph_of: Callable[[str], Graph]) -> Graph:
    return graph_of(OPEN)


def refused(graph: Graph, inputs: Any = None, state: Any = None) -> StateValidationError:
    with pytest.raises(StateValidationError) as info:
        graph.invoke_sync(inputs, state=state)
    return info.value


def test_nesting_limit_is_documented_value() -> None:
    assert MAX_DEPTH == 64


@pytest.mark.parametrize("kind", ["dict", "list"])
def test_a_5000_deep_input_is_refused_naming_it_and_the_limit(graph: Graph, kind: str) -> None:
    error = refused(graph, {"blob": nested(5000, kind)})
    assert "the inputs of graph 'open'" in str(error)
    assert "'blob' is nested more than 64 levels deep" in str(error)
    assert error.fields == ["blob"]


@pytest.mark.parametrize("kind", ["dict", "list"])
def test_a_5000_deep_state_is_refused(graph: Graph, kind: str) -> None:
    error = refused(graph, state={"x": nested(5000, kind)})
    assert "the initial state of graph 'open'" in str(error) and "'x' is nested more than 64" in str(error)
    assert error.fields == ["x"]


def test_the_limit_is_64_levels(graph: Graph) -> None:
    assert graph.invoke_sync(state={"x": nested(64, "list")}).status == "completed"
    assert "'x' is nested more than 64" in str(refused(graph, state={"x": nested(65, "list")}))


@pytest.mark.parametrize(
    ("value", "says"),
    [
        (math.nan, "nan is not a JSON number"),
        (math.inf, "inf is not a JSON number"),
        ([1, -math.inf], "-inf is not a JSON number"),
        (10**5000, "an integer of more than 4300 digits"),
        ({"k": {1: "v"}}, "a key 1 that is not a string"),
        ({(1, 2): "v"}, "a key (1, 2) that is not a string"),
        ({1, 2}, "a set, which is not JSON data"),
        (b"\xff", "a bytes, which is not JSON data"),
        (object(), "a object, which is not JSON data"),
        ("a\ud800", "an unpaired surrogate"),
        ({"\udcff": 1}, "an unpaired surrogate"),
    ],
    ids=lambda v: type(v).__name__ if not isinstance(v, str) else None,
)
def test_values_that_are_not_json_data(graph: Graph, value: Any, says: str) -> None:
    error = refused(graph, state={"x": value})
    assert says in str(error), str(error)
    assert error.fields == ["x"]


def test_a_huge_int_of_the_wrong_type_is_named(graph: Graph) -> None:
    error = refused(graph, {"name": 10**5000})
    assert "'name' must be string, got int <int>" in str(error)


def test_a_deep_input_of_the_wrong_type_is_named(graph: Graph) -> None:
    assert "'name' must be string, got list" in str(refused(graph, {"name": nested(5000, "list")}))


def test_non_string_top_level_keys(graph_of: Callable[[str], Graph], graph: Graph) -> None:
    assert "unknown input '1'" in str(refused(graph, {1: "a", "b": 2}))
    bare = graph_of("id: bare\nconfig: {start: d}\nnodes: {d: {type: return}}")
    assert "key 1 that is not a string" in str(refused(bare, {1: "a"}))
    assert "key (1, 2) that is not a string" in str(refused(bare, None, {(1, 2): "a"}))


def test_huge_strings_are_bounded_by_the_size_limit(graph: Graph) -> None:
    with pytest.raises(LimitExceeded, match="over the limit"):
        graph.invoke_sync({"name": "x" * 2_000_000})
    assert graph.invoke_sync({"name": "x" * 100_000}).status == "completed"


def test_unicode_is_fine(graph: Graph) -> None:
    result = graph.invoke_sync({"name": "é💥\u0000"}, state={"x": {"ключ": ["💥"]}})
    assert result.status == "completed" and result.output == {"x": {"ключ": ["💥"]}, "n": 1}


def test_begin_refuses_before_any_snapshot(graph: Graph) -> None:
    with pytest.raises(StateValidationError, match="nested more than 64"):
        begin(graph, {"name": "a"}, run_id="r", state={"x": nested(5000)})


def test_resume_patch_is_checked(graph_of: Callable[[str], Graph]) -> None:
    graph = graph_of(
        "id: p\nstate: {x: {type: any}}\nconfig: {start: wait}\n"
        "nodes: {wait: {type: pause, next: done}, done: {type: return}}"
    )
    paused = graph.invoke_sync()
    assert paused.status == "paused"
    snap = begin(graph, None, run_id="r").model_copy(update={"status": "paused", "node": "wait"})
    with pytest.raises(StateValidationError, match="'x' is nested more than 64"):
        resume(graph, snap, NOW, {"x": nested(5000)})
    with pytest.raises(StateValidationError, match="nan is not a JSON number"):
        resume(graph, snap, NOW, {"x": math.nan})


def test_a_state_growing_too_deep_during_the_run_fails_it(run_yaml: Callable[..., RunResult]) -> None:
    wrap = '"${state.x}"'
    for _ in range(40):
        wrap = "{a: " + wrap + "}"
    result = run_yaml(
        f"""
        id: grow
        state: {{x: {{type: any}}}}
        config: {{start: a, max_steps: 100}}
        nodes:
          a: {{type: gate, assign: {{x: {wrap}}}, next: a}}
        """
    )
    assert result.status == "failed"
    assert result.error is not None and result.error.type == "limit_exceeded"
    assert (
        "node 'a' made a state value that cannot be kept: state.x is nested more than 64"
        in result.error.message
    )


# -- the command line ----------------------------------------------------------------------


def run_cli(*args: str) -> Any:
    result = CliRunner().invoke(main, ["run", "--in-process", *args], env={"GRAPHRUNNER_QUIET": "1"})
    assert_no_traceback(result)
    return result


def test_cli_inputs_file_1200_deep(tmp_path: Path) -> None:
    path = write(tmp_path, "hello.yaml", HELLO)
    deep = tmp_path / "deep.json"
    deep.write_text('{"name": ' + "[" * 1200 + "]" * 1200 + "}")
    result = run_cli(str(path), "--inputs", f"@{deep}")
    assert result.exit_code == 2, result.output
    assert "nested" in result.stderr and "64" in result.stderr


def test_cli_inputs_100_deep_is_refused_by_the_limit(tmp_path: Path) -> None:
    path = write(tmp_path, "open.yaml", OPEN)
    result = run_cli(str(path), "--inputs", json.dumps({"blob": nested(100, "list")}))
    assert result.exit_code == 2, result.output
    assert "'blob' is nested more than 64 levels deep" in result.stderr


def test_cli_input_pair_1200_deep(tmp_path: Path) -> None:
    path = write(tmp_path, "open.yaml", OPEN)  # `blob` is of type any: -i parses it as JSON
    result = run_cli(str(path), "-i", "blob=" + "[" * 1200 + "]" * 1200)
    assert result.exit_code == 2, result.output
    assert "input 'blob': nested" in result.stderr


def test_cli_inputs_nan_is_not_json(tmp_path: Path) -> None:
    path = write(tmp_path, "hello.yaml", HELLO)
    result = run_cli(str(path), "--inputs", '{"name": NaN}')
    assert result.exit_code == 2, result.output
    assert "NaN is not JSON" in result.stderr


@pytest.mark.parametrize("text", ["NaN", "Infinity", "-Infinity"])
def test_cli_input_pair_nan_is_text(tmp_path: Path, text: str) -> None:
    path = write(tmp_path, "hello.yaml", HELLO)
    result = run_cli(str(path), "-i", f"name={text}", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["output"] == {"greeting": f"Hello {text}"}


def test_cli_input_pair_with_an_undecodable_byte(tmp_path: Path) -> None:
    path = write(tmp_path, "hello.yaml", HELLO)
    result = run_cli(str(path), "-i", "name=a\udcff")  # what Python makes of argv byte 0xff
    assert result.exit_code == 2, result.output
    assert "unpaired surrogate" in result.stderr


def test_cli_step_state_file_deep(tmp_path: Path) -> None:
    path = write(tmp_path, "hello.yaml", HELLO)
    deep = tmp_path / "deep.json"
    deep.write_text('{"greeting": ' + "[" * 1200 + "]" * 1200 + "}")
    result = CliRunner().invoke(
        main, ["step", str(path), "--node", "greet", "--state", f"@{deep}", "-i", "name=a"]
    )
    assert_no_traceback(result)
    assert result.exit_code == 2, result.output


def test_print_json_escapes_what_utf8_cannot_write() -> None:
    """A tool may return a string with an unpaired surrogate (JSON allows `\\ud800`)."""
    result = CliRunner().invoke(_echo_json, [])
    assert result.exception is None, result.exception
    assert json.loads(result.stdout) == {"s": "a\ud800", "t": "é"}


@click.command()
def _echo_json() -> None:
    print_json({"s": "a\ud800", "t": "é"})


@pytest.mark.parametrize("value", [1, "ab", [("x", 1)], [1]], ids=repr)
def test_state_and_patch_that_are_not_mappings(graph: Graph, value: Any) -> None:
    assert "state must be a mapping of field to value" in str(refused(graph, state=value))
    paused = begin(graph, None, run_id="r").model_copy(update={"status": "paused", "node": "done"})
    with pytest.raises(StateValidationError, match="the state patch must be a mapping of field to value"):
        resume(graph, paused, NOW, value)
