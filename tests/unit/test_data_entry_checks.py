"""One check of what enters a run (issue 29, items 3 and 4): NaN and ±Infinity made by an
expression or returned by a tool fail the step as `non_finite_number` with the value's path
(unless the graph asks for null), and the nesting limit (64) is the same for inputs, tool
results, the state after reducers, action params, a run's output and transcript records,
failing as `limit_exceeded`. Every entry point shares `limits.value_problem`."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import pytest

from graphrunner import (
    Graph,
    LimitExceeded,
    NestedTooDeeply,
    NonFiniteNumber,
    RunResult,
    StateValidationError,
)
from graphrunner.limits import MAX_DEPTH, value_problem
from graphrunner.services.records import carried

RESULT = json.dumps({"items": [1, {"score": "NaN"}]}).replace('"NaN"', "NaN")  # what json.loads takes


def nested(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = [value]
    return value


def graph_text(node: str, config: str = "") -> str:
    return f"""
        id: data
        inputs: {{blob: {{type: any}}}}
        state: {{x: {{type: any}}, r: {{type: any}}}}
        config: {{start: a{config}}}
        nodes:
          a: {node}
          b: {{type: return, output: {{x: "${{state.x}}", r: "${{state.r}}"}}}}
        """


@pytest.mark.parametrize(
    ("node", "where"),
    [
        ('{type: gate, assign: {x: "${1.0 / 0.0}"}, next: b}', "state.x holds inf"),
        (
            '{type: gate, assign: {x: "${[1.0, {\\"s\\": double(\\"nan\\")}]}"}, next: b}',
            "state.x[1].s holds nan",
        ),
        ('{action: {tool: echo, params: {v: "${-1.0 / 0.0}"}}, next: b}', "params.v holds -inf"),
        (
            f"{{action: {{tool: python, params: {{fn: 'json:loads', args: {{s: '{RESULT}'}}}}}}, "
            "result_key: r, next: b}",
            "result.items[1].score holds nan",
        ),
    ],
    ids=["cel-division", "cel-double-nan", "params", "python-tool-result"],
)
def test_a_non_finite_number_fails_the_step_with_its_path(
    run_yaml: Callable[..., RunResult], node: str, where: str
) -> None:
    result = run_yaml(graph_text(node))
    assert result.status == "failed" and result.error is not None, result
    assert result.error.type == "non_finite_number" and result.error.node == "a"
    assert where in result.error.message
    assert result.state.get("x") is None and result.state.get("r") is None  # nothing of it kept
    json.dumps(result.to_dict(), allow_nan=False)  # every reader can write what the run holds


def test_a_non_finite_number_in_a_return_output_fails_the_step(run_yaml: Callable[..., RunResult]) -> None:
    result = run_yaml(
        'id: out\nconfig: {start: b}\nnodes: {b: {type: return, output: {r: {s: "${2.0 / 0.0}"}}}}'
    )
    assert result.status == "failed" and result.error is not None
    assert result.error.type == "non_finite_number" and "output.r.s holds inf" in result.error.message


def test_a_graph_may_turn_non_finite_numbers_into_null(run_yaml: Callable[..., RunResult]) -> None:
    tool = f"{{action: {{tool: python, params: {{fn: 'json:loads', args: {{s: '{RESULT}'}}}}}}"
    node = f'{tool}, result_key: r, assign: {{x: "${{[1.0 / 0.0, 2]}}"}}, next: b}}'
    result = run_yaml(graph_text(node, ", non_finite: 'null'"))
    assert result.status == "completed", result.error
    assert result.output == {"x": [None, 2], "r": {"items": [1, {"score": None}]}}


def test_the_non_finite_setting_is_validated(graph_of: Callable[[str], Graph]) -> None:
    with pytest.raises(Exception, match="non_finite"):
        graph_of(graph_text("{type: gate, next: b}", ", non_finite: 'zero'"))


@pytest.mark.parametrize("value", [math.nan, [1, {"a": -math.inf}]], ids=["nan", "nested-inf"])
def test_inputs_with_non_finite_numbers_are_refused(graph_of: Callable[[str], Graph], value: Any) -> None:
    graph = graph_of(graph_text("{type: gate, next: b}"))
    with pytest.raises(NonFiniteNumber) as info:
        graph.invoke_sync({"blob": value})
    assert isinstance(info.value, StateValidationError) and info.value.category == "non_finite_number"
    assert info.value.fields == ["blob"] and "not a JSON number" in str(info.value)


# -- the nesting limit, at each entry point ---------------------------------------------------


def test_inputs_past_the_nesting_limit(graph_of: Callable[[str], Graph]) -> None:
    graph = graph_of(graph_text("{type: gate, next: b}"))
    assert graph.invoke_sync({"blob": nested(MAX_DEPTH)}).status == "completed"
    with pytest.raises(NestedTooDeeply) as info:
        graph.invoke_sync({"blob": nested(MAX_DEPTH + 1)})
    assert isinstance(info.value, LimitExceeded) and isinstance(info.value, StateValidationError)
    assert info.value.category == "limit_exceeded"
    assert "the inputs of graph 'data': 'blob' is nested more than 64 levels deep (the nesting limit)" in str(
        info.value
    )


def test_a_tool_result_past_the_nesting_limit(run_yaml: Callable[..., RunResult]) -> None:
    deep = "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1)
    node = f"{{action: {{tool: python, params: {{fn: 'json:loads', args: {{s: '{deep}'}}}}}}, result_key: r, next: b}}"
    result = run_yaml(graph_text(node))
    assert result.status == "failed" and result.error is not None
    assert result.error.type == "limit_exceeded" and result.error.node == "a"
    assert "result is nested more than 64 levels deep (the nesting limit)" in result.error.message


def test_the_state_after_reducers_past_the_nesting_limit_without_a_size_limit(
    run_yaml: Callable[..., RunResult],
) -> None:
    """One level a step (through the `last_write_wins` reducer): caught at 65 levels, not by the
    state size limit (a few hundred bytes here)."""
    result = run_yaml(
        """
        id: grow
        state: {x: {type: any, reducer: last_write_wins}}
        config: {start: a, max_steps: 200}
        nodes:
          a: {type: gate, assign: {x: "${[state.x]}"}, next: a}
        """,
    )
    assert result.status == "failed" and result.error is not None
    assert result.error.type == "limit_exceeded" and result.error.step == MAX_DEPTH + 1
    assert "state.x is nested more than 64 levels deep (the nesting limit)" in result.error.message
    assert value_problem(result.state["x"]) is None  # the state kept is the last good one


def test_params_past_the_nesting_limit(run_yaml: Callable[..., RunResult]) -> None:
    result = run_yaml(
        graph_text('{action: {tool: echo, params: {v: "${inputs.blob}"}}, next: b}'), {"blob": nested(64)}
    )
    assert result.status == "failed" and result.error is not None
    assert result.error.type == "limit_exceeded" and "params is nested more than 64" in result.error.message


def test_a_record_leaves_out_a_value_past_the_nesting_limit() -> None:
    values, omitted = carried({"x": nested(MAX_DEPTH + 1), "y": nested(3)}, ("x", "y"), None)
    assert values == {"y": nested(3)} and omitted == ("x",)
