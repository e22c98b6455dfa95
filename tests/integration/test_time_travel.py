"""Time travel on the cluster: a run's state at every step, and forks from every step compared
with a fresh run given the same state at the same node (DESIGN §12, issue 28)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from support import settings_of, uid, write

from graphrunner import engine, load_graph
from graphrunner.cli import main
from graphrunner.client import Client
from graphrunner.compiled import CompiledGraph
from graphrunner.embedded import EmbeddedRedis
from graphrunner.engine import RunSnapshot
from graphrunner.errors import ForkError, HistoryUnavailable, RunNotFound, StateValidationError
from graphrunner.results import RunResult
from graphrunner.runner.local import LocalRunner
from graphrunner.services.records import utcnow

BIG = "x" * 3000  # doubled by `first`: a value too large for its step record (a side record keeps it)
APPROVE = {"approved": True}


def graphs(folder: Path) -> Path:
    """first (action) -> fan (foreach) -> sub (subgraph) -> ask (pause) -> last -> done."""
    child = write(
        folder,
        "child.yaml",
        f"""
        id: tt/child-{uid()}
        state: {{count: {{type: integer, default: 0}}}}
        config: {{start: work}}
        nodes:
          work: {{type: gate, assign: {{count: "${{state.count + 10}}"}}, next: done}}
          done: {{type: return}}
        """,
    )
    return write(
        folder,
        "main.yaml",
        f"""
        id: tt/main-{uid()}
        state:
          count: {{type: integer, default: 0}}
          big: {{type: string, default: "{BIG}"}}
          items: {{type: list, default: [a, bb, ccc]}}
          lengths: {{type: list, default: [], reducer: append}}
          approved: {{type: boolean, default: false}}
        config: {{start: first}}
        nodes:
          first:
            action: {{tool: echo, params: {{n: "${{state.count}}"}}}}
            assign: {{count: "${{result.n + 1}}", big: "${{state.big + state.big}}"}}
            next: fan
          fan:
            type: foreach
            over: "${{state.items}}"
            as: w
            action: {{tool: echo, params: {{len: "${{size(w)}}"}}}}
            collect: lengths
            assign: {{count: "${{state.count + 1}}"}}
            next: sub
          sub: {{type: subgraph, graph: {load_graph(child).id}, next: ask}}
          ask: {{type: pause, message: "approve?", next: last}}
          last: {{type: gate, assign: {{count: "${{state.count + 100}}"}}, next: done}}
          done: {{type: return}}
        """,
    )


def finished(client: Client, run_id: str) -> RunResult:
    """Wait for the run, approving it at its pause."""
    result = client.run(run_id).wait(timeout=60)
    if result.status == "paused":
        result = client.resume(run_id, APPROVE).wait(timeout=60)
    return result


def fresh(graph: CompiledGraph, state: dict[str, Any], start: str) -> RunResult:
    """A fresh in-process run at node `start` with `state`, approved at its pause."""

    async def go() -> RunResult:
        runner = LocalRunner.from_settings(settings_of())
        result = await runner.invoke(graph, state=state, start=start)
        while result.status == "paused" and result.snapshot is not None:
            resumed = engine.resume(graph, result.snapshot, utcnow(), APPROVE)
            result = await runner.drive(graph, resumed)
        return result

    return asyncio.run(go())


def test_forks_at_every_step_match_a_fresh_run_given_the_same_state(cluster: Client, tmp_path: Path) -> None:
    path = graphs(tmp_path)
    graph = load_graph(path)
    run = cluster.submit(path)
    final = finished(cluster, run.id)
    assert final.status == "completed"
    entries = cluster.history(run.id)
    assert [(e.step, e.node, e.status) for e in entries] == [
        (0, None, "start"),
        (1, "first", "ok"),
        (2, "fan", "ok"),
        (3, "sub", "ok"),
        (4, "ask", "paused"),
        (5, "last", "ok"),
        (6, "done", "end"),
    ]
    assert entries[-1].state == final.state  # the fold is exact, the too large `big` included
    assert entries[1].state["big"] == BIG * 2 and entries[4].state["approved"] is False
    assert cluster.state_at(run.id, 5)["approved"] is True  # the resume's patch, before step 5
    for entry in entries[:-1]:
        fork = cluster.fork(run.id, entry.step, APPROVE if entry.status == "paused" else None)
        assert fork.snapshot().forked_from is not None
        assert fork.snapshot().forked_from.model_dump() == {"run_id": run.id, "step": entry.step}
        forked = finished(cluster, fork.id)
        start = "last" if entry.status == "paused" else entry.next_node
        state = {**entry.state, **APPROVE} if entry.status == "paused" else entry.state
        assert start is not None
        again = fresh(graph, state, start)
        assert forked.state == again.state == final.state, entry.step
        taken = [r["step"] for r in fork.steps() if r["status"] in ("ok", "end", "paused")]
        assert taken and min(taken) == entry.step + 1  # nothing up to the fork point again
        assert cluster.history(fork.id)[0].step == entry.step
    with pytest.raises(ForkError, match="ended the run"):
        cluster.fork(run.id, 6)


def test_a_fork_of_a_fork_with_a_patch_and_its_errors(cluster: Client, tmp_path: Path) -> None:
    path = graphs(tmp_path)
    run = cluster.submit(path)
    finished(cluster, run.id)
    first = cluster.fork(run.id, 3, {"count": 1000})  # after the subgraph (which sets count 10)
    assert finished(cluster, first.id).state["count"] == 1000 + 100
    patch = {"count": -5, "items": ["$(rm -rf /)", ".*[", "'; DROP"], "approved": True}
    second = cluster.fork(first.id, 4, patch)  # the fork's pause step
    result = finished(cluster, second.id)
    assert result.state["count"] == -5 + 100 and result.state["items"][0] == "$(rm -rf /)"
    assert second.snapshot().forked_from is not None and second.snapshot().forked_from.run_id == first.id
    with pytest.raises(HistoryUnavailable, match=f"forked from run {run.id} at step 3; read run {run.id}"):
        cluster.state_at(first.id, 1)
    with pytest.raises(HistoryUnavailable, match="no state kept after step 99"):
        cluster.state_at(run.id, 99)
    for bad in (-1, 10**12, "3", True):
        with pytest.raises(HistoryUnavailable):
            cluster.fork(run.id, bad)  # type: ignore[arg-type]
    with pytest.raises(StateValidationError, match="count"):
        cluster.fork(run.id, 2, {"count": "many"})
    with pytest.raises(ForkError, match="mapping"):
        cluster.fork(run.id, 2, ["count"])  # type: ignore[arg-type]
    with pytest.raises(RunNotFound):
        cluster.fork(f"never-{uid()}", 1)
    other = write(tmp_path, "other.yaml", "id: tt/other\nconfig: {start: d}\nnodes: {d: {type: return}}\n")
    with pytest.raises(ForkError, match="onto graph"):
        cluster.fork(run.id, 2, upgrade=other)


def test_state_at_and_fork_on_the_command_line(
    cluster: Client, redis_server: EmbeddedRedis, tmp_path: Path
) -> None:
    path = graphs(tmp_path)
    run = cluster.submit(path)
    finished(cluster, run.id)
    env = {
        "GRAPHRUNNER_REDIS_URL": redis_server.url,
        "GRAPHRUNNER_BROKER_URL": None,
        "GRAPHRUNNER_QUIET": None,
    }
    cli = CliRunner(env=env)
    shown = cli.invoke(main, ["state", run.id, "--at", "3", "--json"])
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.output) == cluster.state_at(run.id, 3)
    forked = cli.invoke(main, ["fork", run.id, "--from", "3", "--patch", '{"count": 7}'])
    assert forked.exit_code == 0, forked.output
    fork_id = forked.output.strip()
    odd = cli.invoke(
        main, ["fork", run.id, "--from", "3", "--patch", '{"items": ["$(rm -rf /)", ".*[", "%s\\n"]}']
    )
    assert odd.exit_code == 0, odd.output  # shell and regex syntax in a patch is only data
    assert cluster.state_at(odd.output.strip(), 3)["items"] == ["$(rm -rf /)", ".*[", "%s\n"]
    shown = cli.invoke(main, ["status", fork_id])
    assert f"forked from: run {run.id} after step 3" in shown.output, shown.output
    assert finished(cluster, fork_id).state["count"] == 107
    as_json = cli.invoke(main, ["fork", run.id, "--from", "1", "--json"])
    assert as_json.exit_code == 0 and "run_id" in json.loads(as_json.output), as_json.output
    for args, code, said in [
        (["state", run.id, "--at", "99"], 1, "no state kept after step 99"),
        (["state", run.id, "--at", "x"], 2, "x"),
        (["fork", run.id, "--from", "-1"], 2, "-1"),
        (["fork", run.id, "--from", "6"], 1, "ended the run"),
        (["fork", run.id, "--from", "2", "--patch", "{nope"], 2, "JSON"),
        (["fork", run.id, "--from", "2", "--patch", "[1]"], 2, "object"),
        (["fork", run.id, "--from", "2", "--patch", '{"count": "x"}'], 2, "count"),
        (["fork", f"never-{uid()}", "--from", "1"], 1, "no run"),
        (["fork", run.id, "--from", "99999999999999999999"], 1, "no state kept after step"),
        (["fork", run.id, "--from", "2", "--patch", '{"items": 5}'], 2, "items"),
        (["fork", run.id, "--run-id", "../etc", "--from", "2"], 2, "../etc"),
    ]:
        out = cli.invoke(main, args)
        assert out.exit_code == code and said in out.output, (args, out.exit_code, out.output)


LOOP = """
id: tt/loop-{u}
state:
  n: {{type: integer, default: 0}}
  big: {{type: string, default: "{big}"}}
  log: {{type: list, default: [], reducer: append}}
