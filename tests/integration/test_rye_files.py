"""A Rye graph file on the cluster: submitted by path and by graph id (its name on the graph
path), stored, and re-read by the worker with the id it was submitted under (issue 16, step 1)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from support import uid

from graphrunner import load_graph
from graphrunner.client import Client
from graphrunner.cluster.runs.graphs import GraphCache
from graphrunner.settings import Settings

RYE = """\
<!-- rye:unsigned -->
version: "1.0.0"
tool_type: graph
executor_id: rye/core/runtimes/state-graph/runtime
config_schema:
  type: object
  properties: {word: {type: string, default: hi}}
config:
  start: shout
  state: {count: 0}
  nodes:
    shout:
      action: {primary: execute, item_type: tool, item_id: echo, params: {loud: "${inputs.word}!"}}
      assign: {loud: "${result.loud}", count: "${state.count + 1}"}
      next: done
    done: {type: return, output: {loud: "${state.loud}", count: "${state.count}"}}
"""


def test_a_rye_file_runs_on_the_cluster_by_path(cluster: Client, tmp_path: Path) -> None:
    path = tmp_path / f"shout-{uid()}.yaml"
    path.write_text(RYE)
    result = cluster.submit(path, {"word": "hey"}).wait(timeout=60)
    assert (result.status, result.graph_id, result.output) == (
        "completed",
        path.stem,
        {"loud": "hey!", "count": 1},
    )


def test_a_rye_file_found_by_id_keeps_that_id_on_the_worker(cluster: Client, tmp_path: Path) -> None:
    folder = tmp_path / "tools" / "team"
    folder.mkdir(parents=True)
    name = f"shout-{uid()}"
    (folder / f"{name}.yaml").write_text(textwrap.dedent(RYE))
    graph = load_graph(f"team/{name}", settings=Settings(graph_path=(tmp_path / "tools",)))
    result = cluster.submit(graph).wait(timeout=60)
    assert (result.status, result.graph_id, result.output) == (
        "completed",
        f"team/{name}",
        {"loud": "hi!", "count": 1},
    )
    reread = GraphCache(cluster.store).get(graph.content_hash)  # as a worker that never saw it reads it
    assert reread.id == f"team/{name}"
