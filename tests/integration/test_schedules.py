"""Schedules on a real Redis, by a controllable clock: every overlap policy, catch-up after a
stopped beat, a claimed tick whose beat died, the admin API and the CLI.

The clock is set in 2030 and later: the in-thread worker's own housekeeping fires schedules by
the real clock, and so never finds these due.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from redis_cluster import RedisCluster
from support import settings_of, uid, wait_for
from worker_procs import WorkerProcess

from graphrunner import parse_graph
from graphrunner.cli import main
from graphrunner.client import Client, RunHandle
from graphrunner.cluster.runs.context import Cluster
from graphrunner.cluster.schedules.admin import Schedules
from graphrunner.cluster.schedules.declared import register_declared
from graphrunner.cluster.schedules.firing import SETTLE_AFTER, Scheduler
from graphrunner.cluster.schedules.timing import tick_run_id
from graphrunner.embedded import EmbeddedRedis
from graphrunner.errors import ScheduleError, ScheduleNotFound
from graphrunner.graph import Graph

T0 = int(datetime(2031, 1, 1, tzinfo=UTC).timestamp())

HOLD = """
    id: t/sched-hold-{uid}
    inputs: {{n: {{type: integer, default: 0}}}}
    config: {{start: hold}}
    nodes:
      hold: {{type: pause, next: done}}
      done: {{type: return, output: {{n: "${{inputs.n}}"}}}}
"""

QUICK = """
    id: t/sched-quick-{uid}
    config: {{start: done}}
    nodes:
      done: {{type: return, output: {{ok: true}}}}
"""


class Clock:
    """A clock the test moves."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock(T0 - 30)


def admin_of(client: Client, clock: Any = None) -> Schedules[RunHandle]:
    """`client.schedules`, on `clock` (the real one by default)."""
    if clock is None:
        return client.schedules
    return Schedules(client.cluster, lambda run_id: RunHandle(client, run_id), clock)


@pytest.fixture
def schedules(cluster: Client, clock: Clock) -> Iterator[Schedules[RunHandle]]:
    admin = admin_of(cluster, clock)
    yield admin
    for info in admin.list():
        if info.graph_id.startswith("t/sched-"):
            admin.remove(info.id)


def graph_of(text: str) -> Graph:
    return parse_graph(textwrap.dedent(text.format(uid=uid())))


def status(client: Client, run_id: str) -> str | None:
    return client.store.status_of(run_id)


def wait_status(client: Client, run_id: str, expected: str) -> None:
    wait_for(lambda: status(client, run_id) == expected, 30, f"run {run_id} {expected}")


def fire_at(scheduler: Scheduler, clock: Clock, when: float) -> list[Any]:
    clock.now = when
    return [(o.outcome, o.reason) for o in scheduler.fire_due()]


@pytest.mark.parametrize(
    ("overlap", "second", "third", "first_after"),
    [
        ("skip", ("skipped", "overlap: a run is active"), ("skipped", "overlap: a run is active"), "paused"),
        ("buffer_one", ("buffered", None), ("skipped", "overlap: a run is already buffered"), "paused"),
        ("buffer_all", ("buffered", None), ("buffered", None), "paused"),
        ("cancel_other", ("fired", None), ("fired", None), "cancelled"),
        ("terminate_other", ("fired", None), ("fired", None), "cancelled"),
        ("allow_all", ("fired", None), ("fired", None), "paused"),
    ],
)
def test_every_overlap_policy(
    cluster: Client,
    schedules: Schedules[RunHandle],
    clock: Clock,
    overlap: str,
    second: tuple[str, str | None],
    third: tuple[str, str | None],
    first_after: str,
) -> None:
    graph = graph_of(HOLD)  # each run pauses, holding the schedule's key until it is resumed
    info = schedules.add(graph, "p", every=60, overlap=overlap)
    beat = Scheduler(cluster.cluster, clock)
    runs = [tick_run_id(info.id, T0 + 60 * i) for i in range(3)]
    assert fire_at(beat, clock, T0 + 1) == [("fired", None)]
    wait_status(cluster, runs[0], "paused")
    assert fire_at(beat, clock, T0 + 61) == [second]
    if second[0] == "fired":
        wait_status(cluster, runs[1], "paused")
    assert fire_at(beat, clock, T0 + 121) == [third]
    assert status(cluster, runs[0]) == first_after
    if overlap in ("cancel_other", "terminate_other"):  # only the newest run is left
        wait_status(cluster, runs[2], "paused")
        assert status(cluster, runs[1]) == "cancelled"
    if overlap.startswith("buffer"):  # the buffered run starts when the active one ends
        cluster.resume(runs[0])
        wait_status(cluster, runs[0], "completed")
        wait_status(cluster, runs[1], "paused")
        expected_third = "pending" if overlap == "buffer_all" else None
        assert status(cluster, runs[2]) == expected_third
    recent = schedules.get(info.id).recent
    assert [(o.tick, o.outcome) for o in recent] == [
        (T0 + 120, third[0]),
        (T0 + 60, second[0]),
        (T0, "fired"),
    ]
    for run_id in runs:  # nothing left holding or waiting for the key
        if status(cluster, run_id) in ("paused", "pending", "running"):
            cluster.cancel(run_id)


