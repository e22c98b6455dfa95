"""A worker SIGKILLed while parallel branches and foreach items (child runs) are in flight:
every run completes, and no branch's contribution or item's output is merged twice (issue 17)."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

from support import first_pid
from test_worker_processes import start_workers

from graphrunner import load_graph
from graphrunner.client import Client
from graphrunner.embedded import EmbeddedRedis
from graphrunner.settings import Settings

WORK = """
    id: kill/work
    inputs: {name: {type: string}}
    state: {log: {type: list, default: [], reducer: append}}
    config: {start: slow}
    nodes:
      slow:
        action: {tool: python, params: {fn: "crash_targets:slow_step", args: {marker: MARKER, seconds: 2}}}
        retry: {max_attempts: 1}
        next: write
      write: {type: gate, assign: {log: ["${inputs.name}"]}, next: done}
      done: {type: return, output: "${inputs.name}"}
"""
PARENT = """
    id: kill/parent
    state:
      log: {type: list, default: [], reducer: append}
      docs: {type: list, default: [d0, d1, d2, d3]}
      outs: {type: list, default: []}
    config: {start: branches}
    nodes:
      branches:
        type: parallel
        branches:
          a: {graph: kill/work, inputs: {name: "${'a'}"}, outputs: {log: log}}
          b: {graph: kill/work, inputs: {name: "${'b'}"}, outputs: {log: log}}
          c: {graph: kill/work, inputs: {name: "${'c'}"}, outputs: {log: log}}
        next: items
      items:
        type: foreach
        over: "${state.docs}"
        as: doc
        parallel: true
        max_concurrency: 2
        graph: kill/work
        inputs: {name: "${doc}"}
        collect: outs
        next: done
      done: {type: return}
"""


def test_a_worker_killed_while_kids_run_and_every_contribution_merges_once(
    private_redis: EmbeddedRedis, worker_env: dict[str, Any], tmp_path: Path
) -> None:
    graphs = tmp_path / "graphs"
    graphs.mkdir()
    (graphs / "work.yaml").write_text(textwrap.dedent(WORK).replace("MARKER", str(tmp_path)))
    (graphs / "parent.yaml").write_text(textwrap.dedent(PARENT))
    graph = load_graph(graphs / "parent.yaml", settings=Settings(graph_path=(graphs,)))
    env = {**worker_env, "GRAPHRUNNER_REDIS_URL": private_redis.url, "GRAPHRUNNER_VISIBILITY_TIMEOUT": "3"}
    workers = start_workers(2, env, tmp_path)
    client = Client(private_redis.url)
    try:
        run = client.submit(graph)
        calls = tmp_path / "calls"
        pid = first_pid(calls)
        next(w for w in workers if w.owns(pid)).kill()  # in the middle of a branch's slow step
        result = run.wait(timeout=120)
        assert result.status == "completed", result.error
        assert result.state["log"] == ["a", "b", "c"]  # each branch merged once, in declaration order
        assert result.state["outs"] == ["d0", "d1", "d2", "d3"]  # each item collected once, in order
        assert [(s["step"], s["node"]) for s in result.steps] == [(1, "branches"), (2, "items"), (3, "done")]
        runs_of_slow = calls.read_text().splitlines()
        assert len(runs_of_slow) == 8  # 7 kids, and the killed kid's step once more on the survivor
        for key in ("a", "b", "c", "0", "1", "2", "3"):
            kid = client.store.load_run(f"{run.id}.{1 if key.isalpha() else 2}.{key}")
            assert kid is not None and (kid.status.value, kid.step) == ("completed", 3), (key, kid)
    finally:
        client.close()
        for worker in workers:
            worker.stop()
