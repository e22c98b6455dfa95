"""OpenArmature graph-engine behaviours (../shared/OPENARMATURE.md), run in-process."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from yaml_files import write_yaml

from graphrunner import NodeError, ReducerError, RoutingError, RunResult, load_graph


def test_001_linear_static_flow(run_yaml: Callable[..., RunResult]) -> None:
    result = run_yaml("""
        id: f1
        state: {trace: {type: list, default: [], reducer: append}}
        config: {start: a}
        nodes:
          a: {type: gate, assign: {trace: [a]}, next: b}
          b: {type: gate, assign: {trace: [b]}, next: c}
          c: {type: gate, assign: {trace: [c]}, next: $end}
    """)
    assert result.status == "completed"
    assert result.path == ["a", "b", "c"]
    assert result.state["trace"] == ["a", "b", "c"]


def test_002_conditional_routing_sees_post_update_state(run_yaml: Callable[..., RunResult]) -> None:
    result = run_yaml("""
        id: f2
        state: {count: {type: integer, default: 0}}
        config: {start: a}
        nodes:
          a:
            type: gate
            assign: {count: 1}
            next: [{to: $end, when: "state.count == 1"}, {to: b}]
          b: {type: gate, assign: {count: 99}}
    """)
    assert result.path == ["a"]
    assert result.state["count"] == 1


def test_003_last_write_wins(run_yaml: Callable[..., RunResult]) -> None:
    result = run_yaml("""
        id: f3
        config: {start: a}
        nodes:
          a: {type: gate, assign: {v: first}, next: b}
          b: {type: gate, assign: {v: second}}
    """)
    assert result.state["v"] == "second"


def test_004_append(run_yaml: Callable[..., RunResult]) -> None:
    result = run_yaml("""
        id: f4
        state: {items: {type: list, default: [seed], reducer: append}}
        config: {start: a}
        nodes:
          a: {type: gate, assign: {items: [x, y]}, next: b}
          b: {type: gate, assign: {items: [z]}}
    """)
    assert result.state["items"] == ["seed", "x", "y", "z"]


def test_005_merge(run_yaml: Callable[..., RunResult]) -> None:
    result = run_yaml("""
        id: f5
        state: {doc: {type: object, default: {source: seed}, reducer: merge}}
        config: {start: a}
        nodes:
          a: {type: gate, assign: {doc: {author: alice, stage: draft}}, next: b}
          b: {type: gate, assign: {doc: {stage: final, reviewer: bob}}}
    """)
    assert result.state["doc"] == {"source": "seed", "author": "alice", "stage": "final", "reviewer": "bob"}


def test_006_subgraph_composition(tmp_path: Path) -> None:
    write_yaml(
        tmp_path / "child.yaml",
        """
        id: oa/child
        state:
          message: {type: string}
          trace: {type: list, default: [], reducer: append}
        config: {start: x}
        nodes:
          x: {type: gate, assign: {message: from-x, trace: [x]}, next: y}
          y: {type: gate, assign: {message: from-y, trace: [y]}}
    """,
    )
    parent = write_yaml(
        tmp_path / "parent.yaml",
        """
        id: oa/parent
        state:
          message: {type: string}
          trace: {type: list, default: [outer-start], reducer: append}
        config: {start: outer_a}
        nodes:
          outer_a: {type: gate, assign: {trace: [outer_a]}, next: outer_sub}
          outer_sub: {type: subgraph, graph: oa/child, next: outer_b}
          outer_b: {type: gate, assign: {trace: [outer_b]}}
    """,
    )
    result = load_graph(parent).invoke_sync()
    assert result.status == "completed"
    assert result.state["message"] == "from-y"
    assert result.state["trace"] == ["outer-start", "outer_a", "x", "y", "outer_b"]
    assert result.path == ["outer_a", "outer_sub", "outer_b"]


def test_008_routing_error_keeps_state(run_yaml: Callable[..., RunResult]) -> None:
    result = run_yaml("""
        id: f8
        state: {v: {type: string}, n: {type: integer, default: -1}}
        config: {start: a}
        nodes:
          a: {type: gate, assign: {v: a}, next: {fn: "engine_targets:route_by_n"}}
          big: {type: return}
          small: {type: return}
    """)
    assert result.status == "failed"
    assert result.error is not None and result.error["type"] == "routing_error"
    assert "ghost" in result.error["message"]
    assert result.state["v"] == "a"
    assert result.path == ["a"]
    with pytest.raises(RoutingError) as caught:
        result.raise_for_error()
    assert caught.value.state is not None and caught.value.state["v"] == "a"


def test_009_node_exception_keeps_state_and_stops(run_yaml: Callable[..., RunResult]) -> None:
    result = run_yaml("""
        id: f9
        state: {log: {type: list, default: [], reducer: append}}
        config: {start: a}
        nodes:
          a: {type: gate, assign: {log: [a]}, next: b}
          b:
            action: {tool: python, params: {fn: "engine_targets:boom", args: {message: boom}}}
            next: c
          c: {type: gate, assign: {log: [c]}}
    """)
    assert result.status == "failed"
    assert result.error is not None
    assert result.error["type"] == "node_exception" and result.error["node"] == "b"
    assert "boom" in result.error["message"]
    assert result.state["log"] == ["a"]
    assert result.path == ["a", "b"]
    with pytest.raises(NodeError) as caught:
        result.raise_for_error()
    assert caught.value.state is not None and caught.value.state["log"] == ["a"]


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
    assert result.error is not None and result.error["type"] == "reducer_error"
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
    assert (result.error["field"], result.error["reducer"]) == ("log", "append")
    with pytest.raises(ReducerError) as caught:
        replace(result, exception=None).raise_for_error()
    assert (caught.value.field, caught.value.reducer, caught.value.node) == ("log", "append", "a")
    assert caught.value.state == {"log": []}
