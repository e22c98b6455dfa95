"""`type: parallel` and foreach over a graph, in-process (issue 17, first step): branches merge in
declaration order whatever order they finish in, fail_fast against collect, items as child runs
collected in item order, and the compile-time checks."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from parallel_graphs import EMPTY_GUARDED, FOREACH, PARENT, folder

from graphrunner import GraphValidationError, load_graph
from graphrunner.errors import BranchFailed
from graphrunner.loading import inspect_graph
from graphrunner.results import RunResult
from graphrunner.settings import Settings


def run(tmp_path: Path, text: str, state: dict[str, object] | None = None) -> RunResult:
    path = folder(tmp_path) / "parent.yaml"
    path.write_text(textwrap.dedent(text))
    graph = load_graph(path, settings=Settings(graph_path=(tmp_path,)))
    return graph.invoke_sync(state=state)


def test_branches_merge_in_declaration_order_whatever_order_they_finish_in(tmp_path: Path) -> None:
    result = run(tmp_path, PARENT)
    assert (result.status, result.path) == ("completed", ["research", "done"])
    assert result.state["log"] == ["slow", "fast"]  # append: the first-listed branch's items first
    assert result.state["winner"] == "fast"  # last_write_wins: the last-listed branch wins
    assert (result.state["slow_hits"], result.state["fast_hits"]) == (["slow:cats"], ["fast:cats"])


def test_fail_fast_cancels_the_other_branches_and_fails_the_node_naming_the_branch(tmp_path: Path) -> None:
    text = PARENT.replace("graph: slow,", "graph: forever,").replace("graph: fast,", "graph: broken,")
    text = text.replace("outputs: {slow_hits: hits, log: log, winner: winner}", "outputs: {}")
    text = text.replace("outputs: {fast_hits: hits, log: log, winner: winner}", "outputs: {}")
    result = run(tmp_path, text)  # without cancellation it would sleep for 90 s
    assert result.status == "failed"
    assert result.error.type == "branch_failed" and result.error.node == "research"
    assert (result.error.branch, result.error.index) == ("fast", None)  # the branch names itself
    with pytest.raises(BranchFailed) as raised:  # a NodeError of its own category
        result.raise_for_error()
    assert (raised.value.branch, raised.value.category) == ("fast", "branch_failed")
    assert "branch 'fast' (graph 'broken') ended failed: the source is down" in result.error.message


def test_collect_runs_every_branch_merges_the_good_ones_and_lists_the_failures(tmp_path: Path) -> None:
    text = PARENT.replace("graph: slow,", "graph: broken,").replace(
        "slow_hits: hits, log: log, winner: winner", ""
    )
    text = text.replace(
        "    next: done", "    error_policy: collect\n    errors_field: problems\n    next: done"
    )
    result = run(tmp_path, text)
    assert result.status == "completed"
    assert result.state["log"] == ["fast"] and result.state["fast_hits"] == ["fast:cats"]
    assert result.state["problems"] == [
        {"branch": "slow", "type": "node_exception", "message": "the source is down"}
    ]


@pytest.mark.parametrize("parallel", ["true", "false"])
def test_foreach_over_a_graph_collects_each_childs_output_in_item_order(
    tmp_path: Path, parallel: str
) -> None:
    result = run(tmp_path, FOREACH.replace("PARALLEL", parallel), {"docs": ["a", "b", "c"]})
    assert (result.status, result.state["summaries"]) == ("completed", ["0:a", "1:b", "2:c"])


def test_foreach_over_a_graph_tolerates_failed_items_and_an_empty_list_is_a_no_op(tmp_path: Path) -> None:
    text = FOREACH.replace("PARALLEL", "true")
    tolerated = run(tmp_path, text, {"docs": ["a", "bad", "c"]})
    assert (tolerated.status, tolerated.state["summaries"]) == ("completed", ["0:a", "2:c"])
    failed = run(tmp_path, text, {"docs": ["bad", "bad"]})
    assert failed.status == "failed" and "item 0 (graph 'summarise') ended failed" in failed.error.message
    empty = run(tmp_path, text, {"docs": []})
    assert (empty.status, empty.state["summaries"]) == ("completed", [])


def test_a_parallel_node_inside_a_foreach_child(tmp_path: Path) -> None:
    text = FOREACH.replace("PARALLEL", "true").replace("graph: summarise", "graph: fanin")
    text = text.replace('inputs: {doc: "${doc}", position: "${index}"}', 'inputs: {doc: "${doc}"}')
    result = run(tmp_path, text, {"docs": ["x", "y"]})
    assert result.status == "completed"
    assert result.state["summaries"] == [["fast", "slow"], ["fast", "slow"]]


def report(tmp_path: Path, text: str) -> list[tuple[str, str | None]]:
    path = folder(tmp_path) / "parent.yaml"
    path.write_text(textwrap.dedent(text))
    _, found = inspect_graph(path, settings=Settings(graph_path=(tmp_path,)))
    return [(i.code, i.location) for i in found.errors]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (("graph: slow,", "graph: nowhere,"), ("unknown_graph", "nodes.research.branches.slow.graph")),
        (("{slow_hits: hits,", "{slow_hitz: hits,"), ("mapping_references_undeclared_field", None)),
        (
            ("inputs: {query: query}, outputs: {fast", "inputs: {qery: query}, outputs: {fast"),
            ("mapping_references_undeclared_field", None),
        ),
        (("    next: done", "    errors_field: problems\n    next: done"), ("invalid_schema", None)),
        (("    branches:", "    branches: {}\n    old_branches:"), ("invalid_schema", None)),
    ],
    ids=[
        "unknown graph",
        "undeclared parent output",
        "undeclared child input",
        "errors_field with fail_fast",
        "no branch",
    ],
)
def test_bad_parallel_nodes_are_located_errors(
    tmp_path: Path, change: tuple[str, str], expected: tuple[str, str | None]
) -> None:
    found = report(tmp_path, PARENT.replace(*change, 1))
    assert expected[0] in [code for code, _ in found], found
    if expected[1] is not None:
        assert expected in found


def test_a_foreach_takes_an_action_or_a_graph_not_both(tmp_path: Path) -> None:
    text = FOREACH.replace("PARALLEL", "true").replace(
        "    graph: summarise\n", "    graph: summarise\n    action: {tool: echo}\n"
    )
    found = report(tmp_path, text)
    assert [code for code, _ in found] == ["invalid_schema"]
    with pytest.raises(GraphValidationError, match="not both"):
        load_graph(folder(tmp_path) / "parent.yaml", settings=Settings(graph_path=(tmp_path,)))


def test_over_that_is_not_a_list_fails_the_node_at_run_time(tmp_path: Path) -> None:
    text = FOREACH.replace("PARALLEL", "true").replace("docs: {type: list}", "docs: {}")
    result = run(tmp_path, text, {"docs": "abc"})
    assert result.status == "failed" and "over must resolve to a list" in result.error.message


def test_a_failed_foreach_child_fails_the_node_naming_its_item(tmp_path: Path) -> None:
    text = FOREACH.replace("PARALLEL", "false").replace("tolerated_failures: 1", "")
    result = run(tmp_path, text, {"docs": ["a", "bad", "c"]})
    assert (result.status, result.error.type, result.error.index) == ("failed", "node_exception", 1)
    assert "item 1 (graph 'summarise') ended failed: cannot read bad" in result.error.message


def test_an_empty_fan_out_succeeds_at_once_and_a_gate_can_refuse_it(tmp_path: Path) -> None:
    unguarded = EMPTY_GUARDED.replace("size(state.docs) == 0", "size(state.docs) < 0")
    ran = run(tmp_path, unguarded, {"docs": []})
    assert (ran.status, ran.path, ran.state["summaries"]) == ("completed", ["any_left", "each", "done"], [])
    assert ran.output == {"results": [], "failed": [], "count": 0}
    guarded = run(tmp_path, EMPTY_GUARDED, {"docs": []})
    assert (guarded.status, guarded.output) == ("completed", "nothing to do")
