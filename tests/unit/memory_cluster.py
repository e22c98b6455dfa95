"""A whole cluster in this process over a `MemoryStore`: no Redis, no Celery worker.

`MemoryCluster` builds what a worker runs (`WorkerRuntime`, whose Celery app connects to
nothing here) and a client over the same store; its driver takes step messages off the store's
queues (`Outgoing` JSON, oldest first) and hands them to the real executor, moving due timers
onto the queues as a worker's housekeeping does, until the runs settle.
"""

from __future__ import annotations

import textwrap
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from graphrunner import parse_graph
from graphrunner.client import Client
from graphrunner.cluster.steps.executor import Handled, StepExecutor
from graphrunner.cluster.transport.messages import STEP_TASK, Outgoing, StepMessage
from graphrunner.cluster.worker.runtime import WorkerRuntime, options_of
from graphrunner.engine import RunSnapshot
from graphrunner.services import StepServices
from graphrunner.settings import Settings
from graphrunner.store.memory_store import MemoryStore

LINEAR = """
id: unit/linear
state: {trail: {type: list, default: [], reducer: append}}
config: {start: first}
nodes:
  first: {action: {tool: echo, params: {v: 1}}, assign: {trail: [first]}, next: second}
  second: {action: {tool: echo, params: {v: 2}}, assign: {trail: [second]}, next: done}
  done: {type: return, output: {trail: "${state.trail}"}}
"""

NAP = """
id: unit/nap
config: {start: nap}
nodes:
  nap: {action: {tool: sleep, params: {seconds: 3600}}, next: done}
  done: {type: return}
"""

# Nothing listens at this URL: it only satisfies the Celery app a worker builds (never connected).
# The suite grants its runs every capability (as conftest does through the environment).
SETTINGS = Settings(redis_url="redis://127.0.0.1:1/0", queue="gr-unit", default_capabilities=("*",))
ACTIVE = ("running", "pending")


def submit(mc: MemoryCluster, text: str, inputs: dict[str, Any] | None = None) -> str:
    """Submit the graph `text` (YAML) through the cluster's client; its run id."""
    return mc.client.submit(parse_graph(text, file="unit.yaml"), inputs).id


def statuses(mc: MemoryCluster, run_id: str) -> list[str]:
    """The statuses of the run's transcript records."""
    return [r["status"] for r in mc.records(run_id)]


def write(folder: Path, name: str, text: str) -> Path:
    """Write a dedented graph file and return its path."""
    path = folder / name
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


CHILD = """
id: unit/child
config: {start: shout}
nodes:
  shout: {action: {tool: echo, params: {text: HI}}, next: end}
  end: {type: return, output: {heard: HI}}
"""

PARENT = """
id: unit/parent
state: {heard: any}
config: {start: greet}
nodes:
  greet: {action: {tool: echo, params: {text: hi}}, next: sub}
  sub: {type: subgraph, graph: unit/child, assign: {heard: "${result.heard}"}, next: done}
  done: {type: return, output: {heard: "${state.heard}"}}
"""


def child_graphs(folder: Path) -> Path:
    """A parent graph whose second node (step 2) runs a child graph of two steps; its file."""
    write(folder, "child.yaml", CHILD)
    return write(folder, "parent.yaml", PARENT)


class MemoryCluster:
    """A worker's executor and a client, over one `MemoryStore`, and a driver for their messages."""

    def __init__(self, store: MemoryStore | None = None, **settings: Any) -> None:
        self.store = store or MemoryStore()
        self.settings = replace(SETTINGS, **settings)
        self.runtime = WorkerRuntime(self.settings, store=self.store, deployment_hooks=())
        self.cluster = self.runtime.cluster
        self.executor = self.runtime.executor
        self.client = Client(cluster=self.cluster)
        self.taken: list[StepMessage] = []  # every message the driver took, in order

    def with_services(self, services: StepServices) -> StepExecutor:
        """An executor of this cluster with other step services (as `WorkerRuntime` builds one)."""
        return StepExecutor(
            self.cluster,
            services,
            heartbeats=self.runtime.heartbeats,
            options=options_of(self.settings),
            loops=self.runtime.loops,
        )

    def close(self) -> None:
        self.runtime.close()

    # -- messages ------------------------------------------------------------------------------------

    def waiting(self) -> list[StepMessage]:
        """The step messages on the queues, oldest first."""
        return [
            _step_message(body)
            for queue in sorted(self.store.queues)
            for body in self.store.queues[queue][::-1]
        ]

    def take(self) -> StepMessage | None:
        """Take the oldest message off the first queue that has one (None: every queue is empty)."""
        for queue in sorted(self.store.queues):
            if self.store.queues[queue]:
                msg = _step_message(self.store.queues[queue].pop())
                self.taken.append(msg)
                return msg
        return None

    def pump(self) -> int:
        """Move the timers that are due onto their queues (a worker's housekeeping)."""
        return self.cluster.publisher.pump(time.time())

    def step(self, executor: StepExecutor | None = None) -> Handled:
        """Take the oldest message and execute it; there must be one."""
        msg = self.take()
        assert msg is not None, "no message waiting"
        return (executor or self.executor).execute(msg)

    def drive(self, until: Callable[[], bool] | None = None, timeout: float = 30.0) -> list[Handled]:
        """Execute messages (and due timers) until `until` holds, by default until no run is active
        and no message waits; fails after a generous `timeout` instead of spinning forever."""
        settled = until or self._settled
        deadline, handled = time.monotonic() + timeout, []
        while not settled():
            assert time.monotonic() < deadline, f"runs did not settle within {timeout}s: {self._active()}"
            self.pump()
            msg = self.take()
            if msg is None:
                time.sleep(0.01)  # a timer that is not due yet
                continue
            handled.append(self.executor.execute(msg))
        return handled

    def _active(self) -> list[str]:
        return [f"{r.run_id} {r.status}" for r in self.store.list_runs(limit=1000) if r.status in ACTIVE]

    def _settled(self) -> bool:
        return not self._active() and not any(self.store.queues.values())

    # -- runs ----------------------------------------------------------------------------------------

    def snap(self, run_id: str) -> RunSnapshot:
        """The run's snapshot with its path."""
        snap = self.store.load_run(run_id, with_path=True)
        assert snap is not None, f"no run {run_id}"
        return snap

    def records(self, run_id: str) -> list[dict[str, Any]]:
        """The run's transcript records."""
        return [e.record for e in self.store.steps(run_id)]


def _step_message(body: str) -> StepMessage:
    out = Outgoing.model_validate_json(body)
    assert out.task == STEP_TASK, out
    return StepMessage.parse(list(out.args), {})