def test_catch_up_after_a_stopped_beat(
    cluster: Client, schedules: Schedules[RunHandle], clock: Clock
) -> None:
    graph = graph_of(QUICK)
    info = schedules.add(graph, "catchup", every="10m", catchup_window="30m", overlap="allow_all")
    beat = Scheduler(cluster.cluster, clock)
    # no beat ran for two hours: the ticks at most 30 minutes late fire, the 9 older ones (T0 to
    # T0 + 80 minutes) are skipped
    outcomes = fire_at(beat, clock, T0 + 7200)
    assert outcomes == [("skipped", "missed")] * 9 + [("fired", None)] * 4
    assert fire_at(Scheduler(cluster.cluster, clock), clock, T0 + 7200) == []  # a second beat: nothing
    fired = [tick_run_id(info.id, T0 + t) for t in (5400, 6000, 6600, 7200)]
    for run_id in fired:
        assert cluster.run(run_id).wait(timeout=30).status == "completed"
    assert schedules.runs(info.id) == fired[::-1]
    listed = cluster.list_runs(schedule=info.id)
    assert [r.run_id for r in sorted(listed, key=lambda r: r.run_id)] == fired
    shown = schedules.get(info.id)
    assert shown.missed == 9
    assert [o.outcome for o in shown.recent[:5]] == ["fired"] * 4 + ["skipped"]
    assert [t.timestamp() for t in shown.next_fires] == [T0 + 7200 + 600 * i for i in range(1, 6)]
    snap = cluster.run(fired[0]).snapshot()
    assert snap.schedule is not None and (snap.schedule.id, snap.schedule.tick) == (info.id, T0 + 5400)


def test_a_claimed_tick_whose_beat_died_is_decided_once_by_another(
    cluster: Client, schedules: Schedules[RunHandle], clock: Clock
) -> None:
    graph = graph_of(QUICK)
    info = schedules.add(graph, "dies", every=60, overlap="allow_all")
    record = schedules.store.get(info.id)
    assert record is not None
    clock.now = T0 + 1
    # a beat claims the tick and dies before deciding it
    assert schedules.store.claim(info.id, record.claimed, T0, T0 + 60, clock.now, [], 0, [T0]) == 1
    assert schedules.get(info.id).recent[0].outcome == "claimed"
    beat = Scheduler(cluster.cluster, clock)
    assert fire_at(beat, clock, T0 + 2) == []  # not yet: the claiming beat may still be deciding
    assert fire_at(beat, clock, T0 + 2 + SETTLE_AFTER) == [("fired", None)]
    run_id = tick_run_id(info.id, T0)
    assert cluster.run(run_id).wait(timeout=30).status == "completed"
    assert fire_at(Scheduler(cluster.cluster, clock), clock, T0 + 3 + 2 * SETTLE_AFTER) == [
        ("fired", None)  # the next tick (T0 + 60), and the dead beat's tick not again
    ]
    assert schedules.runs(info.id) == [tick_run_id(info.id, T0 + 60), run_id]


