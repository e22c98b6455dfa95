"""A pause in a child run pauses the runs above it on the cluster (issue 29, item 7), as
in-process (tests/unit/test_pause_below.py): where it paused is in the parent's status;
resuming the child (or the run above it) sets them running again, and they go on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from pausing_graphs import folder
from support import wait_for

from graphrunner import Graph, GraphValidationError, load_graph
from graphrunner.cli import main
from graphrunner.client import Client
from graphrunner.embedded import EmbeddedRedis
from graphrunner.engine import RunSnapshot
from graphrunner.settings import Settings
from graphrunner.ui.views import run_view

WAIT_S = 60


def graph(tmp_path: Path, name: str) -> Graph:
    return load_graph(folder(tmp_path) / f"{name}.yaml", settings=Settings(graph_path=(tmp_path,)))


def paused(cluster: Client, run_id: str) -> RunSnapshot:
    """The run once it is paused (its own pause, or one below it)."""
    wait_for(lambda: cluster.run(run_id).status() == "paused", WAIT_S, f"run {run_id} to pause")
    return cluster.run(run_id).snapshot()


def test_a_paused_branch_pauses_its_parent_until_the_branch_is_resumed(
    cluster: Client, redis_server: EmbeddedRedis, tmp_path: Path
) -> None:
    parallel = graph(tmp_path, "branches")
    run = cluster.submit(parallel)
    branch = f"{run.id}.1.asker"
    parent = paused(cluster, run.id)
    assert parent.paused_at is not None and parent.pause_message == "approve ask?"
    where = parent.paused_at
    assert (where.run_id, where.branch, where.index, where.paused_run, where.node) == (
        branch, "asker", None, branch, "ask",
    )  # fmt: skip
    assert parent.wait is not None and parent.wait.kind == "kids"  # its step still waits on its kids
    assert run.wait(timeout=WAIT_S).to_dict()["paused_at"]["branch"] == "asker"
    env = {
        "GRAPHRUNNER_REDIS_URL": redis_server.url,
        "GRAPHRUNNER_BROKER_URL": None,
        "GRAPHRUNNER_QUIET": None,
    }
    shown = CliRunner().invoke(main, ["status", run.id], env=env)
    assert f"paused below: child run {branch} (branch 'asker'), parked at node 'ask'" in shown.output
    as_json = json.loads(CliRunner().invoke(main, ["status", run.id, "--json"], env=env).output)
    assert as_json["paused_at"]["run_id"] == branch and as_json["message"] == "approve ask?"
    assert run_view(parent, {}, True)["paused_at"]["branch"] == "asker"  # /api/runs/<id>
    last = list(cluster.stream(run.id, timeout=WAIT_S))[-1].to_dict()  # the stream ends there too
    assert (last["event"], last["status"], last["paused_at"]["run_id"]) == ("result", "paused", branch)
    cluster.resume(branch, state_patch={"approved": True})
    assert cluster.run(run.id).status() in ("running", "completed")  # no longer paused
    result = run.wait(timeout=WAIT_S)
    assert (result.status, result.output) == ("completed", {"verdict": "approved", "other": "quick"})
    local = parallel.invoke_sync()  # in-process it pauses the same way, with the same message
    assert (local.status, local.message) == ("paused", parent.pause_message)


@pytest.mark.parametrize("parallel", [False, True])
def test_a_paused_foreach_child_pauses_its_parent_naming_the_item(
    cluster: Client, tmp_path: Path, parallel: bool
) -> None:
    items = folder(tmp_path) / "items.yaml"
    items.write_text(
        items.read_text().replace("collect: done}", f"collect: done, parallel: {str(parallel).lower()}}}")
    )
    run = cluster.submit(load_graph(items, settings=Settings(graph_path=(tmp_path,))))
    parent = paused(cluster, run.id)
    assert parent.paused_at is not None and parent.paused_at.index == 1
    child = parent.paused_at.run_id
    assert child.endswith(".1") and parent.error is None  # not a failed item
    cluster.resume(child, state_patch={"approved": True})
    result = run.wait(timeout=WAIT_S)
    assert (result.status, result.state["done"]) == ("completed", ["a", "ask", "c"])


def test_resuming_the_top_run_resumes_the_run_paused_two_levels_below(
    cluster: Client, tmp_path: Path
) -> None:
    run = cluster.submit(graph(tmp_path, "deep"))
    top = paused(cluster, run.id)
    assert top.paused_at is not None
    middle, bottom = top.paused_at.run_id, top.paused_at.paused_run
    assert (middle, bottom, top.paused_at.node) == (f"{run.id}.1", f"{run.id}.1.1", "ask")
    assert cluster.run(middle).status() == "paused" and cluster.run(bottom).status() == "paused"
    cluster.resume(run.id, state_patch={"approved": False})  # the patch is the paused run's
    result = run.wait(timeout=WAIT_S)
    assert (result.status, result.output) == ("completed", "rejected")
    assert cluster.run(bottom).status() == "completed" and cluster.run(middle).status() == "completed"


def test_a_pause_under_collect_is_refused_before_anything_runs(cluster: Client, tmp_path: Path) -> None:
    path = folder(tmp_path) / "branches.yaml"
    path.write_text(path.read_text().replace("    next: done", "    error_policy: collect\n    next: done"))
    with pytest.raises(GraphValidationError, match="suspension_in_unsupported_context"):
        cluster.submit(path)


def test_cancelling_the_paused_child_fails_the_node_above_it(cluster: Client, tmp_path: Path) -> None:
    run = cluster.submit(graph(tmp_path, "sub"))
    parent = paused(cluster, run.id)
    assert parent.paused_at is not None
    cluster.cancel(parent.paused_at.run_id)
    result = run.wait(timeout=WAIT_S)  # it runs again, takes in the cancelled child and fails
    assert (result.status, result.error.node) == ("failed", "inner")
    assert "ended cancelled" in result.error.message
