"""Streaming on a real cluster (issue 18): `RunHandle.stream`, `Client.stream` and
`graphrunner watch --json`, and step numbers that never go back across cancel and resume."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from support import uid, wait_for, write

from graphrunner.cli import main
from graphrunner.client import Client
from graphrunner.embedded import EmbeddedRedis
from graphrunner.streaming import RecordEvent, ResultEvent, StateEvent

WAIT_S = 60
COUNTING = """
id: stream/counting-{uid}
state:
  n: {{type: integer, default: 0}}
  trail: {{type: list, default: [], reducer: append}}
config: {{start: first}}
nodes:
  first: {{action: {{tool: echo, params: {{v: 1}}}}, assign: {{n: 1, trail: [first]}}, next: nap}}
  nap: {{action: {{tool: sleep, params: {{seconds: 0.5}}}}, next: second}}
  second: {{action: {{tool: echo, params: {{v: 2}}}}, assign: {{n: 2, trail: [second]}}, next: done}}
  done: {{type: return, output: {{n: "${{state.n}}"}}}}
"""
NAP = """
id: stream/nap-{uid}
config: {{start: nap}}
nodes:
  nap: {{action: {{tool: sleep, params: {{seconds: 600}}}}, next: done}}
  done: {{type: return}}
"""


def graph_file(tmp_path: Path, text: str) -> str:
    return str(write(tmp_path, "graph.yaml", text.format(uid=uid())))


def test_values_stream_of_a_run_from_its_submission(cluster: Client, tmp_path: Path) -> None:
    """The stream pins the run before its first step: the run waits for a concurrency key that a
    sleeping run holds, and goes only once that one is cancelled (however loaded the machine)."""
    key = f"stream-{uid()}"
    holder = cluster.submit(graph_file(tmp_path, NAP), concurrency_key=key)
    run = cluster.submit(graph_file(tmp_path, COUNTING), concurrency_key=key)
    assert run.status() == "pending"
    stream = run.stream("values", timeout=WAIT_S)
    first = next(stream)
    assert isinstance(first, StateEvent) and first.state == {"n": 0, "trail": []}
    holder.cancel()
    events = [first, *stream]
    result = events[-1]
    assert isinstance(result, ResultEvent)
    steps = [e for e in events if isinstance(e, RecordEvent)]
    by_node = {(e.node, e.status): e for e in steps}
    assert by_node["first", "ok"].state == {"n": 1, "trail": ["first"]}
    assert by_node["nap", "sleeping"].state == {"n": 1, "trail": ["first"]}
    assert by_node["second", "ok"].updates == {"n": 2, "trail": ["first", "second"]}
    assert steps[-1].status == "end" and steps[-1].state == result.result.state == {
        "n": 2,
        "trail": ["first", "second"],
    }
    assert steps[0].status == "admitted"  # the key handed on: the first record after the pin
    assert [e.step for e in steps] == sorted(e.step for e in steps) and steps[-1].step == 4
    assert result.result.status == "completed" and result.result.output == {"n": 2}
    assert result.result.steps == run.steps()


def test_updates_stream_replays_the_transcript(cluster: Client, tmp_path: Path) -> None:
    run = cluster.submit(graph_file(tmp_path, COUNTING))
    run.wait(timeout=WAIT_S)
    events = list(cluster.stream(run.id))
    steps = [e for e in events if isinstance(e, RecordEvent)]
    assert [(e.node, e.status) for e in steps] == [
        ("first", "ok"),
        ("nap", "sleeping"),
        ("nap", "ok"),
        ("second", "ok"),
        ("done", "end"),
    ]
    assert [e.updates for e in steps][::3] == [
        {"n": 1, "trail": ["first"]},
        {"n": 2, "trail": ["first", "second"]},
    ]
    assert all(e.state is None for e in steps)
    assert isinstance(events[-1], ResultEvent) and events[-1].result.to_dict() == run.result().to_dict()


def test_watch_json_prints_events_then_the_status_object(
    redis_server: EmbeddedRedis, cluster: Client, tmp_path: Path
) -> None:
    env = {"GRAPHRUNNER_REDIS_URL": redis_server.url, "GRAPHRUNNER_BROKER_URL": None}
    run = cluster.submit(graph_file(tmp_path, COUNTING))
    watched = CliRunner().invoke(main, ["watch", run.id, "--json", "--timeout", str(WAIT_S)], env=env)
    assert watched.exit_code == 0, watched.stderr
    objects = [json.loads(line) for line in watched.stdout.splitlines()]
    assert [o["event"] for o in objects] == ["step"] * 5 + ["result"]
    assert objects[0]["run_id"] == run.id and objects[0]["node"] == "first"
    assert objects[0]["updates"] == {"n": 1, "trail": ["first"]} and objects[1]["sleep_s"] == 0.5
    status = CliRunner().invoke(main, ["status", run.id, "--json"], env=env)
    assert {k: v for k, v in objects[-1].items() if k != "event"} == json.loads(status.stdout)


def test_watch_step_numbers_never_go_back_across_cancel_and_resume(
    redis_server: EmbeddedRedis, cluster: Client, tmp_path: Path
) -> None:
    env = {"GRAPHRUNNER_REDIS_URL": redis_server.url, "GRAPHRUNNER_BROKER_URL": None}
    run = cluster.submit(graph_file(tmp_path, NAP))
    sleeping = lambda: [r["status"] for r in run.steps()].count("sleeping")  # noqa: E731
    wait_for(lambda: sleeping() == 1, WAIT_S, "the durable sleep")
    run.cancel()
    cluster.resume(run.id)
    wait_for(lambda: sleeping() == 2, WAIT_S, "the sleep again after the resume")
    run.cancel()
    watched = CliRunner().invoke(main, ["watch", run.id, "--timeout", str(WAIT_S)], env=env)
    assert watched.exit_code == 1  # cancelled
    lines = watched.stdout.splitlines()
    assert [line.split()[2:5] for line in lines[:-1]] == [
        ["1", "nap", "⏲"],
        ["1", "nap", "⊘"],
        ["1", "nap", "▶"],
        ["1", "nap", "⏲"],
        ["1", "nap", "⊘"],
    ]
    assert lines[-1] == f"run {run.id} cancelled (0 steps)"
