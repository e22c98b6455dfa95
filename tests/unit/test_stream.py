"""Streaming (issue 18): the events of a cluster run (`RunHandle.stream`, over a MemoryStore
driven step by step) and of an in-process run (`Graph.stream`, `Graph.astream`)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from conformance.conformance_fixtures import Case, load_cases, write_graphs
from memory_cluster import LINEAR, NAP, MemoryCluster, submit

from graphrunner import load_graph, parse_graph
from graphrunner.cli.progress import format_step
from graphrunner.errors import GraphrunnerError, WaitTimeout
from graphrunner.services.records import MAX_CARRIED_BYTES
from graphrunner.store.base import StepEntry
from graphrunner.streaming import RecordEvent, ResultEvent, StateEvent, StreamEvent

CONFORMANCE = Path(__file__).parents[1] / "conformance"
RUNNABLE = [c for c in load_cases() if c.expected_compile_error is None]
BIG = "x" * (MAX_CARRIED_BYTES + 1)
LARGE = f"""
id: unit/large
state: {{big: string, small: integer}}
config: {{start: first}}
nodes:
  first: {{action: {{tool: echo, params: {{v: 1}}}}, assign: {{big: "{BIG}", small: 1}}, next: second}}
  second: {{action: {{tool: echo, params: {{v: 2}}}}, assign: {{small: 2}}, next: done}}
  done: {{type: return}}
"""
PAUSING = """
id: unit/pausing
state: {approved: {type: boolean, default: false}, trail: {type: list, default: [], reducer: append}}
config: {start: ask}
nodes:
  ask: {type: pause, next: go}
  go: {action: {tool: echo, params: {v: 1}}, assign: {trail: [go]}, next: done}
  done: {type: return}
