"""Kids that end close together wake their parent once (issue 27).

Each kid's last commit adds the kid to its parent step's ended set and sends the parent's
wake-up only when none is pending; the parent takes in every kid of the set at once, lets go of
its wake-up after its commit, and wakes itself again for kids that ended meanwhile. The first
tests take the messages off a private Redis one by one and hand them to a real executor (no
worker: the order is the test's); the last runs a wide fan-out on the session's worker.
"""

from __future__ import annotations

import base64
import json
import textwrap
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support import wait_for

from graphrunner import Graph, load_graph
from graphrunner.client import Client
from graphrunner.cluster.steps.executor import Handled, StepExecutor
from graphrunner.cluster.transport.messages import StepMessage
from graphrunner.cluster.worker.runtime import WorkerRuntime
from graphrunner.embedded import EmbeddedRedis
from graphrunner.settings import Settings

KID = """
id: wake-kid
inputs:
  n: {type: integer, required: true}
state:
  i: {type: integer, default: 0}
config:
  start: set
nodes:
  set:
    type: gate
    assign: {i: "${inputs.n}"}
    next: $end
"""

PARENT = """
id: wake-parent
inputs:
  items: {type: list, required: true}
state:
  results: {type: list, default: []}
config:
  start: fan_out
nodes:
  fan_out:
    type: foreach
    over: "${inputs.items}"
    parallel: true
    max_concurrency: WINDOW
    graph: wake-kid
    inputs: {n: "${item}"}
    collect: results
    next: $end
"""


def graph(tmp_path: Path, window: int) -> Graph:
    (tmp_path / "wake-kid.yaml").write_text(textwrap.dedent(KID))
    path = tmp_path / "wake-parent.yaml"
    path.write_text(textwrap.dedent(PARENT).replace("WINDOW", str(window)))
    return load_graph(path, settings=Settings(graph_path=(tmp_path,)))


class Driver:
    """A client and an executor over a private Redis; nothing consumes the queue but `step`."""

    def __init__(self, redis: EmbeddedRedis) -> None:
        self.settings = Settings.from_env().with_redis(redis.url)
        self.client, self.runtime = Client(settings=self.settings), WorkerRuntime(self.settings)
        self.store = self.client.store
        self.broker = self.store.redis  # type: ignore[attr-defined]

    def queued(self) -> list[StepMessage]:
        """The step messages on the queue, oldest first."""
        return [_message(raw) for raw in reversed(self.broker.lrange(self.settings.queue, 0, -1))]

    def step(self, executor: StepExecutor | None = None) -> tuple[StepMessage, Handled]:
        """Take the oldest message off the queue and execute it."""
        raw = self.broker.rpop(self.settings.queue)
        assert raw is not None, "no message waiting"
        msg = _message(raw)
        return msg, (executor or self.runtime.executor).execute(msg)

    def wakes(self) -> list[StepMessage]:
        """The parent wake-ups on the queue (step messages that name the kid that ended)."""
        return [m for m in self.queued() if m.child]

    def close(self) -> None:
        self.runtime.close()
        self.client.close()


def _message(raw: str) -> StepMessage:
    args, kwargs, _ = json.loads(base64.b64decode(json.loads(raw)["body"]))
    return StepMessage.parse(args, kwargs)


@pytest.fixture
def driver(private_redis: EmbeddedRedis) -> Iterator[Driver]:
    made = Driver(private_redis)
    yield made
    made.close()


def test_kids_that_end_together_wake_their_parent_once(driver: Driver, tmp_path: Path) -> None:
    run = driver.client.submit(graph(tmp_path, window=6), {"items": list(range(6))})
    assert driver.step()[1].outcome == "suspended"  # the parent starts its six kids
    assert [m.run_id for m in driver.queued()] == [f"{run.id}.1.{i}" for i in range(6)]
    for _ in range(6):
        assert driver.step()[1].outcome == "committed"  # a kid ends
    [wake] = driver.queued()  # the first kid's wake-up alone: the others joined the ended set
    assert (wake.run_id, wake.child) == (run.id, f"{run.id}.1.0")
    assert driver.store.ended(run.id, 0) == sorted(f"{run.id}.1.{i}" for i in range(6))
    assert driver.step()[1].outcome == "committed"  # every kid taken in, the node done
    assert driver.queued() == [] and driver.store.ended(run.id, 0) == []
    result = run.result()
    assert (result.status, result.state["results"]) == ("completed", [{"i": i} for i in range(6)])


