"""`assign_result` (a node's result as its partial update) and model-typed function arguments."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from graphrunner import GraphValidationError, NodeError, RunResult
from graphrunner.loading import parse_graph

GRAPH = """
id: typed
state:
  topic: {type: string, default: ""}
  log: {type: list, default: [], reducer: append}
config: {start: a}
nodes:
  a:
    action: {tool: python, params: {fn: "builder_targets:describe", args: {state: "${state}", note: N}}}
    assign_result: true
    ASSIGN
    next: {fn: "builder_targets:by_topic"}
  done:
    type: gate
    assign: {log: [done]}
"""


def run(run_yaml: Callable[..., RunResult], assign: str = "", note: str = "n", **kwargs: Any) -> RunResult:
    return run_yaml(GRAPH.replace("ASSIGN", assign).replace("N}", f"{note}}}"), **kwargs)


def test_the_result_is_merged_field_by_field_with_typed_arguments(run_yaml: Callable[..., RunResult]) -> None:
    result = run(run_yaml, state={"topic": "cats"})
    assert result.path == ["a", "done"]  # the routing function got a Flow too
    assert result.state["log"] == ["Flow:cats:n", "done"]


def test_assign_result_and_assign_together(run_yaml: Callable[..., RunResult]) -> None:
    result = run(run_yaml, assign='assign: {topic: "${result.log.0}"}', state={"topic": "t"})
    assert result.state["topic"] == "Flow:t:n"
    assert result.state["log"] == ["Flow:t:n", "done"]


def test_a_field_written_twice_fails_the_node(run_yaml: Callable[..., RunResult]) -> None:
    result = run(run_yaml, assign="assign: {log: [x]}")
    with pytest.raises(NodeError, match=r"node 'a' writes field\(s\) log twice in one update"):
        result.raise_for_error()


def test_a_result_that_is_no_mapping_fails_the_node(run_yaml: Callable[..., RunResult]) -> None:
    text = GRAPH.replace("builder_targets:describe", "tool_targets:add").replace(
        'args: {state: "${state}", note: N}', "args: {a: 1}"
    )
    result = run_yaml(text.replace("ASSIGN", ""))
    assert result.error is not None and result.error.type == "node_exception"
    assert (
        "assign_result needs the action to return a mapping of state fields (a partial update), got int 2"
        in (result.error.message)
    )


def test_an_argument_that_does_not_fit_its_model_is_a_validation_error(
    run_yaml: Callable[..., RunResult],
) -> None:
    text = GRAPH.replace("ASSIGN", "").replace('topic: {type: string, default: ""}', 'topic: {default: ""}')
    result = run_yaml(text.replace("N}", "n}"), state={"topic": ["not", "text"]})
    assert result.status == "failed"
    assert result.state["_last_error"]["type"] == "validation"
    assert "argument 'state' does not fit Flow: topic: Input should be a valid string" in result.error.message


def test_a_routing_function_and_edges_are_multiple_outgoing_edges() -> None:
    text = GRAPH.replace("ASSIGN", "").replace(
        'next: {fn: "builder_targets:by_topic"}',
        'next: {branches: [{to: done}], fn: "builder_targets:by_topic"}',
    )
    with pytest.raises(GraphValidationError) as info:
        parse_graph(text)
    assert info.value.codes == ["multiple_outgoing_edges"]