def test_the_admin_api(cluster: Client, schedules: Schedules[RunHandle], clock: Clock) -> None:
    graph = graph_of(HOLD)
    info = schedules.add(graph, "api", cron="0 * * * *", timezone="Asia/Tokyo", inputs={"n": 7}, jitter="5m")
    assert (info.id, info.source, info.paused, info.spec.inputs) == (
        f"{graph.id}/api",
        "api",
        False,
        {"n": 7},
    )
    assert len(info.next_fires) == 5 and all(t.minute < 5 for t in info.next_fires)
    assert info.id in [i.id for i in schedules.list()]
    assert json.loads(info.model_dump_json())["spec"]["cron"] == "0 * * * *"
    paused = schedules.pause(info.id)
    assert paused.paused and paused.next_fires == ()
    beat = Scheduler(cluster.cluster, clock)
    assert fire_at(beat, clock, T0 + 7200) == []  # paused: nothing fires, nothing is caught up later
    assert not schedules.resume(info.id).paused
    assert fire_at(beat, clock, T0 + 7201) == []
    handle = schedules.trigger(info.id)
    wait_status(cluster, handle.id, "paused")
    snap = handle.snapshot()
    assert snap.schedule is not None and snap.schedule.trigger and snap.inputs == {"n": 7}
    with pytest.raises(ScheduleError, match="not started"):
        schedules.trigger(info.id)  # skip: the triggered run holds the key
    cluster.cancel(handle.id)
    outcomes = schedules.backfill(
        info.id, datetime(2030, 6, 1, 0, 0), datetime(2030, 6, 1, 3, 0), "allow_all"
    )
    assert [o.outcome for o in outcomes] == ["fired"] * 3
    again = schedules.backfill(info.id, T0 - 86400 * 214, datetime(2030, 6, 1, 3, 0, tzinfo=UTC), "allow_all")
    assert [o.run_id for o in again[-3:]] == [o.run_id for o in outcomes]  # idempotent
    for o in outcomes:
        assert o.run_id is not None
        cluster.cancel(o.run_id)
    with pytest.raises(ScheduleError, match="more than 1000"):
        schedules.backfill(info.id, 0, T0)
    schedules.remove(info.id)
    for call in (schedules.get, schedules.pause, schedules.resume, schedules.trigger, schedules.remove):
        with pytest.raises(ScheduleNotFound):
            call(info.id)
    with pytest.raises(ScheduleNotFound):
        schedules.backfill(info.id, T0, T0 + 3600)
    with pytest.raises(ScheduleError, match="invalid schedule id"):
        schedules.get("$(reboot)")
    with pytest.raises(ScheduleError, match="inputs"):
        schedules.add(graph, "bad", every=60, inputs={"n": "seven"})


def invoke(redis_url: str, *args: str) -> Any:
    runner = CliRunner()
    return runner.invoke(main, list(args), env={"GRAPHRUNNER_REDIS_URL": redis_url, "GRAPHRUNNER_QUIET": "1"})


def test_the_cli(cluster: Client, schedules: Schedules[RunHandle], tmp_path: Any) -> None:
    text = textwrap.dedent(QUICK.format(uid=uid()))
    text = text.replace(
        "config: {start: done}", 'config: {start: done, schedules: {nightly: {cron: "0 3 * * *"}}}'
    )
    path = tmp_path / "g.yaml"
    path.write_text(text)
    url = cluster.settings.redis_url or ""
    declared = invoke(url, "schedule", "add", str(path), "--json")
    assert declared.exit_code == 0, declared.output
    [info] = json.loads(declared.output)
    assert info["source"] == "graph" and info["spec"]["cron"] == "0 3 * * *"
    added = invoke(url, "schedule", "add", str(path), "often", "--every", "15m", "--overlap", "buffer_all")
    assert added.exit_code == 0, added.output
    sid = info["id"].replace("nightly", "often")
    listed = invoke(url, "schedule", "list")
    assert sid in listed.output and "buffer_all" in listed.output and "every 900s" in listed.output
    for command in ("pause", "resume", "show"):
        done = invoke(url, "schedule", command, sid, "--json")
        assert done.exit_code == 0, done.output
    triggered = invoke(url, "schedule", "trigger", sid, "--json")
    run_id = json.loads(triggered.output)["run_id"]
    assert cluster.run(run_id).wait(timeout=30).status == "completed"
    assert f"schedule: {sid} (triggered " in invoke(url, "status", run_id).output
    runs = invoke(url, "list", "--schedule", sid, "--json")
    assert [r["run_id"] for r in json.loads(runs.output)] == [run_id]
    span = ("--start", "2030-01-01T00:00:00Z", "--end", "2030-01-01T00:31:00Z")
    filled = json.loads(invoke(url, "schedule", "backfill", sid, *span, "--json").output)
    assert [o["tick"] for o in filled] == [T0 - 365 * 86400 + 900 * i for i in range(3)]
    assert {o["outcome"] for o in filled} <= {"fired", "buffered"}  # buffered: behind the one before
    for o in filled:
        assert cluster.run(o["run_id"]).wait(timeout=30).status == "completed"
    assert invoke(url, "schedule", "remove", sid).exit_code == 0
    for args in (
        ("show", sid),
        ("pause", sid),
        ("resume", sid),
        ("trigger", sid),
        ("remove", sid),
        ("backfill", sid, "--start", "2030-01-01", "--end", "2030-01-02"),
    ):
        gone = invoke(url, "schedule", *args)
        assert gone.exit_code == 1 and "no schedule" in gone.output, (args, gone.output)
    assert invoke(url, "list", "--schedule", sid).exit_code == 1
    bad = [
        ("add", str(path), "x", "--cron", "61 * * * *"),
        ("add", str(path), "x", "--every", "60", "--timezone", "Nowhere/Land"),
        ("add", str(path), "x", "--every", "60", "--jitter", "-1"),
        ("add", str(path), "x", "--every", "60", "--cron", "* * * * *"),
        ("add", str(path), "a b;rm", "--every", "60"),
        ("show", "$(reboot)"),
        ("pause", ".*"),
    ]
    for args in bad:
        refused = invoke(url, "schedule", *args)
        assert refused.exit_code == 2, (args, refused.output)


