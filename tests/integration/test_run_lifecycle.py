"""Run lifecycle on the cluster: cancel, resume (failed, cancelled, paused, stalled, --upgrade),
poison steps, concurrency keys and idempotent submits, through the client and the CLI."""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from support import lines, settings_of, uid, wait_for, write
from worker_procs import WorkerProcess, dedicated_worker

from graphrunner import load_graph
from graphrunner.cli import main
from graphrunner.client import Client
from graphrunner.embedded import EmbeddedRedis
from graphrunner.errors import (
    CancelError,
    InvalidRunId,
    ResumeError,
    RunNotFound,
    RunRefused,
    StateValidationError,
)


def statuses(client: Client, run_id: str) -> list[str]:
    return [r["status"] for r in client.run(run_id).steps()]


def approval_graph(folder: Path, version: int = 1, name: str = "approval.yaml", graph_id: str = "") -> Path:
    """start -> ask (pause) -> finish; `finish` stamps `version` so a re-pin shows."""
    return write(
        folder,
        name,
        f"""
        id: {graph_id or f"life/approval-{uid()}"}
        state:
          approved: {{type: boolean, default: false}}
          version: {{type: integer, default: 0}}
        config: {{start: ask}}
        nodes:
          ask: {{type: pause, next: finish}}
          finish:
            type: return
            assign: {{version: {version}}}
            output: {{approved: "${{state.approved}}", version: {version}}}
        """,
    )


# -- cancel ---------------------------------------------------------------------------------------------


def test_cancel_during_a_parallel_foreach_skips_the_items_not_yet_started(
    cluster: Client, tmp_path: Path
) -> None:
    path = write(
        tmp_path,
        "fan.yaml",
        f"""
        id: life/fan-{uid()}
        inputs: {{xs: {{type: list}}}}
        state: {{out: {{type: list, default: [], reducer: append}}}}
        config: {{start: fan}}
        nodes:
          fan:
            type: foreach
            over: "${{inputs.xs}}"
            as: x
            parallel: true
            action: {{tool: python, params: {{fn: "foreach_targets:marked", args: {{value: "${{x}}", folder: "{tmp_path}", seconds: 0.2}}}}}}
            collect: out
            next: done
          done: {{type: return}}
        """,
    )
    run = cluster.submit(path, {"xs": list(range(40))})
    wait_for(lambda: len(lines(tmp_path / "calls")) >= 3, 30, "a few items to run")
    assert run.cancel().status() == "cancelled"
    time.sleep(1.5)  # items already taken finish; the rest are skipped
    ran = len(lines(tmp_path / "calls"))
    time.sleep(1.0)
    assert len(lines(tmp_path / "calls")) == ran < 40  # nothing more started
    assert run.status() == "cancelled"
    assert run.state()["out"] == []  # the foreach never committed
    [record] = [r for r in run.steps() if r["status"] == "cancelled"]
    assert record["from"] == "running" and record["node"] == "fan"
    with pytest.raises(CancelError, match="already finished"):
        run.cancel()


def test_cancel_bad_input(cluster: Client, tmp_path: Path) -> None:
    with pytest.raises(RunNotFound):
        cluster.cancel(f"never-{uid()}")
    with pytest.raises(InvalidRunId):
        cluster.cancel("no spaces allowed")
    done = cluster.submit(approval_graph(tmp_path))
    assert done.wait(timeout=30).status == "paused"
    cluster.resume(done.id, {"approved": True}).wait(timeout=30)
    before = done.steps()
    with pytest.raises(CancelError, match="completed"):
        cluster.cancel(done.id)
    assert done.status() == "completed" and done.steps() == before


def test_a_cancelled_run_resumes_at_its_node_with_a_patch(cluster: Client, tmp_path: Path) -> None:
    run = cluster.submit(approval_graph(tmp_path))
    assert run.wait(timeout=30).status == "paused"
    cluster.cancel(run.id)
    assert run.status() == "cancelled"
    result = cluster.resume(run.id, {"approved": True}).wait(timeout=30)
    assert result.status == "completed" and result.output == {"approved": True, "version": 1}
    assert statuses(cluster, run.id)[-3:] == ["cancelled", "resumed", "end"]