config: {{start: add}}
nodes:
  add:
    action: {{tool: echo, params: {{n: "${{state.n}}"}}}}
    assign: {{n: "${{result.n + 1}}", big: "${{state.big + string(state.n)}}", log: ["${{state.n}}"]}}
    next: [{{to: fan, when: "state.n >= 3"}}, {{to: add}}]
  fan:
    type: foreach
    over: "${{state.log}}"
    as: x
    parallel: true
    action: {{tool: echo, params: {{x: "${{x}}"}}}}
    collect: log
    next: both
  both:
    type: parallel
    branches:
      a: {{graph: {kid}, inputs: {{query: "${{'one'}}"}}, outputs: {{log: log}}}}
      b: {{graph: {kid}, inputs: {{query: "${{'two'}}"}}, outputs: {{log: log}}}}
    next: split
  split: {{type: gate, assign: {{n: "${{100 / (state.n - 3)}}"}}, next: done}}
  done: {{type: return}}
"""

KID = """
id: tt/kid-{u}
inputs: {{query: {{type: string}}}}
state: {{log: {{type: list, default: [], reducer: append}}}}
config: {{start: w}}
nodes:
  w: {{type: gate, assign: {{log: ["${{inputs.query}}"]}}}}
"""


def test_the_folded_history_is_what_the_run_saw_at_every_step(cluster: Client, tmp_path: Path) -> None:
    """A loop with a value too large for its step records, a parallel foreach, parallel branches,
    a failure resumed with a patch: the folded state at every step is what an in-process run's
    `on_step` observer saw, and after the last step the run's own final state."""
    u = uid()
    write(tmp_path, "kid.yaml", KID.format(u=u))
    path = write(tmp_path, "loop.yaml", LOOP.format(u=u, big="y" * 5000, kid=f"tt/kid-{u}"))
    graph = load_graph(path)
    run = cluster.submit(path)
    failed = run.wait(timeout=60)
    assert failed.status == "failed"  # split: 100 / 0
    result = cluster.resume(run.id, {"n": 5}).wait(timeout=60)
    assert result.status == "completed"
    entries = cluster.history(run.id)
    assert entries[-1].state == result.state
    seen: list[dict[str, Any]] = []

    def observe(snap: RunSnapshot) -> None:
        if snap.depth == 0:  # not a branch's child run
            seen.append(snap.state)

    async def local() -> RunResult:
        runner = LocalRunner.from_settings(settings_of(), on_step=lambda snap, _: observe(snap))
        return await runner.invoke(graph)

    assert asyncio.run(local()).status == "failed"
    assert [e.state for e in entries[1 : len(seen) + 1]] == seen
    assert [e.status for e in entries] == ["start", "ok", "ok", "ok", "ok", "ok", "error", "ok", "end"]
    assert entries[7].state["n"] == 50  # 100 / (5 - 3): the resume's patch is folded in first