SLOW = """
    id: t/sched-day-{uid}
    config: {{start: work}}
    nodes:
      work:
        action: {{tool: python, params: {{fn: "crash_targets:slow_step", args: {{marker: "{marker}", seconds: 0.3}}}}}}
        retry: {{max_attempts: 1}}
        next: done
      done: {{type: return, output: {{ok: true}}}}
"""


def pids(path: Path) -> list[int]:
    return [int(line.split()[0]) for line in path.read_text().splitlines()] if path.exists() else []


def test_two_beats_and_a_killed_worker_fire_each_tick_of_a_day_once(
    private_redis: EmbeddedRedis, worker_env: dict[str, Any], tmp_path: Path
) -> None:
    env = {**worker_env, "GRAPHRUNNER_REDIS_URL": private_redis.url, "GRAPHRUNNER_VISIBILITY_TIMEOUT": "3"}
    workers = [WorkerProcess(f"w{i}", env, tmp_path) for i in range(2)]
    settings = settings_of(redis_url=private_redis.url)
    one, two = Cluster.connect(settings), Cluster.connect(settings)
    clock = Clock(T0 - 30)
    client = Client(cluster=one)
    try:
        graph = parse_graph(textwrap.dedent(SLOW.format(uid=uid(), marker=tmp_path)))
        info = admin_of(client, clock).add(graph, "hourly", every="1h", jitter="10m", overlap="allow_all")
        beats = [Scheduler(one, clock), Scheduler(two, clock)]
        for worker in workers:
            worker.wait_ready()
        fired: list[str] = []
        for hour in range(24):
            clock.now = T0 + hour * 3600 + 601  # past the tick and its jitter (under 10 minutes)
            with ThreadPoolExecutor(2) as pool:  # both beats at once
                outcomes = [o for done in pool.map(lambda b: b.fire_due(), beats) for o in done]
            assert [(o.tick, o.outcome) for o in outcomes] == [(T0 + hour * 3600, "fired")]
            fired += [o.run_id or "" for o in outcomes]
            if hour == 11:  # kill a worker that is in the middle of a step; restart a beat
                victim = workers[0]
                wait_for(lambda v=victim: any(v.owns(p) for p in pids(tmp_path / "calls")), 60, "w0 busy")
                victim.kill()
                workers.append(WorkerProcess("w2", env, tmp_path))
                beats[1] = Scheduler(Cluster.connect(settings), clock)
        expected = [tick_run_id(info.id, T0 + hour * 3600) for hour in range(24)]
        assert fired == expected
        for run_id in expected:
            result = client.run(run_id).wait(timeout=120)
            assert result.status == "completed", (run_id, result.error)
            assert [s["step"] for s in result.steps] == [1, 2]  # each step committed once
        assert sorted(client.schedules.runs(info.id)) == sorted(expected)
        assert len(client.list_runs(limit=100)) == 24  # nothing else was started
        assert len(pids(tmp_path / "calls")) >= 24  # the killed worker's step, if any, ran again
    finally:
        for beat in beats:
            beat.cluster.close()
        for worker in workers:
            worker.stop()


