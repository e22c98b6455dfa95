"""Parallel nodes and foreach over a graph on the cluster (issue 17): the same results as
in-process, kids as child runs that wake their parent, fail_fast and cancel stopping them."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
from celery.signals import task_prerun
from parallel_graphs import EMPTY_GUARDED, FOREACH, PARENT, folder
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
    assert (remote.error and remote.error.message) == (local.error and local.error.message)
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
    assert (result.status, result.error.node) == ("failed", "research")
    assert "branch 'fast' (graph 'broken') ended failed: the source is down" in result.error.message
    assert (result.error.type, result.error.branch) == ("branch_failed", "fast")  # as in-process
    assert result.to_dict()["error"]["branch"] == "fast"
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
    assert failed.status == "failed" and "(graph 'summarise') ended failed" in failed.error.message
    assert both(cluster, graph, {"docs": []}).state["summaries"] == []


def test_a_parallel_node_inside_foreach_children(cluster: Client, tmp_path: Path) -> None:
    text = FOREACH.replace("PARALLEL", "true").replace("graph: summarise", "graph: fanin")
    text = text.replace('inputs: {doc: "${doc}", position: "${index}"}', 'inputs: {doc: "${doc}"}')
    result = both(cluster, graph_of(tmp_path, text), {"docs": ["x", "y"]})
    assert result.state["summaries"] == [["fast", "slow"], ["fast", "slow"]]


def test_a_kid_field_declared_as_input_and_state_gets_the_value_in_both(
    cluster: Client, tmp_path: Path
) -> None:
    (folder(tmp_path) / "echoes.yaml").write_text(
        textwrap.dedent(
            """
            id: echoes
            inputs: {query: {type: string}}
            state: {query: {type: string, default: unset}, log: {type: list, default: [], reducer: append}}
            config: {start: w}
            nodes:
              w: {type: gate, assign: {log: ["${inputs.query + '/' + state.query}"]}}
            """
        )
    )
    text = PARENT.replace("graph: slow,", "graph: echoes,").replace("graph: fast,", "graph: echoes,")
    text = text.replace("slow_hits: hits, log: log, winner: winner", "log: log")
    text = text.replace("fast_hits: hits, log: log, winner: winner", "log: log")
    assert both(cluster, graph_of(tmp_path, text)).state["log"] == ["cats/cats", "cats/cats"]


def test_kids_nested_past_max_depth_fail_the_node(cluster: Client, tmp_path: Path) -> None:
    text = """
    id: rec
    state: {log: {type: list, default: [], reducer: append}}
    config: {start: split, max_depth: 2}
    nodes:
      split: {type: parallel, branches: {again: {graph: rec, outputs: {log: log}}}, next: done}
      done: {type: return}
    """
    result = both(cluster, graph_of(tmp_path, text))
    assert (result.status, result.error.type) == ("failed", "limit_exceeded")
    assert result.error.message.count("branch 'again' (graph 'rec') ended failed") == 3
    assert result.error.message.endswith("subgraph nesting deeper than max_depth 2 (this run is at depth 2)")


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


PAUSING = """
id: waiting
inputs: {query: {type: string}}
state: {hits: {type: list, default: []}, log: {type: list, default: [], reducer: append}, winner: {}}
config: {start: ask}
nodes:
  ask: {type: pause, message: approve the search, next: write}
  write: {type: gate, assign: {hits: [approved], log: [waited]}}
"""


def test_a_paused_branch_parks_the_parent_until_it_is_resumed(cluster: Client, tmp_path: Path) -> None:
    (folder(tmp_path) / "waiting.yaml").write_text(PAUSING)
    handle = cluster.submit(graph_of(tmp_path, PARENT.replace("graph: slow,", "graph: waiting,")))
    kid = f"{handle.id}.1.slow"
    wait_for(lambda: getattr(cluster.store.load_run(kid), "status", None) is not None, WAIT_S, "the kid")
    wait_for(lambda: cluster.store.load_run(kid).status.value == "paused", WAIT_S, "the kid to pause")
    # paused with its kid (no worker held), its step still suspended on its kids
    wait_for(
        lambda: cluster.store.load_run(handle.id).status.value == "paused", WAIT_S, "the parent to pause"
    )
    parent = cluster.store.load_run(handle.id)
    assert parent.wait is not None and parent.paused_at is not None and parent.paused_at.branch == "slow"
    cluster.resume(kid)
    result = handle.wait(timeout=WAIT_S)
    assert (result.status, result.state["log"], result.state["slow_hits"]) == (
        "completed",
        ["waited", "fast"],
        ["approved"],
    )


def test_kids_never_widen_the_runs_capabilities(cluster: Client, tmp_path: Path) -> None:
    graph = graph_of(tmp_path, PARENT)
    allowed = ["graph:slow", "tool:*"]  # not graph:fast
    remote = cluster.submit(graph, capabilities=allowed).wait(timeout=WAIT_S)
    local = graph.invoke_sync(capabilities=allowed)
    for result in (remote, local):
        assert (result.status, result.error.type) == ("failed", "permission_denied")
        assert "graph:fast" in result.error.message


RESUMABLE = """
id: resumable
state: {log: {type: list, default: [], reducer: append}}
config: {start: both}
nodes:
  both:
    type: parallel
    branches:
      fast: {graph: counted, outputs: {log: log}}
      flaky: {graph: flaky, outputs: {log: log}}
