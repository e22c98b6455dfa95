"""Parallel nodes and foreach over a graph run in-process only for now (issue 17): a producer
refuses to submit them, naming the node, and creates no run; a worker that meets one fails
the node with the same message."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from support import uid

from graphrunner import GraphValidationError, load_graph
from graphrunner.client import Client
from graphrunner.cluster.support import CODE, node_failure
from graphrunner.settings import Settings

CHILD = """
id: CHILD
config: {start: done}
nodes: {done: {type: return}}
"""
PARALLEL = """
id: PARENT
config: {start: both}
nodes:
  both:
    type: parallel
    branches: {a: {graph: CHILD}, b: {graph: CHILD}}
"""
WRAPPER = """
id: WRAPPER
config: {start: inner}
nodes:
  inner: {type: subgraph, graph: PARENT}
"""


def write(folder: Path, ids: dict[str, str]) -> Path:
    for text in (CHILD, PARALLEL, WRAPPER):
        for key, value in ids.items():
            text = text.replace(key, value)
        name = text.split("\n")[1].removeprefix("id: ")
        (folder / f"{name}.yaml").write_text(textwrap.dedent(text))
    return folder


def test_a_producer_refuses_what_the_cluster_cannot_run_and_creates_no_run(
    cluster: Client, tmp_path: Path
) -> None:
    ids = {"CHILD": f"child-{uid()}", "PARENT": f"parent-{uid()}", "WRAPPER": f"wrapper-{uid()}"}
    folder = write(tmp_path, ids)
    settings = Settings(graph_path=(folder,))
    for graph_id in (ids["PARENT"], ids["WRAPPER"]):  # directly, and as a subgraph's child
        graph = load_graph(folder / f"{graph_id}.yaml", settings=settings)
        with pytest.raises(GraphValidationError) as caught:
            cluster.submit(graph, run_id=f"refused-{uid()}")
        assert caught.value.codes == [CODE]
        assert f"graph '{ids['PARENT']}': node 'both' is a parallel node" in str(caught.value)
        assert "--in-process" in str(caught.value)
    assert graph.invoke_sync().status == "completed"  # in-process it runs


def test_a_worker_fails_such_a_node_with_the_same_message(tmp_path: Path) -> None:
    folder = write(tmp_path, {"CHILD": "c", "PARENT": "p", "WRAPPER": "w"})
    spec = load_graph(folder / "p.yaml", settings=Settings(graph_path=(folder,))).spec
    failure = node_failure(spec, "both")
    assert failure is not None and failure.error_type == "NotOnCluster"
    assert "runs in-process only" in failure.message
    assert node_failure(load_graph(folder / "c.yaml").spec, "done") is None