def test_schedules_on_a_redis_cluster(redis_cluster: RedisCluster, private_redis: EmbeddedRedis) -> None:
    settings = settings_of(redis_url=redis_cluster.url, broker_url=private_redis.url, queue=f"q-{uid()}")
    one, two = Cluster.connect(settings), Cluster.connect(settings)  # no worker: the runs stay running
    clock = Clock(T0 - 30)
    client = Client(cluster=one)
    try:
        admin = admin_of(client, clock)
        graph = graph_of(QUICK)
        info = admin.add(graph, "hourly", every="1h", jitter="10m")  # skip: a running run holds the key
        beats = [Scheduler(one, clock), Scheduler(two, clock)]
        seen = []
        for hour in range(3):
            clock.now = T0 + hour * 3600 + 601
            with ThreadPoolExecutor(2) as pool:
                seen += [o.outcome for done in pool.map(lambda b: b.fire_due(), beats) for o in done]
        assert seen == ["fired", "skipped", "skipped"]
        first = tick_run_id(info.id, T0)
        snap = client.run(first).snapshot()
        assert snap.schedule is not None and snap.schedule.tick == T0
        assert [r.run_id for r in client.list_runs(schedule=info.id)] == [first]
        assert admin.pause(info.id).paused and not admin.resume(info.id).paused
        admin.remove(info.id)
        with pytest.raises(ScheduleNotFound):
            admin.get(info.id)
    finally:
        one.close()
        two.close()


def test_declared_schedules_are_registered_and_runs_carry_the_capabilities_given(
    cluster: Client, clock: Clock, tmp_path: Path
) -> None:
    gid = f"t/sched-declared-{uid()}"
    (tmp_path / "plain.yaml").write_text(
        "id: t/plain\nconfig: {start: done}\nnodes: {done: {type: return}}\n"
    )
    (tmp_path / "declared.yaml").write_text(
        f"id: {gid}\nconfig:\n  start: done\n  schedules:\n    a: {{every: 1h}}\n    b: {{cron: '0 3 * * *'}}\n"
        "nodes: {done: {type: return}}\n"
    )
    client = Client(cluster=Cluster.over(replace(cluster.settings, graph_path=(tmp_path,)), cluster.store))
    admin = admin_of(client, clock)
    try:
        assert sorted(register_declared(admin)) == [f"{gid}/a", f"{gid}/b"]
        assert {admin.get(f"{gid}/a").source, admin.get(f"{gid}/b").capabilities} == {"graph", None}
        graph = parse_graph((tmp_path / "declared.yaml").read_text())
        added = admin.add(graph, "a", every=60, overlap="allow_all", capabilities=["tool:echo"])
        assert added.source == "api" and added.capabilities == ("tool:echo",)
        register_declared(admin)  # a restarted worker: the schedule added at run time is kept
        assert admin.get(f"{gid}/a").spec.every == 60
        assert fire_at(Scheduler(client.cluster, clock), clock, T0 + 61) == [("fired", None)] * 2
        snap = client.run(tick_run_id(f"{gid}/a", T0 + 60)).snapshot()
        assert snap.capabilities == ("tool:echo",)
    finally:
        for sid in (f"{gid}/a", f"{gid}/b"):
            admin.remove(sid)


def test_a_worker_fires_schedules_by_the_real_clock(cluster: Client) -> None:
    admin = admin_of(cluster)  # the in-thread worker's housekeeping fires it
    info = admin.add(graph_of(QUICK), "live", every=1, overlap="allow_all")
    try:
        wait_for(lambda: len(admin.runs(info.id)) >= 2, 30, "two ticks fired by a worker")
        for run_id in admin.runs(info.id)[:2]:
            assert cluster.run(run_id).wait(timeout=30).status == "completed"
        ticks = [o.tick for o in admin.get(info.id).recent if o.outcome == "fired"]
        assert len(ticks) == len(set(ticks)) >= 2
    finally:
        admin.remove(info.id)
