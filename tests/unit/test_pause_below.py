"""A pause in a child run pauses the runs above it, in-process (issue 29, item 7): a subgraph's
child, a parallel branch, a foreach child, two levels deep; where it paused is in the result."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pausing_graphs import folder

from graphrunner import GraphValidationError, load_graph
from graphrunner.cli.result import human_summary
from graphrunner.results import RunResult
from graphrunner.settings import Settings


def run(tmp_path: Path, name: str) -> RunResult:
    graph = load_graph(folder(tmp_path) / f"{name}.yaml", settings=Settings(graph_path=(tmp_path,)))
    return graph.invoke_sync(run_id="top")


def test_a_paused_branch_pauses_the_parent_naming_the_branch(tmp_path: Path) -> None:
    result = run(tmp_path, "branches")
    assert (result.status, result.path, result.message) == ("paused", ["fan"], "approve ask?")
    where = result.to_dict()["paused_at"]
    assert where == {
        "run_id": "top.1.asker",
        "branch": "asker",
        "index": None,
        "paused_run": "top.1.asker",
        "node": "ask",
        "message": "approve ask?",
    }
    assert "paused below: child run top.1.asker (branch 'asker')" in human_summary(result)


@pytest.mark.parametrize("parallel", [False, True])
def test_a_paused_foreach_child_pauses_the_parent_naming_the_item(tmp_path: Path, parallel: bool) -> None:
    items = folder(tmp_path) / "items.yaml"
    flag = f"collect: done, parallel: {str(parallel).lower()}}}"
    items.write_text(items.read_text().replace("collect: done}", flag))
    graph = load_graph(items, settings=Settings(graph_path=(tmp_path,)))
    result = graph.invoke_sync(run_id="top")
    assert result.status == "paused", result.error  # not a failed item
    assert result.error is None and result.state["done"] == []
    assert result.snapshot is not None and result.snapshot.paused_at is not None
    where = result.snapshot.paused_at
    assert (where.run_id, where.index, where.branch, where.node) == ("top.1.1", 1, None, "ask")


def test_a_pause_two_levels_down_pauses_every_run_above_it(tmp_path: Path) -> None:
    result = run(tmp_path, "deep")
    assert (result.status, result.message) == ("paused", "approve ask?")
    assert result.snapshot is not None and result.snapshot.paused_at is not None
    where = result.snapshot.paused_at
    assert (where.run_id, where.paused_run, where.node) == ("top.1", "top.1.1", "ask")


@pytest.mark.parametrize(
    ("name", "old", "new", "where"),
    [
        ("branches", "    next: done", "    error_policy: collect\n    next: done", "fan.branches.asker"),
        ("items", "collect: done}", "collect: done, tolerated_failures: 1}", "each"),
    ],
)
def test_a_pause_where_failures_are_collected_is_refused_at_load(
    tmp_path: Path, name: str, old: str, new: str, where: str
) -> None:
    path = folder(tmp_path) / f"{name}.yaml"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))
    with pytest.raises(GraphValidationError) as caught:
        load_graph(path, settings=Settings(graph_path=(tmp_path,)))
    [issue] = [i for i in caught.value.issues if i.code == "suspension_in_unsupported_context"]
    assert issue.node == where.split(".")[0] and issue.location == f"nodes.{where}.graph"
    assert "node 'ask' of graph 'ask'" in issue.message and issue.line is not None


def test_a_pause_two_levels_below_a_collecting_node_is_refused_too(tmp_path: Path) -> None:
    path = folder(tmp_path) / "branches.yaml"
    text = path.read_text().replace(
        "graph: ask, inputs: {doc: doc}, outputs: {verdict: verdict}", "graph: sub"
    )
    path.write_text(text.replace("    next: done", "    error_policy: collect\n    next: done"))
    with pytest.raises(
        GraphValidationError, match=re.escape("branch 'asker' 'sub' may pause (node 'ask' of graph 'ask')")
    ):
        load_graph(path, settings=Settings(graph_path=(tmp_path,)))
