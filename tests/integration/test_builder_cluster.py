"""A builder graph on a cluster: the same state, path and output as `invoke` in-process."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

import builder_cluster_targets as targets
import pytest
from worker_procs import dedicated_worker

from graphrunner import NodeError
from graphrunner.client import Client
from graphrunner.cluster.runs.graphs import GraphCache
from graphrunner.embedded import EmbeddedRedis
from graphrunner.errors import RunConflict
from graphrunner.results import RunResult

EXPECTED_STATE = {
    "topic": "cats",
    "attempts": 2,
    "text": "CATS V2!",
    "notes": ["wrote v1", "wrote v2", "polished"],  # the child's notes, merged through append
    "meta": {"published": "CATS V2!", "notes": 3},
}


def same_run(local: RunResult, remote: RunResult) -> None:
    assert remote.status == local.status
    assert remote.state == local.state
    assert remote.path == local.path
    assert remote.output == local.output


def test_a_builder_graph_on_the_cluster_matches_invoke(cluster: Client) -> None:
    graph = targets.draft_graph()
    local = graph.invoke_sync(state={"topic": "cats"})
    assert local.status == "completed"
    assert local.path == ["write", "write", "polish", "publish"]
    assert local.state == EXPECTED_STATE
    remote = cluster.submit(graph, state={"topic": "cats"}).wait(timeout=60)
    same_run(local, remote)


def test_the_stored_definition_loads_without_the_graph_object(cluster: Client) -> None:
    graph = targets.draft_graph()
    cluster.submit(graph, state={"topic": "dogs"}).wait(timeout=60)
    fresh = GraphCache(cluster.store)  # what a worker that never saw the object does
    loaded = fresh.get(graph.content_hash)
    assert loaded.spec == graph.spec
    child = fresh.child(loaded, "builder-it/polish")
    assert child.content_hash == graph.subgraph("builder-it/polish").content_hash


def test_a_failing_builder_graph_keeps_its_state_on_the_cluster(cluster: Client) -> None:
    graph = targets.failing_graph()
    local = graph.invoke_sync(state={"topic": "cats"})
    remote = cluster.submit(graph, state={"topic": "cats"}).wait(timeout=60)
    same_run(local, remote)
    with pytest.raises(NodeError, match="cannot publish 'cats v1'") as info:
        remote.raise_for_error()
    assert info.value.state is not None and info.value.state["notes"] == ["wrote v1"]


def test_a_worker_process_imports_the_functions_by_name(
    redis_server: EmbeddedRedis, worker_env: dict[str, Any], tmp_path: Path
) -> None:
    graph = targets.draft_graph()
    local = graph.invoke_sync(state={"topic": "cats"})
    with dedicated_worker(redis_server, worker_env, tmp_path) as client:
        run = client.submit(graph, state={"topic": "cats"}, run_id=f"builder-{uuid.uuid4().hex[:8]}")
        remote = run.wait(timeout=60)
    same_run(local, remote)
    workers = {s["worker"] for s in remote.steps}
    assert workers and not any(w.endswith(f":{os.getpid()}") for w in workers)  # not this process


def test_the_initial_state_is_part_of_a_run_id(cluster: Client) -> None:
    graph = targets.failing_graph()
    run_id = f"builder-{uuid.uuid4().hex[:8]}"
    first = cluster.submit(graph, state={"topic": "a"}, run_id=run_id)
    assert cluster.submit(graph, state={"topic": "a"}, run_id=run_id).id == first.id
    with pytest.raises(RunConflict, match="initial state"):
        cluster.submit(graph, state={"topic": "b"}, run_id=run_id)
    first.wait(timeout=60)


def test_foreach_pause_hooks_and_return_of_a_builder_graph_on_the_cluster(cluster: Client) -> None:
    graph = targets.parity_graph()
    state = {"docs": ["a", "bbb", "cc"]}
    local = graph.invoke_sync(state=state)
    assert (local.status, local.path) == ("paused", ["measure", "wait_for_approval"])
    handle = cluster.submit(graph, state=state)
    paused = handle.wait(timeout=60)
    same_run(local, paused)
    assert paused.state["lengths"] == [10, 31, 22]
    done = cluster.resume(handle.id, {"approved_by": "ada"}).wait(timeout=60)
    assert (done.status, done.path) == ("completed", ["measure", "wait_for_approval", "approve", "done"])
    assert done.output == {"lengths": [10, 31, 22], "log": ["approved by ada"]}
