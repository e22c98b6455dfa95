"""Foreach, subgraph, pause/resume and return in whole in-process runs."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import engine_targets
import pytest
from yaml_files import write_yaml

from graphrunner import Graph, RunResult, engine, load_graph
from graphrunner.errors import ResumeError
from graphrunner.runner import LocalRunner


@pytest.fixture(autouse=True)
def _fresh_counters() -> Iterator[None]:
    engine_targets.reset()
    yield


FOREACH = """
    id: fe
    inputs: {xs: {type: list, default: [1, 2, 3, 4]}}
    state: {out: {type: list, default: [seed], reducer: append}}
    config: {start: each}
    nodes:
      each:
        type: foreach
        over: "${inputs.xs}"
        as: x
        parallel: PARALLEL
        action: {tool: echo, params: {x: "${x}", i: "${index}", n: "${state.out}"}}
        collect: out
        assign: {count: "${result.count}"}
        next: done
      done: {type: return, output: {out: "${state.out}"}}
"""


@pytest.mark.parametrize("parallel", ["false", "true"])
def test_foreach_collects_in_item_order(run_yaml: Callable[..., RunResult], parallel: str) -> None:
    result = run_yaml(FOREACH.replace("PARALLEL", parallel))
    assert result.status == "completed"
    assert result.state["out"][0] == "seed"
    assert [r["x"] for r in result.state["out"][1:]] == [1, 2, 3, 4]
    assert [r["i"] for r in result.state["out"][1:]] == [0, 1, 2, 3]
    assert all(r["n"] == ["seed"] for r in result.state["out"][1:])  # items see the state before the node
    assert result.state["count"] == 4
    assert result.path == ["each", "done"]  # a foreach node appears once
    assert "x" not in result.state


def test_the_foreach_name_is_gone_after_the_node(graph_of: Callable[[str], Graph]) -> None:
    from graphrunner import GraphValidationError

    with pytest.raises(GraphValidationError) as caught:
        graph_of(FOREACH.replace("PARALLEL", "false").replace('{out: "${state.out}"}', '{x: "${x}"}'))
    assert caught.value.codes == ["bad_expression"]
    assert "unknown namespace 'x'" in str(caught.value)


def test_foreach_over_an_empty_list(run_yaml: Callable[..., RunResult]) -> None:
    result = run_yaml(FOREACH.replace("PARALLEL", "true"), {"xs": []})
    assert result.status == "completed"
    assert result.state["out"] == ["seed"]


FAILING_ITEMS = """
    id: fe-fail
    config: {start: each, error_mode: MODE}
    nodes:
      each:
        type: foreach
        over: [ok, bad, ok, bad, ok]
        TOLERATED
        action:
          tool: python
          params: {fn: "engine_targets:flaky", args: {key: "${item}-${index}", failures: "${item == 'bad' ? 9 : 0}", value: "${index}"}}
        retry: {max_attempts: 1}
        collect: got
        result_key: report
