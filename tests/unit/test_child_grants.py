"""What a child run may do: its parent's capabilities and depth or less (a subgraph node's, a
Rye graph-tool call's `capabilities` and `depth`), never more."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from graphrunner.engine import RunSnapshot
from graphrunner.engine.failures import RunFailure
from graphrunner.engine.grants import ChildGrants, child_grants, covered
from graphrunner.loading import load_graph
from graphrunner.rye.translate import translate


@pytest.mark.parametrize(
    ("pattern", "held", "ok"),
    [
        ("tool:echo", ["tool:echo"], True),
        ("tool:echo", ["tool:*"], True),
        ("tool:ex*", ["tool:*"], True),
        ("rye.execute.tool.rye.bash.*", ["*"], True),
        ("rye.execute.tool.rye.bash.*", ["rye.execute.tool.rye.*"], True),
        ("tool:ec*o", ["tool:ec?o"], False),  # the text matches, the names it allows do not
        ("*", ["tool:*", "graph:*"], False),
        ("tool:*", ["tool:echo"], False),
        ("tool:[a-z]cho", ["tool:*"], True),
        ("rye.execute.tool.echo", ["tool:echo"], False),  # formats are not translated: refused
    ],
)
def test_a_pattern_is_covered_only_when_it_allows_nothing_more(
    pattern: str, held: list[str], ok: bool
) -> None:
    assert covered(pattern, held) is ok


SUB = """
id: t/parent
config: {start: call}
nodes:
  call: {type: subgraph, graph: t/kid, inputs: {}, outputs: {}, next: done%s}
  done: {type: return}
"""


@pytest.fixture
def grants(tmp_path: Path) -> Any:
    """The grants of the subgraph node `call`, written with `extra`, at a run with `snap` fields."""
    (tmp_path / "kid.yaml").write_text("id: t/kid\nconfig: {start: done}\nnodes:\n  done: {type: return}\n")

    def of(extra: str, **snap: Any) -> ChildGrants | RunFailure:
        (tmp_path / "parent.yaml").write_text(SUB % extra)
        graph = load_graph(tmp_path / "parent.yaml")
        fields = {"run_id": "r", "graph_id": "t/parent", "node": "call", **snap}
        return child_grants(graph, RunSnapshot.model_validate(fields))

    return of


def test_a_node_narrows_capabilities_and_depth(grants: Any) -> None:
    assert grants("", capabilities=["tool:*"]) == ChildGrants(("tool:*",), None)
    narrowed = grants(", capabilities: ['tool:echo'], depth: 1", capabilities=["tool:*"], depth=2)
    assert narrowed == ChildGrants(("tool:echo",), 4)  # the child is at 3, its children may be at 4
    inherited = grants(", depth: 3", depth=2, max_depth=4)  # a caller's bound still holds
    assert inherited == ChildGrants(("*",), 4)


def test_asking_more_is_denied_and_nesting_past_the_bound_is_a_limit(grants: Any) -> None:
    wider = grants(", capabilities: ['tool:*']", capabilities=["tool:echo"])
    assert isinstance(wider, RunFailure) and wider.type == "permission_denied"
    assert "asks its child run for capabilities ['tool:*']" in wider.message
    deep = grants("", depth=2, max_depth=2)
    assert isinstance(deep, RunFailure) and deep.type == "limit_exceeded"
    assert "child runs down to depth 2; this run is at depth 2" in deep.message


def test_a_rye_graph_tool_call_takes_capabilities_and_depth_out_of_the_childs_inputs() -> None:
    action = {"primary": "execute", "item_id": "tool:graphs/kid"}
    params = {"word": "hi", "capabilities": ["rye.execute.tool.echo"], "depth": 0}
    nodes = {"call": {"action": {**action, "params": params}, "next": "done"}, "done": {"type": "return"}}
    node = translate({"tool_type": "graph", "config": {"start": "call", "nodes": nodes}}, "p").data["nodes"][
        "call"
    ]
    assert node["type"] == "subgraph" and node["inputs"] == {"word": "hi"}
    assert (node["capabilities"], node["depth"]) == (["rye.execute.tool.echo"], 0)
