"""A run's history and forks over a MemoryStore, with the real executor: the history budget,
no history at all, an expired run, and `Graph.invoke(start=...)` (tests/unit/memory_cluster.py)."""

from __future__ import annotations

import asyncio
import time

import pytest
from memory_cluster import MemoryCluster, submit

from graphrunner import parse_graph
from graphrunner.errors import HistoryUnavailable, RunNotFound, UnknownNode
from graphrunner.store.memory_store import MemoryStore

GROWING = """
id: unit/growing
state:
  n: {type: integer, default: 0}
  big: {type: string, default: "%s"}
config: {start: add}
nodes:
  add:
    action: {tool: echo, params: {n: "${state.n}"}}
    assign: {n: "${result.n + 1}", big: "${state.big + string(state.n)}"}
    next: [{to: done, when: "state.n >= 6"}, {to: add}]
  done: {type: return}
""" % ("z" * 5000)


def settled(store: MemoryStore) -> tuple[MemoryCluster, str]:
    mc = MemoryCluster(store)
    run_id = submit(mc, GROWING)
    mc.drive()
    return mc, run_id


def test_past_the_budget_later_steps_are_a_clear_error() -> None:
    mc, run_id = settled(MemoryStore(history_bytes=20_000))  # the initial state and about two steps
    try:
        entries = mc.client.history(run_id)
        assert [e.step for e in entries] == [0, 1, 2]
        assert mc.client.state_at(run_id, 2)["n"] == 2
        with pytest.raises(HistoryUnavailable, match=f"run {run_id}: no state kept after step 5: .*budget"):
            mc.client.state_at(run_id, 5)
        with pytest.raises(HistoryUnavailable, match="GRAPHRUNNER_HISTORY_MAX_BYTES"):
            mc.client.fork(run_id, 4)
        forked = mc.client.fork(run_id, 2)  # within the budget: fine
        mc.drive()
        assert forked.snapshot().state == mc.snap(run_id).state
    finally:
        mc.close()


def test_a_run_started_without_history_says_so() -> None:
    mc, run_id = settled(MemoryStore(history_bytes=0))
    try:
        assert mc.client.history(run_id) == []
        with pytest.raises(HistoryUnavailable, match="keeps no history"):
            mc.client.state_at(run_id, 0)
    finally:
        mc.close()


def test_the_history_of_an_expired_run_is_gone_with_it() -> None:
    mc, run_id = settled(MemoryStore(retention_seconds=1))
    try:
        assert len(mc.client.history(run_id)) == 8
        time.sleep(1.1)
        with pytest.raises(RunNotFound, match="GRAPHRUNNER_RETENTION"):
            mc.client.history(run_id)
        with pytest.raises(RunNotFound):
            mc.client.fork(run_id, 1)
    finally:
        mc.close()


def test_invoke_starts_at_the_node_given() -> None:
    graph = parse_graph(GROWING, file="unit.yaml")
    result = asyncio.run(graph.invoke(state={"n": 4, "big": ""}, start="add"))
    assert result.state == {"n": 6, "big": "45"}
    with pytest.raises(UnknownNode, match="no node 'nowhere'"):
        asyncio.run(graph.invoke(start="nowhere"))