def test_a_kid_that_ends_while_its_parent_runs_wakes_it_once_the_parent_lets_go(
    driver: Driver, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = driver.client.submit(graph(tmp_path, window=3), {"items": [0, 1, 2]})
    driver.step()  # three kids
    driver.step()  # kid 0 ends: the wake-up is sent
    read = driver.runtime.cluster.store.ended

    def ended_then_kid_1(run_id: str, step: int) -> list[str]:
        found = read(run_id, step)  # the parent has read the set; kid 1 ends before it commits
        monkeypatch.setattr(driver.runtime.cluster.store, "ended", read)
        kid = threading.Thread(target=driver.step)  # on a thread of its own, as another worker's
        kid.start()
        kid.join(timeout=60)
        return found

    assert [m.run_id for m in driver.queued()] == [f"{run.id}.1.1", f"{run.id}.1.2", run.id]
    driver.broker.lmove(driver.settings.queue, driver.settings.queue, "LEFT", "RIGHT")  # the wake-up first
    monkeypatch.setattr(driver.runtime.cluster.store, "ended", ended_then_kid_1)
    assert driver.step()[1].outcome == "suspended"  # kid 0 taken in; kid 1 sent nothing meanwhile
    assert [(m.run_id, m.child) for m in driver.queued()] == [
        (f"{run.id}.1.2", ""),
        (run.id, f"{run.id}.1.0"),  # the parent woke itself for kid 1 once it let go
    ]
    assert driver.store.ended(run.id, 0) == [f"{run.id}.1.1"]
    driver.step()  # kid 2 ends: a wake-up is pending, nothing is sent
    assert len(driver.queued()) == 1
    assert driver.step()[1].outcome == "committed"  # kids 1 and 2 at once
    assert driver.queued() == []
    assert run.result().state["results"] == [{"i": 0}, {"i": 1}, {"i": 2}]


def test_a_wake_up_fenced_out_leaves_its_kids_for_the_next_and_reads_no_more(
    driver: Driver, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = driver.client.submit(graph(tmp_path, window=2), {"items": [0, 1]})
    for _ in range(3):
        driver.step()  # two kids, which end: one wake-up
    executor, store = driver.runtime.executor, driver.runtime.cluster.store
    commit, load = executor._commit, store.load_run
    loads: list[str] = []
    monkeypatch.setattr(executor, "_commit", lambda *a, **k: None)  # another delivery committed first
    monkeypatch.setattr(store, "load_run", _counting(load, loads))
    assert driver.step()[1].outcome == "duplicate"
    assert loads == [run.id]  # the executor's load of the parent: the loser read nothing more of it
    monkeypatch.setattr(executor, "_commit", commit)
    [again] = driver.queued()  # sent once more, gathered: its kids are still in the ended set
    assert again.run_id == run.id and driver.store.ended(run.id, 0) == [f"{run.id}.1.0", f"{run.id}.1.1"]
    assert driver.step()[1].outcome == "committed"
    assert run.result().state["results"] == [{"i": 0}, {"i": 1}]


def _counting(load: Callable[..., Any], seen: list[str]) -> Callable[..., Any]:
    def counted(run_id: str, *args: Any, **kwargs: Any) -> Any:
        seen.append(run_id)
        return load(run_id, *args, **kwargs)

    return counted


def test_a_wide_fan_out_keeps_its_window_and_leaves_no_ended_set(cluster: Client, tmp_path: Path) -> None:
    window, items = 8, 150
    handle = cluster.submit(graph(tmp_path, window), {"items": list(range(items))})
    widest = 0

    def settled() -> bool:
        nonlocal widest
        snap = cluster.store.load_run(handle.id)
        assert snap is not None
        widest = max(widest, len(getattr(snap.wait, "open", ())))
        return snap.status.finished

    wait_for(settled, 120, "the fan-out to finish")
    result = handle.result()
    assert (result.status, result.state["results"]) == ("completed", [{"i": i} for i in range(items)])
    assert 0 < widest <= window
    assert cluster.store.ended(handle.id, 0) == []
    kids = cluster.store.load_runs([f"{handle.id}.1.{i}" for i in range(items)])
    assert all(k is not None and k.status.value == "completed" for k in kids)