def test_cancelling_a_parent_cancels_its_active_child(cluster: Client, tmp_path: Path) -> None:
    child = approval_graph(tmp_path, name="child.yaml")
    child_id = load_graph(child).id
    parent = write(
        tmp_path,
        "parent.yaml",
        f"""
        id: life/parent-{uid()}
        config: {{start: sub}}
        nodes:
          sub: {{type: subgraph, graph: {child_id}, next: done}}
          done: {{type: return}}
        """,
    )
    run = cluster.submit(parent)
    child_run = f"{run.id}.1"

    def child_paused() -> bool:
        try:
            return cluster.run(child_run).status() == "paused"
        except RunNotFound:
            return False

    wait_for(child_paused, 30, "the child run to pause")
    cluster.cancel(run.id)
    assert run.status() == "cancelled"
    assert cluster.run(child_run).status() == "cancelled"
    assert "its parent run" in cluster.run(child_run).steps()[-1]["reason"]


# -- resume ---------------------------------------------------------------------------------------------


def test_resume_bad_input_changes_nothing(cluster: Client, tmp_path: Path) -> None:
    with pytest.raises(RunNotFound):
        cluster.resume(f"never-{uid()}")
    with pytest.raises(InvalidRunId):
        cluster.resume("../etc")
    run = cluster.submit(approval_graph(tmp_path))
    assert run.wait(timeout=30).status == "paused"
    before = (run.snapshot(), run.steps())
    with pytest.raises(StateValidationError, match="approved"):
        cluster.resume(run.id, {"approved": "yes please"})
    with pytest.raises(ResumeError, match="mapping"):
        cluster.resume(run.id, ["approved"])  # type: ignore[arg-type]
    assert (run.snapshot(), run.steps()) == before
    cluster.resume(run.id, {"approved": True}).wait(timeout=30)
    with pytest.raises(ResumeError, match="completed"):
        cluster.resume(run.id)


def test_a_failed_run_resumes_at_the_failing_node(cluster: Client, tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "strict.yaml",
        f"""
        id: life/strict-{uid()}
        state: {{ok: {{type: boolean, default: false}}}}
        config: {{start: check}}
        nodes:
          check:
            type: gate
            next: [{{to: done, when: "state.ok"}}, {{to: boom}}]
          boom: {{action: {{tool: fail, params: {{message: not ok}}}}, next: done}}
          done: {{type: return, output: {{ok: "${{state.ok}}"}}}}
        """,
    )
    run = cluster.submit(path)
    failed = run.wait(timeout=30)
    assert failed.status == "failed" and failed.error is not None and failed.error.node == "boom"
    result = cluster.resume(run.id, {"ok": True}).wait(timeout=30)
    assert result.status == "failed"  # `boom` runs again at its step count, and fails again
    assert result.step_count == failed.step_count + 1


def test_editing_the_graph_file_never_changes_an_in_flight_run_and_upgrade_re_pins(
    cluster: Client, tmp_path: Path
) -> None:
    graph_id = f"life/edited-{uid()}"
    path = approval_graph(tmp_path, 1, graph_id=graph_id)
    pinned, upgraded = cluster.submit(path), cluster.submit(path)
    assert pinned.wait(timeout=30).status == upgraded.wait(timeout=30).status == "paused"
    approval_graph(tmp_path, 2, graph_id=graph_id)  # the file is edited while both runs are in flight
    assert cluster.resume(pinned.id).wait(timeout=30).output == {"approved": False, "version": 1}
    result = cluster.resume(upgraded.id, upgrade=path).wait(timeout=30)
    assert result.output == {"approved": False, "version": 2}
    assert upgraded.steps()[-2]["graph_hash"] == load_graph(path).content_hash


