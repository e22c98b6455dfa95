"""Single step: one node against a given state, in-process, no run (DESIGN §3)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from yaml_files import write_yaml

from graphrunner import Graph, LimitExceeded, StateValidationError, load_graph
from graphrunner.errors import UnknownNode
from graphrunner.runner.single import StepReport, single_step_sync
from graphrunner.settings import Settings

GRAPH = """
    id: single
    inputs: {limit: {type: integer, default: 10}}
    state:
      n: {type: integer, default: 0}
      log: {type: list, default: [], reducer: append}
      label: {type: string}
    config: {start: entry}
    nodes:
      entry:  # makes every node reachable
        type: gate
        next:
          - {to: probe, when: "state.go == 'probe'"}
          - {to: explode, when: "state.go == 'explode'"}
          - {to: guarded, when: "state.go == 'guarded'"}
          - {to: bump}
      bump:
        action: {tool: echo, params: {value: "${state.n + 1}"}}
        assign: {n: "${result.value}", log: ["bumped to ${result.value}"]}
        next: check
      check:
        type: gate
        assign: {label: "${state.n > inputs.limit ? 'big' : 'small'}"}
        next:
          - {to: big, when: state.label == 'big'}
          - {to: small}
      probe:
        action: {tool: echo, params: {ok: "${state.n > 0}"}}
        next:
          - {to: small, when: result.ok}
          - {to: $end}
      explode:
        action: {tool: fail, params: {message: "the reactor is on fire"}}
        next: small
      guarded:
        action: {tool: fail, params: {message: "handled"}}
        on_error: small
        next: big
      big: {type: return, output: {label: "${state.label}"}}
      small:
        type: gate
        assign: {log: [small]}