"""
COUNTED = """
id: counted
state: {log: {type: list, default: [], reducer: append}}
config: {start: count}
nodes:
  count: {action: {tool: shell, params: {command: "echo ran >> DIR/fast", shell: true}}, next: write}
  write: {type: gate, assign: {log: [fast]}}
"""
FLAKY = """
id: flaky
state: {log: {type: list, default: [], reducer: append}}
config: {start: check}
nodes:
  check: {action: {tool: shell, params: {command: "sleep 0.5; test -f DIR/ok", shell: true}}, next: write}
  write: {type: gate, assign: {log: [flaky]}}
"""


def test_resume_runs_the_failed_branch_again_and_not_the_finished_one(
    cluster: Client, tmp_path: Path
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    for name, text in (("counted", COUNTED), ("flaky", FLAKY)):
        (tmp_path / f"{name}.yaml").write_text(text.replace("DIR", str(marks)))
    path = tmp_path / "resumable.yaml"
    path.write_text(RESUMABLE)
    graph = load_graph(path, settings=Settings(graph_path=(tmp_path,)))
    handle = cluster.submit(graph)
    failed = handle.wait(timeout=WAIT_S)
    assert failed.status == "failed" and "branch 'flaky'" in failed.error.message
    (marks / "ok").touch()
    done = cluster.resume(handle.id).wait(timeout=WAIT_S)
    assert (done.status, done.state["log"]) == ("completed", ["fast", "flaky"])
    assert (marks / "fast").read_text().splitlines() == ["ran"]  # the finished branch did not run again


def test_resume_of_a_foreach_keeps_the_items_that_completed_with_the_same_inputs(
    cluster: Client, tmp_path: Path
) -> None:
    graph = graph_of(tmp_path, FOREACH.replace("PARALLEL", "false").replace("tolerated_failures: 1", ""))
    handle = cluster.submit(graph, state={"docs": ["a", "bad", "c"]})
    failed = handle.wait(timeout=WAIT_S)
    assert failed.status == "failed" and "item 1 (graph 'summarise')" in failed.error.message
    done = cluster.resume(handle.id, {"docs": ["a", "b", "c"]}).wait(timeout=WAIT_S)
    assert (done.status, done.state["summaries"]) == ("completed", ["0:a", "1:b", "2:c"])
    first, again = cluster.store.load_run(handle.id).children[-2:]
    assert cluster.store.load_run(f"{first}.0") is not None and cluster.store.load_run(f"{again}.0") is None
    assert cluster.store.load_run(f"{again}.1") is not None  # the failed item ran again, with its new input


def test_task_names_read_like_the_graph_and_stay_bounded(cluster: Client, tmp_path: Path) -> None:
    """What Flower shows: `graph:node` for steps (the kids' too), `graph:node:child-finished` for
    a kid's wake-up of its parent; never a run id, so task types and labels stay bounded."""
    seen: list[str] = []

    def record(task: Any, **_: Any) -> None:
        seen.append(task.request.shadow or task.name)

    task_prerun.connect(record, weak=False)
    try:
        both(cluster, graph_of(tmp_path, PARENT))
        text = FOREACH.replace("PARALLEL", "true")
        both(cluster, graph_of(tmp_path, text), {"docs": ["a", "b", "c"]})
    finally:
        task_prerun.disconnect(record)
    assert set(seen) == {
        "research:research",
        "research:research:child-finished",
        "research:done",
        "slow:wait",
        "slow:write",
        "fast:write",
        "per-doc:each",
        "per-doc:each:child-finished",
        "summarise:check",
        "summarise:done",
    }, seen


def test_a_failed_foreach_child_names_its_item_as_in_process(cluster: Client, tmp_path: Path) -> None:
    graph = graph_of(tmp_path, FOREACH.replace("PARALLEL", "false").replace("tolerated_failures: 1", ""))
    result = both(cluster, graph, {"docs": ["a", "bad", "c"]})
    assert (result.status, result.error.type, result.error.index) == ("failed", "node_exception", 1)
    assert result.error.branch is None and result.error.node == "each"


def test_an_empty_fan_out_succeeds_at_once_as_in_process(cluster: Client, tmp_path: Path) -> None:
    graph = graph_of(tmp_path, EMPTY_GUARDED.replace("size(state.docs) == 0", "size(state.docs) < 0"))
    result = both(cluster, graph, {"docs": []})
    assert (result.status, result.output) == ("completed", {"results": [], "failed": [], "count": 0})