def test_upgrade_refuses_a_version_without_the_runs_node(cluster: Client, tmp_path: Path) -> None:
    graph_id = f"life/renamed-{uid()}"
    path = approval_graph(tmp_path, 1, graph_id=graph_id)
    run = cluster.submit(path)
    assert run.wait(timeout=30).status == "paused"
    before = run.snapshot()
    renamed = path.read_text(encoding="utf-8").replace("ask", "confirm")
    path.write_text(renamed, encoding="utf-8")
    with pytest.raises(ResumeError, match="'ask' is not in the new version"):
        cluster.resume(run.id, upgrade=path)
    other = approval_graph(tmp_path, 1, name="other.yaml")
    with pytest.raises(ResumeError, match="cannot upgrade"):
        cluster.resume(run.id, upgrade=other)
    assert run.snapshot() == before


def test_a_running_run_is_resumed_only_when_stalled(
    redis_server: EmbeddedRedis, worker_env: dict[str, Any], tmp_path: Path
) -> None:
    """A worker SIGKILLed during a step leaves its run `running`; once stalled it resumes."""
    path = write(
        tmp_path,
        "slow.yaml",
        f"""
        id: life/slow-{uid()}
        state: {{pid: {{type: integer, default: 0}}}}
        config: {{start: slow}}
        nodes:
          slow:
            action: {{tool: python, params: {{fn: "crash_targets:slow_step", args: {{marker: "{tmp_path}", seconds: 60}}}}}}
            assign: {{pid: "${{result.pid}}"}}
            next: done
          done: {{type: return}}
        """,
    )
    queue = f"q-{uid()}"
    env = {**worker_env, "GRAPHRUNNER_QUEUE": queue}
    settings = settings_of(redis_url=redis_server.url, queue=queue, stall_after=2)
    client = Client(settings=settings)
    victim = WorkerProcess(f"victim-{uid()}", env, tmp_path)
    try:
        victim.wait_ready()
        run = client.submit(path, capabilities=["tool:python:crash_targets.*"])
        wait_for(lambda: len(lines(tmp_path / "calls")) == 1, 30, "the slow step to start")
        with pytest.raises(ResumeError, match="not stalled"):
            client.resume(run.id)  # its worker is alive and beating
        victim.kill()
        time.sleep(2.5)
        assert run.status() == "running"
        client.resume(run.id)
        assert run.steps()[-1]["status"] == "resumed"
        rescuer = WorkerProcess(f"rescuer-{uid()}", env, tmp_path)
        try:
            rescuer.wait_ready()
            wait_for(lambda: len(lines(tmp_path / "calls")) == 2, 30, "the step to run again")
        finally:
            rescuer.kill()
    finally:
        victim.kill()
        client.close()


# -- stalled runs and poison steps ---------------------------------------------------------------------


def test_the_sweeper_sends_a_lost_step_again(cluster: Client, tmp_path: Path) -> None:
    run = cluster.submit(approval_graph(tmp_path))
    assert run.wait(timeout=30).status == "paused"
    # a resume whose step message is lost: sent to a queue no worker reads, and taken off it
    nowhere = f"nowhere-{uid()}"
    lost = Client(settings=replace(cluster.settings, queue=nowhere, stall_after=1))
    sweeper = Client(settings=replace(cluster.settings, stall_after=1))
    try:
        lost.resume(run.id, {"approved": True})
        assert lost.store.redis.rpop(nowhere) is not None  # type: ignore[attr-defined]
        time.sleep(1.5)  # past the run's progress deadline: a sweeper pass looks at it
        sweeper.sweep()  # (or the worker's own pass, whichever comes first: one of them repairs)
        assert run.wait(timeout=30).status == "completed"
        swept = [r for r in run.steps() if r["status"] == "swept"]
        assert [r["action"] for r in swept] == ["resent_step"]
    finally:
        lost.close()
        sweeper.close()


def test_a_poison_step_fails_its_run_after_the_redelivery_cap(
    redis_server: EmbeddedRedis, worker_env: dict[str, Any], tmp_path: Path
) -> None:
    path = write(
        tmp_path,
        "poison.yaml",
        f"""
        id: life/poison-{uid()}
        config: {{start: boom}}
        nodes:
          boom:
            action: {{tool: python, params: {{fn: "crash_targets:kill_self", args: {{marker: "{tmp_path}"}}}}}}
            next: done
          done: {{type: return}}
        """,
    )
    with dedicated_worker(redis_server, worker_env, tmp_path, GRAPHRUNNER_MAX_REDELIVERIES="2") as client:
        result = client.submit(path).wait(timeout=60)
    assert result.status == "failed"
    assert result.error is not None and result.error.type == "limit_exceeded"
    assert "redelivered 3 times" in result.error.message and "'boom'" in result.error.message
    assert len(lines(tmp_path / "attempts")) == 3  # the first delivery and two redeliveries


