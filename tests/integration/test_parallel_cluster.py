"""Parallel nodes and foreach over a graph on the cluster (issue 17): the same results as
in-process, kids as child runs that wake their parent, fail_fast and cancel stopping them."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
from parallel_graphs import FOREACH, PARENT, folder
from support import wait_for

from graphrunner import Graph, load_graph
from graphrunner.client import Client
from graphrunner.results import RunResult
from graphrunner.settings import Settings

WAIT_S = 60


def graph_of(tmp_path: Path, text: str) -> Graph:
    path = folder(tmp_path) / "parent.yaml"
    path.write_text(textwrap.dedent(text))
    return load_graph(path, settings=Settings(graph_path=(tmp_path,)))


def both(cluster: Client, graph: Graph, state: dict[str, Any] | None = None) -> RunResult:
    """Run on the cluster and in-process: the same status, path, state and error message."""
    remote = cluster.submit(graph, state=state).wait(timeout=WAIT_S)
    local = graph.invoke_sync(state=state)
    assert (remote.status, remote.path, remote.state) == (local.status, local.path, local.state)
    assert (remote.error or {}).get("message") == (local.error or {}).get("message")
    return remote


def test_branches_merge_in_declaration_order_on_the_cluster(cluster: Client, tmp_path: Path) -> None:
    result = both(cluster, graph_of(tmp_path, PARENT))
    assert result.status == "completed"
    assert (result.state["log"], result.state["winner"]) == (["slow", "fast"], "fast")


def test_fail_fast_cancels_the_running_branch(cluster: Client, tmp_path: Path) -> None:
    text = PARENT.replace("graph: slow,", "graph: forever,").replace("graph: fast,", "graph: broken,")
    text = text.replace("outputs: {slow_hits: hits, log: log, winner: winner}", "outputs: {}")
    text = text.replace("outputs: {fast_hits: hits, log: log, winner: winner}", "outputs: {}")
    handle = cluster.submit(graph_of(tmp_path, text))
    result = handle.wait(timeout=WAIT_S)
    assert (result.status, result.error["node"]) == ("failed", "research")
    assert "branch 'fast' (graph 'broken') ended failed: the source is down" in result.error["message"]
    sleeper = f"{handle.id}.1.slow"  # the branch that sleeps for 90 s: cancelled, not waited for
    wait_for(
        lambda: cluster.store.load_run(sleeper).status.value == "cancelled", WAIT_S, "the sleeper's cancel"
    )


def test_collect_lists_the_failed_branch(cluster: Client, tmp_path: Path) -> None:
    text = PARENT.replace("graph: slow,", "graph: broken,").replace(
        "slow_hits: hits, log: log, winner: winner", ""
    )
    text = text.replace(
        "    next: done", "    error_policy: collect\n    errors_field: problems\n    next: done"
    )
    result = both(cluster, graph_of(tmp_path, text))
    assert result.state["problems"] == [
        {"branch": "slow", "type": "node_exception", "message": "the source is down"}
    ]


@pytest.mark.parametrize(("parallel", "docs"), [("true", 7), ("false", 3)])
def test_foreach_over_a_graph_collects_in_item_order(
    cluster: Client, tmp_path: Path, parallel: str, docs: int
) -> None:
    text = FOREACH.replace("PARALLEL", parallel)
    if parallel == "true":
        text = text.replace("    parallel: true\n", "    parallel: true\n    max_concurrency: 2\n")
    state = {"docs": [chr(ord("a") + i) for i in range(docs)]}
    result = both(cluster, graph_of(tmp_path, text), state)
    assert result.state["summaries"] == [f"{i}:{d}" for i, d in enumerate(state["docs"])]


def test_foreach_over_a_graph_tolerates_failures_and_takes_an_empty_list(
    cluster: Client, tmp_path: Path
) -> None:
    graph = graph_of(tmp_path, FOREACH.replace("PARALLEL", "true"))
    assert both(cluster, graph, {"docs": ["a", "bad", "c"]}).state["summaries"] == ["0:a", "2:c"]
    failed = both(cluster, graph, {"docs": ["bad", "x", "bad"]})
    assert failed.status == "failed" and "(graph 'summarise') ended failed" in failed.error["message"]
    assert both(cluster, graph, {"docs": []}).state["summaries"] == []


def test_a_parallel_node_inside_foreach_children(cluster: Client, tmp_path: Path) -> None:
    text = FOREACH.replace("PARALLEL", "true").replace("graph: summarise", "graph: fanin")
    text = text.replace('inputs: {doc: "${doc}", position: "${index}"}', 'inputs: {doc: "${doc}"}')
    result = both(cluster, graph_of(tmp_path, text), {"docs": ["x", "y"]})
    assert result.state["summaries"] == [["fast", "slow"], ["fast", "slow"]]


def test_cancelling_the_parent_cancels_its_kids(cluster: Client, tmp_path: Path) -> None:
    text = PARENT.replace("graph: slow,", "graph: forever,").replace("graph: fast,", "graph: forever,")
    text = text.replace("outputs: {slow_hits: hits, log: log, winner: winner}", "outputs: {}")
    text = text.replace("outputs: {fast_hits: hits, log: log, winner: winner}", "outputs: {}")
    handle = cluster.submit(graph_of(tmp_path, text))
    kids = [f"{handle.id}.1.slow", f"{handle.id}.1.fast"]
    wait_for(lambda: all(cluster.store.load_run(k) is not None for k in kids), WAIT_S, "both kids")
    cluster.cancel(handle.id)
    wait_for(
        lambda: all(cluster.store.load_run(k).status.value == "cancelled" for k in kids), WAIT_S, "cancels"
    )
    assert handle.wait(timeout=WAIT_S).status == "cancelled"
