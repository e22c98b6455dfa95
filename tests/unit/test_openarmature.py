"""OpenArmature graph-engine behaviours (../shared/OPENARMATURE.md), run in-process.

The fixtures 001-006, 008 and 009 are data-driven in tests/conformance (in-process and on a
cluster); these are the details that suite does not express."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from graphrunner import ReducerError, RunResult


def test_010_determinism(graph_of: Callable[..., object]) -> None:
    from graphrunner import Graph

    graph = graph_of("""
        id: f10
        state: {log: {type: list, default: [], reducer: append}, n: {type: integer, default: 0}}
        config: {start: a}
        nodes:
          a:
            type: gate
            assign: {n: "${state.n + 1}", log: ["${state.n}"]}
            next: [{to: $end, when: "state.n >= 5"}, {to: a}]
    """)
    assert isinstance(graph, Graph)
    first, second = graph.invoke_sync(), graph.invoke_sync()
    assert first.state == second.state == {"log": [0, 1, 2, 3, 4], "n": 5}
    assert first.path == second.path


def test_end_is_a_sentinel_not_a_node_name(run_yaml: Callable[..., RunResult]) -> None:
    result = run_yaml("""
        id: end-name
        config: {start: a}
        nodes:
          a: {type: gate, assign: {v: 1}, next: END}
          END: {type: gate, assign: {v: 2}, next: $end}
    """)
    assert result.path == ["a", "END"]
    assert result.state["v"] == 2


def test_reducer_error_names_field_reducer_node_and_keeps_pre_merge_state(
    run_yaml: Callable[..., RunResult],
) -> None:
    result = run_yaml("""
        id: red
        state: {log: {type: list, default: [start], reducer: append}, other: {type: integer, default: 0}}
        config: {start: a}
        nodes:
          a: {type: gate, assign: {log: not-a-list, other: 5}}
    """)
    assert result.status == "failed"
    assert result.error is not None and result.error.type == "reducer_error"
    with pytest.raises(ReducerError) as caught:
        result.raise_for_error()
    err = caught.value
    assert (err.field, err.reducer, err.node) == ("log", "append", "a")
    assert err.state == {"log": ["start"], "other": 0}
    assert isinstance(err.__cause__, ValueError)


def test_reducer_error_survives_without_the_exception_object(run_yaml: Callable[..., RunResult]) -> None:
    from dataclasses import replace

    result = run_yaml("""
        id: red2
        state: {log: {type: list, default: [], reducer: append}}
        config: {start: a}
        nodes:
          a: {type: gate, assign: {log: 5}}
    """)
    assert result.error is not None
    assert (result.error.field, result.error.reducer) == ("log", "append")
    with pytest.raises(ReducerError) as caught:
        replace(result, exception=None).raise_for_error()
    assert (caught.value.field, caught.value.reducer, caught.value.node) == ("log", "append", "a")
    assert caught.value.state == {"log": []}