# -- concurrency keys and idempotent submits ------------------------------------------------------------


def test_concurrent_submits_with_one_run_id_start_one_run(cluster: Client, tmp_path: Path) -> None:
    path, run_id = approval_graph(tmp_path), f"once-{uid()}"
    graph = load_graph(path)
    handles: list[str] = []

    def submit() -> None:
        handles.append(cluster.submit(graph, run_id=run_id).id)

    threads = [threading.Thread(target=submit) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert handles == [run_id] * 8
    assert cluster.run(run_id).wait(timeout=30).status == "paused"
    assert statuses(cluster, run_id) == ["paused"]  # one first step, not eight


def test_a_concurrency_key_admits_one_run_at_a_time(cluster: Client, tmp_path: Path) -> None:
    path, key = approval_graph(tmp_path), f"tenant-{uid()}"
    first = cluster.submit(path, concurrency_key=key)
    assert first.wait(timeout=30).status == "paused"  # paused still holds the key: it is not finished
    second = cluster.submit(path, concurrency_key=key)
    third = cluster.submit(path, concurrency_key=key)
    assert second.status() == third.status() == "pending"
    with pytest.raises(RunRefused, match=first.id):
        cluster.submit(path, concurrency_key=key, when_busy="refuse")
    cluster.cancel(third.id)  # a waiting run can be cancelled: it leaves the queue
    cluster.resume(first.id, {"approved": True})
    assert first.wait(timeout=30).status == "completed"
    assert second.wait(timeout=30).status == "paused"  # admitted when the first finished
    assert "admitted" in statuses(cluster, second.id)
    assert third.status() == "cancelled"
    cluster.cancel(second.id)
    assert cluster.store.key_holder(key) is None  # nobody waits: the key is free
    assert cluster.submit(path, concurrency_key=key, when_busy="refuse").wait(timeout=30).status == "paused"


def test_concurrency_key_bad_input(cluster: Client, tmp_path: Path) -> None:
    path = approval_graph(tmp_path)
    with pytest.raises(InvalidRunId, match="concurrency key"):
        cluster.submit(path, concurrency_key="has spaces")
    with pytest.raises(Exception, match="when_busy"):
        cluster.submit(path, concurrency_key="k", when_busy="maybe")


# -- the CLI ---------------------------------------------------------------------------------------------


def cli(redis_server: EmbeddedRedis, *args: str) -> Result:
    env = {"GRAPHRUNNER_REDIS_URL": redis_server.url, "GRAPHRUNNER_QUEUE": None, "GRAPHRUNNER_QUIET": "1"}
    return CliRunner().invoke(main, list(args), env=env)


def test_cli_cancel_resume_and_sweep(cluster: Client, redis_server: EmbeddedRedis, tmp_path: Path) -> None:
    run = cluster.submit(approval_graph(tmp_path))
    assert run.wait(timeout=30).status == "paused"
    cancelled = cli(redis_server, "cancel", run.id)
    assert cancelled.exit_code == 0 and f"run {run.id} cancelled" in cancelled.output
    again = cli(redis_server, "cancel", run.id)
    assert again.exit_code == 1 and "already finished" in again.output + again.stderr
    unknown = cli(redis_server, "cancel", f"never-{uid()}")
    assert unknown.exit_code == 1 and "no run with id" in unknown.output + unknown.stderr
    resumed = cli(redis_server, "resume", run.id, "--state", '{"approved": true}', "--wait", "--json")
    assert resumed.exit_code == 0, resumed.output
    assert '"status": "completed"' in resumed.output
    swept = cli(redis_server, "sweep", "--json")
    assert swept.exit_code == 0 and '"checked"' in swept.output
    assert "cancelled (cancelled by request)" in cli(redis_server, "steps", run.id).output