"""


@pytest.fixture
def mc() -> Iterator[MemoryCluster]:
    cluster = MemoryCluster()
    yield cluster
    cluster.close()


def steps_of(events: list[StreamEvent]) -> list[RecordEvent]:
    return [e for e in events if isinstance(e, RecordEvent)]


# -- a cluster run ---------------------------------------------------------------------------------


def test_updates_replay_a_finished_run_then_its_result(mc: MemoryCluster) -> None:
    run_id = submit(mc, LINEAR)
    mc.drive()
    events = list(mc.client.stream(run_id))
    steps = steps_of(events)
    assert [(e.step, e.node, e.status) for e in steps] == [
        (1, "first", "ok"),
        (2, "second", "ok"),
        (3, "done", "end"),
    ]
    assert [e.updates for e in steps] == [{"trail": ["first"]}, {"trail": ["first", "second"]}, {}]
    assert all(e.omitted == () and e.state is None and e.run_id == run_id for e in steps)
    assert steps[0].record == mc.records(run_id)[0] and steps[0].duration_ms is not None
    result = events[-1]
    assert isinstance(result, ResultEvent) and len(events) == 4
    assert result.result.to_dict() == mc.client.run(run_id).wait().to_dict()
    assert result.result.steps == mc.records(run_id)


def test_values_follow_a_run_step_by_step(mc: MemoryCluster) -> None:
    run_id = submit(mc, LINEAR)
    events = mc.client.run(run_id).stream("values", timeout=30)
    first = next(events)
    assert first == StateEvent(run_id=run_id, step=0, node="first", status="running", state={"trail": []})
    mc.step()
    one = next(events)
    assert isinstance(one, RecordEvent) and (one.step, one.state) == (1, {"trail": ["first"]})
    mc.drive()
    rest = list(events)
    assert [e.state for e in steps_of(rest)] == [{"trail": ["first", "second"]}] * 2
    assert isinstance(rest[-1], ResultEvent) and rest[-1].result.state == {"trail": ["first", "second"]}


@pytest.mark.parametrize("said", [True, False], ids=["records-say", "older-records"])
def test_a_follower_reads_the_status_only_when_the_records_do_not_say_it(
    mc: MemoryCluster, monkeypatch: pytest.MonkeyPatch, said: bool
) -> None:
    """The records of the commit that ends a run say so: the follower read the run's status once,
    at the start. An older graphrunner's records do not: a record that may have ended the run
    (`end`) makes it read the status again."""
    run_id = submit(mc, LINEAR)
    reads: list[str] = []
    status_and_steps, wait_steps = mc.store.status_and_steps, mc.store.wait_steps

    def read(run: str, after: str) -> tuple[str | None, list[StepEntry]]:
        reads.append(after)
        return status_and_steps(run, after)

    def blocked(run: str, after: str, block_ms: int) -> list[StepEntry]:
        return [e if said else replace(e, status=None) for e in wait_steps(run, after, block_ms)]

    monkeypatch.setattr(mc.store, "status_and_steps", read)
    monkeypatch.setattr(mc.store, "wait_steps", blocked)
    records = mc.client.run(run_id).follow(timeout=30)
    mc.step()
    assert next(records)["node"] == "first"
    mc.drive()
    assert [r["status"] for r in records] == ["ok", "end"]
    assert len(reads) == (1 if said else 2)


def test_values_of_a_finished_run_are_its_state_then_its_result(mc: MemoryCluster) -> None:
    run_id = submit(mc, LINEAR)
    mc.drive()
    state, result = list(mc.client.stream(run_id, "values"))
    assert isinstance(state, StateEvent) and state.step == 3 and state.status == "completed"
    assert state.state == {"trail": ["first", "second"]}
    assert isinstance(result, ResultEvent) and len(result.result.steps) == 3


def test_a_value_too_large_for_its_record_is_read_while_the_stream_keeps_up(mc: MemoryCluster) -> None:
    run_id = submit(mc, LARGE)
    events = mc.client.run(run_id).stream("values", timeout=30)
    assert isinstance(next(events), StateEvent)
    mc.step()
    first = next(events)
    assert isinstance(first, RecordEvent) and first.record["values_omitted"] == ["big"]
    assert first.updates == {"big": BIG, "small": 1} and first.omitted == ()  # read: nothing came after
    assert first.state == {"big": BIG, "small": 1}
    mc.drive()
    second = next(events)
    assert isinstance(second, RecordEvent) and second.state == {"big": BIG, "small": 2}  # folded
    list(events)


def test_a_value_too_large_for_its_record_is_omitted_when_the_run_moved_on(mc: MemoryCluster) -> None:
    run_id = submit(mc, LARGE)
    mc.drive()
    first = steps_of(list(mc.client.stream(run_id)))[0]
    assert first.updates == {"small": 1} and first.omitted == ("big",)
    assert first.to_dict()["omitted"] == ["big"] and "values_omitted" not in first.to_dict()


def test_a_resume_patch_is_in_the_state_of_values(mc: MemoryCluster) -> None:
    run_id = submit(mc, PAUSING)
    mc.drive()
    events = mc.client.run(run_id).stream("values", timeout=30)
    paused = next(events)
    assert isinstance(paused, StateEvent) and paused.status == "paused"
    mc.client.resume(run_id, {"approved": True})
    resumed = next(events)
    assert isinstance(resumed, RecordEvent) and resumed.status == "resumed"
    assert resumed.updates == {"approved": True}  # a resume record carries keys only: read
    assert resumed.state == {"approved": True, "trail": []}
    mc.drive()
    last = list(events)
    assert steps_of(last)[-1].state == {"approved": True, "trail": ["go"]}


def test_step_numbers_never_go_back_across_cancel_and_resume(mc: MemoryCluster) -> None:
    run_id = submit(mc, NAP)
    assert mc.step().outcome == "suspended"  # a durable sleep of an hour
    mc.client.cancel(run_id)
    mc.client.resume(run_id)
    assert mc.step().outcome == "suspended"  # sleeps again
    mc.client.cancel(run_id)
    steps = steps_of(list(mc.client.stream(run_id)))
    assert [(e.step, e.status) for e in steps] == [
        (1, "sleeping"),
        (1, "cancelled"),
        (1, "resumed"),
        (1, "sleeping"),
        (1, "cancelled"),
    ]
    lines = [format_step("unit/nap", e.record) for e in steps]
    assert all(line.startswith("[graph:unit/nap] step 1 nap ") for line in lines)


def test_a_stream_that_times_out_says_where_the_run_is(mc: MemoryCluster) -> None:
    run_id = submit(mc, NAP)
    mc.step()
    events = mc.client.stream(run_id, timeout=0.3)
    assert isinstance(next(events), RecordEvent)
    with pytest.raises(WaitTimeout, match=r"did not finish within 0\.3s; it is running at step 1"):
        next(events)


def test_unknown_mode_and_run_are_refused(mc: MemoryCluster) -> None:
    run_id = submit(mc, LINEAR)
    with pytest.raises(GraphrunnerError, match="stream mode must be one of updates, values, got 'debug'"):
        mc.client.run(run_id).stream("debug")
    with pytest.raises(GraphrunnerError, match="no run with id 'ghost'"):
        mc.client.stream("ghost")


# -- an in-process run -----------------------------------------------------------------------------


def test_graph_stream_yields_the_events_of_a_cluster_run() -> None:
    graph = parse_graph(LINEAR, file="unit.yaml")
    events = list(graph.stream(mode="values"))
    assert events[0] == StateEvent(
        run_id=events[0].run_id, step=0, node="first", status="running", state={"trail": []}
    )
    steps = steps_of(events)
    assert [(e.step, e.node, e.status) for e in steps] == [
        (1, "first", "ok"),
        (2, "second", "ok"),
        (3, "done", "end"),
    ]
    assert [e.updates for e in steps] == [{"trail": ["first"]}, {"trail": ["first", "second"]}, {}]
    assert steps[-1].state == {"trail": ["first", "second"]}
    result = events[-1]
    assert isinstance(result, ResultEvent) and result.result.output == {"trail": ["first", "second"]}
    assert [e.state for e in steps_of(list(graph.stream()))] == [None] * 3


def test_graph_astream_and_an_early_close() -> None:
    graph = parse_graph(LINEAR, file="unit.yaml")

    async def first_two() -> list[StreamEvent]:
        seen = []
        async for event in graph.astream(mode="updates"):
            seen.append(event)
            if len(seen) == 2:
                break
        return seen

    assert [e.step for e in steps_of(asyncio.run(first_two()))] == [1, 2]
    events = graph.stream()
    assert isinstance(next(events), RecordEvent)
    events.close()  # the run is stopped, nothing is left pending
    with pytest.raises(GraphrunnerError, match="stream mode must be one of"):
        graph.stream(mode="debug")


@pytest.mark.parametrize("case", RUNNABLE, ids=lambda c: c.id)
def test_the_carried_values_rebuild_the_state_after_every_step(
    case: Case, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a cluster stream folds (a record's `changed_values`) is the state the runner holds,
    for every conformance fixture: reducers, failures, subgraphs, parallel branches, fan-outs."""
    monkeypatch.syspath_prepend(CONFORMANCE)  # their routing functions and tools
    graph = load_graph(write_graphs(case, tmp_path, f"fold-{abs(hash(case.id))}"))
    folded: dict[str, Any] = {}
    for event in graph.stream(mode="values"):
        if isinstance(event, StateEvent):
            folded = dict(event.state)
        elif isinstance(event, RecordEvent):
            assert not event.record.get("values_omitted")
            folded |= event.record.get("changed_values") or {}
            assert folded == event.state, event.record
        else:
            assert folded == event.result.state