"""


def test_foreach_failing_items_fail_the_node(run_yaml: Callable[..., RunResult]) -> None:
    result = run_yaml(FAILING_ITEMS.replace("MODE", "fail").replace("TOLERATED", ""))
    assert result.status == "failed"
    assert result.error is not None and "item 1" in result.error.message
    assert engine_targets.calls["ok-2"] == 0  # a sequential foreach stops at the first failure


def test_foreach_tolerated_failures(run_yaml: Callable[..., RunResult]) -> None:
    for tolerated in ("tolerated_failures: 2", "tolerated_failures: '40%'"):
        result = run_yaml(FAILING_ITEMS.replace("MODE", "fail").replace("TOLERATED", tolerated))
        assert result.status == "completed", tolerated
        assert result.state["got"] == [0, 2, 4]
        assert [f["index"] for f in result.state["report"]["failed"]] == [1, 3]
    too_few = run_yaml(
        FAILING_ITEMS.replace("MODE", "fail").replace("TOLERATED", "tolerated_failures: '20%'")
    )
    assert too_few.status == "failed"


def test_foreach_error_mode_continue_suppresses_item_errors(run_yaml: Callable[..., RunResult]) -> None:
    result = run_yaml(FAILING_ITEMS.replace("MODE", "continue").replace("TOLERATED", ""))
    assert result.status == "completed_with_errors"
    assert result.state["got"] == [0, 2, 4]
    assert [e.error.index for e in result.errors] == [1, 3]


def test_foreach_over_not_a_list_fails_naming_the_node(run_yaml: Callable[..., RunResult]) -> None:
    result = run_yaml(
        """
        id: fe-bad
        config: {start: each}
        nodes:
          each: {type: foreach, over: "${inputs.xs}", action: {tool: echo}}
    """,
        {"xs": "not a list"},
    )
    assert result.status == "failed"
    assert result.error is not None
    assert "node 'each': over must resolve to a list, got str" in result.error.message


def test_subgraph_explicit_inputs_and_outputs(tmp_path: Path) -> None:
    write_yaml(
        tmp_path / "child.yaml",
        """
        id: t/child
        state: {n: {type: integer, default: 0}, doubled: {type: integer}, secret: {type: string, default: s}}
        config: {start: double}
        nodes:
          double: {type: gate, assign: {doubled: "${state.n * 2}"}, next: done}
          done: {type: return, output: {doubled: "${state.doubled}"}}
    """,
    )
    parent = write_yaml(
        tmp_path / "parent.yaml",
        """
        id: t/parent
        state: {value: {type: integer, default: 21}, answer: {type: integer}, secret: {type: string, default: p}}
        config: {start: sub}
        nodes:
          sub:
            type: subgraph
            graph: t/child
            inputs: {n: value}
            outputs: {answer: doubled}
            assign: {from_output: "${result.doubled}"}
    """,
    )
    result = load_graph(parent).invoke_sync()
    assert result.status == "completed"
    assert result.state["answer"] == 42 and result.state["from_output"] == 42
    assert result.state["secret"] == "p"  # outputs replace name matching


def test_a_child_field_declared_as_input_and_state_gets_the_value_in_both(tmp_path: Path) -> None:
    write_yaml(
        tmp_path / "child.yaml",
        """
        id: t/both
        inputs: {q: {type: string}}
        state: {q: {type: string, default: unset}, out: {type: string}}
        config: {start: w}
        nodes:
          w: {type: gate, assign: {out: "${inputs.q + '/' + state.q}"}}
    """,
    )
    parent = write_yaml(
        tmp_path / "parent.yaml",
        """
        id: t/parent
        state: {q: {type: string, default: cats}, got: {type: string}}
        config: {start: sub}
        nodes:
          sub: {type: subgraph, graph: t/both, inputs: {q: q}, outputs: {got: out}}
    """,
    )
    result = load_graph(parent).invoke_sync()
    assert (result.status, result.state["got"]) == ("completed", "cats/cats")


def test_subgraph_two_levels_and_max_depth(tmp_path: Path) -> None:
    write_yaml(
        tmp_path / "leaf.yaml",
        """
        id: t/leaf
        state: {trace: {type: list, default: [], reducer: append}}
        config: {start: a}
        nodes: {a: {type: gate, assign: {trace: [leaf]}}}
    """,
    )
    write_yaml(
        tmp_path / "mid.yaml",
        """
        id: t/mid
        state: {trace: {type: list, default: [], reducer: append}}
        config: {start: a}
        nodes:
          a: {type: gate, assign: {trace: [mid]}, next: b}
          b: {type: subgraph, graph: t/leaf}
    """,
    )
    top = write_yaml(
        tmp_path / "top.yaml",
        """
        id: t/top
        state: {trace: {type: list, default: [], reducer: append}}
        config: {start: a}
        nodes: {a: {type: subgraph, graph: t/mid}}
    """,
    )
    assert load_graph(top).invoke_sync().state["trace"] == ["mid", "leaf"]
    self_ref = write_yaml(
        tmp_path / "forever.yaml",
        """
        id: t/forever
        config: {start: a, max_depth: 3}
        nodes: {a: {type: subgraph, graph: t/forever}}
    """,
    )
    result = load_graph(self_ref).invoke_sync()
    assert result.status == "failed"
    assert result.error is not None and "max_depth 3" in result.error.message


def test_pause_then_resume_with_a_patch(graph_of: Callable[[str], Graph]) -> None:
    graph = graph_of("""
        id: approve
        state: {approved: {type: boolean, default: false}}
        config: {start: ask}
        nodes:
          ask:
            type: pause
            message: waiting for approval
            next: [{to: ship, when: state.approved}, {to: reject}]
          ship: {type: return, output: shipped}
          reject: {type: return, output: rejected}
    """)
    paused = graph.invoke_sync()
    assert paused.status == "paused" and paused.path == ["ask"]
    assert paused.snapshot is not None
    resumed = engine.resume(graph, paused.snapshot, datetime.now(UTC), {"approved": True})
    assert resumed.node == "ship"
    final = asyncio.run(LocalRunner().drive(graph, resumed))
    assert final.status == "completed" and final.output == "shipped"
    assert final.path == ["ask", "ship"]


def test_resume_refuses_a_completed_run(graph_of: Callable[[str], Graph]) -> None:
    graph = graph_of("""
        id: done-once
        config: {start: a}
        nodes: {a: {type: gate}}
    """)
    finished = graph.invoke_sync()
    assert finished.snapshot is not None
    with pytest.raises(ResumeError, match="completed"):
        engine.resume(graph, finished.snapshot, datetime.now(UTC))


def test_a_node_without_next_returns_the_whole_state(run_yaml: Callable[..., RunResult]) -> None:
    result = run_yaml("""
        id: open-end
        config: {start: a}
        nodes: {a: {type: gate, assign: {v: 1}}}
    """)
    assert result.output == {"v": 1}


def test_result_key_and_non_mapping_results(run_yaml: Callable[..., RunResult]) -> None:
    result = run_yaml("""
        id: wrap
        config: {start: a}
        nodes:
          a:
            action: {tool: python, params: {fn: "engine_targets:count", args: {key: k}}}
            result_key: raw
            assign: {wrapped: "${result.value}"}
    """)
    assert result.state == {"raw": 1, "wrapped": 1}