"""


@pytest.fixture
def graph(graph_of: Callable[[str], Graph]) -> Graph:
    return graph_of(GRAPH)


def test_an_action_node_assigns_its_result(graph: Graph) -> None:
    report = single_step_sync(graph, "bump", {"n": 4})
    assert report == StepReport(
        state={"n": 5, "log": ["bumped to 5"], "label": None},
        executed_node="bump",
        next_node="check",
        step_count=1,
        status="running",
        error=None,
        steps=report.steps,
    )
    assert [r["status"] for r in report.steps] == ["ok"]
    assert report.ok


def test_the_given_state_is_merged_over_the_defaults(graph: Graph) -> None:
    assert single_step_sync(graph, "bump").state == {"n": 1, "log": ["bumped to 1"], "label": None}
    kept = single_step_sync(graph, "bump", {"log": ["before"], "extra": {"x": 1}}).state
    assert kept == {"n": 1, "log": ["before", "bumped to 1"], "label": None, "extra": {"x": 1}}


@pytest.mark.parametrize(
    ("n", "inputs", "target"), [(50, None, "big"), (5, None, "small"), (5, {"limit": 2}, "big")]
)
def test_a_gate_routes_on_the_state_after_its_assign(
    graph: Graph, n: int, inputs: dict[str, int] | None, target: str
) -> None:
    report = single_step_sync(graph, "check", {"n": n}, inputs=inputs)
    assert report.next_node == target
    assert report.state["label"] == target


@pytest.mark.parametrize(("n", "target"), [(1, "small"), (0, None)])
def test_a_conditional_edge_on_the_result(graph: Graph, n: int, target: str | None) -> None:
    report = single_step_sync(graph, "probe", {"n": n})
    assert report.next_node == target
    assert report.status == ("running" if target else "completed")


@pytest.mark.parametrize("node", ["big", "small"])
def test_an_end_node_has_no_next_node(graph: Graph, node: str) -> None:
    report = single_step_sync(graph, node, {"label": "big"})
    assert report.next_node is None
    assert report.status == "completed"
    assert report.step_count == 1


def test_a_failing_node_is_reported_not_raised(graph: Graph) -> None:
    report = single_step_sync(graph, "explode", {"n": 3})
    assert report.status == "failed" and not report.ok
    assert report.next_node is None
    assert report.executed_node == "explode" and report.step_count == 1
    assert report.error is not None
    assert report.error.type == "node_exception"
    assert report.error.node == "explode"
    assert report.error.message == "the reactor is on fire"
    assert report.state["_last_error"]["message"] == "the reactor is on fire"
    assert report.state["n"] == 3


def test_a_handled_error_routes_to_recovery(graph: Graph) -> None:
    report = single_step_sync(graph, "guarded")
    assert report.ok and report.status == "running"
    assert report.next_node == "small"  # on_error, not next
    assert report.error is not None and report.error.message == "handled"


def test_error_mode_continue_follows_next(graph_of: Callable[[str], Graph]) -> None:
    graph = graph_of("""
        id: tolerant
        config: {start: a, error_mode: continue}
        nodes:
          a: {action: {tool: fail, params: {message: nope}}, next: b}
          b: {type: gate}
    """)
    report = single_step_sync(graph, "a")
    assert (report.status, report.next_node) == ("running", "b")
    assert report.error is not None and report.error.message == "nope"


def test_capabilities_are_checked(graph: Graph) -> None:
    report = single_step_sync(graph, "bump", capabilities=["tool:fail"])
    assert report.status == "failed"
    assert report.error is not None and report.error.type == "permission_denied"


def test_without_capabilities_the_local_default_applies(graph: Graph) -> None:
    restricted = Settings(local_capabilities=("tool:fail",))
    report = single_step_sync(graph, "bump", settings=restricted)
    assert report.error is not None and report.error.type == "permission_denied"
    assert single_step_sync(graph, "bump", capabilities=["tool:echo"], settings=restricted).ok


def test_a_state_over_the_size_limit_is_refused(graph: Graph) -> None:
    with pytest.raises(LimitExceeded, match="initial state of graph 'single'"):
        single_step_sync(graph, "bump", {"log": ["x" * 200]}, settings=Settings(max_state_bytes=100))


def test_an_unknown_node_lists_the_known_ones(graph: Graph) -> None:
    with pytest.raises(UnknownNode) as caught:
        single_step_sync(graph, "nope")
    assert str(caught.value) == (
        "graph 'single' has no node 'nope'; its nodes: big, bump, check, entry, explode, guarded, probe, small"
    )


def test_state_failing_the_schema_names_the_field(graph: Graph) -> None:
    with pytest.raises(StateValidationError) as caught:
        single_step_sync(graph, "bump", {"n": "four", "label": "ok"})
    assert caught.value.fields == ["n"]
    assert "node 'bump' of graph 'single'" in str(caught.value)
    assert "'n' must be integer, got str 'four'" in str(caught.value)


def test_state_that_is_not_a_mapping_is_refused(graph: Graph) -> None:
    with pytest.raises(StateValidationError, match="state must be a mapping of field to value, got list"):
        single_step_sync(graph, "bump", [1, 2])  # type: ignore[arg-type]


def test_inputs_are_checked(graph: Graph) -> None:
    with pytest.raises(StateValidationError, match="'limit' must be integer"):
        single_step_sync(graph, "check", inputs={"limit": "ten"})


def test_a_foreach_node_runs_its_items(graph_of: Callable[[str], Graph]) -> None:
    graph = graph_of("""
        id: fan
        state: {out: {type: list, default: [], reducer: append}}
        config: {start: each}
        nodes:
          each:
            type: foreach
            over: "${state.xs}"
            parallel: true
            action: {tool: echo, params: {x: "${item}", i: "${index}"}}
            collect: out
            next: done
          done: {type: return}
    """)
    report = single_step_sync(graph, "each", {"xs": ["a", "b"]})
    assert report.state["out"] == [{"x": "a", "i": 0}, {"x": "b", "i": 1}]
    assert (report.next_node, report.step_count) == ("done", 1)


def test_a_subgraph_node_runs_its_child(tmp_path: Path) -> None:
    write_yaml(
        tmp_path / "child.yaml",
        """
        id: t/child
        state: {n: {type: integer, default: 0}, doubled: {type: integer}}
        config: {start: double}
        nodes:
          double: {type: gate, assign: {doubled: "${state.n * 2}"}}
        """,
    )
    parent = write_yaml(
        tmp_path / "parent.yaml",
        """
        id: t/parent
        state: {value: {type: integer, default: 1}, doubled: {type: integer}}
        config: {start: sub}
        nodes:
          sub: {type: subgraph, graph: t/child, inputs: {n: value}, next: done}
          done: {type: return}
        """,
    )
    report = single_step_sync(load_graph(parent), "sub", {"value": 21})
    assert report.state == {"value": 21, "doubled": 42}
    assert (report.next_node, report.step_count) == ("done", 1)


PAUSE = """
    id: approve
    state: {approved: {type: boolean, default: false}}
    config: {start: ask}
    nodes:
      ask:
        type: pause
        assign: {asked: true}
        next: [{to: ship, when: state.approved}, {to: reject}]
      ship: {type: return, output: shipped}
      reject: {type: return, output: rejected}
"""


@pytest.mark.parametrize(("approved", "target"), [(True, "ship"), (False, "reject")])
def test_a_pause_node_parks_and_names_where_a_resume_goes(
    graph_of: Callable[[str], Graph], approved: bool, target: str
) -> None:
    report = single_step_sync(graph_of(PAUSE), "ask", {"approved": approved})
    assert report.status == "paused" and report.ok
    assert report.next_node == target
    assert report.state == {"approved": approved, "asked": True}


def test_to_dict_is_the_cli_json_object(graph: Graph) -> None:
    report = single_step_sync(graph, "bump")
    assert report.to_dict() == {
        "state": {"n": 1, "log": ["bumped to 1"], "label": None},
        "executed_node": "bump",
        "next_node": "check",
        "step_count": 1,
        "status": "running",
        "error": None,
    }
