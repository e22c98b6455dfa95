"""`RunHandle.wait` on a real cluster (issue 27): the client sees a run settle as the commit that
settles it lands (it blocks once, woken by that commit, with the reads of the result queued
behind the block), whatever way the run settles.

The Redis commands are taken from MONITOR on the session's Redis; those of a client of the test's
own, used by one thread, are told apart by the port of its connection.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import redis
from support import uid, wait_for, write

from graphrunner import streaming
from graphrunner.client import Client, RunHandle
from graphrunner.embedded import EmbeddedRedis
from graphrunner.errors import WaitTimeout
from graphrunner.results import RunResult

WAIT_S = 60
CONNECTION = frozenset({"HELLO", "PING", "CLIENT", "SELECT"})
THREE = """
id: wait/three-{uid}
state: {{n: {{type: integer, default: 0}}}}
config: {{start: gate}}
nodes:
  gate: {{type: gate, assign: {{n: 1}}, next: echo}}
  echo: {{action: {{tool: echo, params: {{n: 2}}}}, assign: {{n: "${{result.n}}"}}, next: done}}
  done: {{type: return, output: {{n: "${{state.n}}"}}}}
"""
NAP = """
id: wait/nap-{uid}
config: {{start: nap}}
nodes:
  nap: {{action: {{tool: sleep, params: {{seconds: 600}}}}, next: done}}
  done: {{type: return}}
"""
FAILING = """
id: wait/failing-{uid}
config: {{start: boom}}
nodes:
  boom: {{action: {{tool: fail, params: {{message: no}}}}, retry: {{max_attempts: 1}}, next: done}}
  done: {{type: return}}
"""
PAUSING = """
id: wait/pausing-{uid}
config: {{start: ask}}
nodes:
  ask: {{type: pause, next: done}}
  done: {{type: return}}
"""


def graph_file(tmp_path: Path, text: str) -> str:
    return str(write(tmp_path, f"{uid()}.yaml", text.format(uid=uid())))


@contextmanager
def monitored(url: str) -> Iterator[list[dict[str, Any]]]:
    """The commands the Redis at `url` runs while the block runs (MONITOR), in order."""
    seen: list[dict[str, Any]] = []
    marker = f"ECHO end-of-test-{uid()}"
    server = redis.Redis.from_url(url, decode_responses=True)
    with server.monitor() as monitor:

        def listen() -> None:
            for command in monitor.listen():
                if command["command"] == marker:
                    return
                seen.append(command)

        listener = threading.Thread(target=listen, daemon=True)
        listener.start()
        try:
            yield seen
        finally:
            redis.Redis.from_url(url).echo(marker.split(" ", 1)[1])
            listener.join(WAIT_S)
    server.close()


def port_of(client: Client) -> str:
    """The port of the connection a client used by one thread at a time keeps using."""
    return str(client.store.redis.client_info()["addr"]).rsplit(":", 1)[1]


def sent(seen: list[dict[str, Any]], port: str, after: int = -1) -> list[str]:
    """The names of the commands the connection at `port` sent after command `after`, but for
    what any connection sends (its handshake, health checks)."""
    names = [c["command"].split()[0] for c in seen[after + 1 :] if c["client_port"] == port]
    return [n for n in names if n not in CONNECTION]


def final_commit(seen: list[dict[str, Any]], run_id: str, status: str) -> int:
    """Where the commit that settled the run wrote its transcript record, saying `status`."""
    said = [
        i
        for i, c in enumerate(seen)
        if c["client_type"] == "lua"
        and c["command"].startswith(f"XADD gr:run:{{{run_id}}}:steps")
        and c["command"].endswith(f" s {status}")
    ]
    assert said, f"no transcript record of run {run_id} says {status}"
    return said[-1]


def waiting(handle: RunHandle) -> tuple[threading.Thread, list[RunResult | BaseException]]:
    """`handle.wait()` in a thread; the list gets its result (or error)."""
    out: list[RunResult | BaseException] = []

    def wait() -> None:
        try:
            out.append(handle.wait(timeout=WAIT_S))
        except BaseException as exc:  # handed to the test
            out.append(exc)

    thread = threading.Thread(target=wait, daemon=True)
    thread.start()
    return thread, out


@pytest.fixture
def long_slices(monkeypatch: pytest.MonkeyPatch) -> None:
    """A wait blocks 10 s before it reads the status on its own (under the sockets' 15 s), so what
    a test counts does not depend on how fast a loaded machine takes the steps."""
    monkeypatch.setattr(streaming, "WAIT_SLICE_MS", 10_000)


RESULT = ["HMGET", "LRANGE", "XRANGE"]  # snapshot, path and transcript: one pipelined round trip


@pytest.mark.usefixtures("long_slices")
def test_a_run_that_ends_is_seen_at_its_final_commit(
    cluster: Client, redis_server: EmbeddedRedis, tmp_path: Path
) -> None:
    """The client counts itself in and reads the status (EVALSHA), then blocks once (BLPOP, not
    a read per step) with the reads of the result queued behind in the same round trip: after
    the final commit, Redis runs those reads and nothing else of the client's."""
    graph = graph_file(tmp_path, THREE)
    with Client(redis_server.url) as client:
        client.submit(graph).wait(timeout=WAIT_S)  # the graph is stored and the worker warm
        with monitored(redis_server.url) as seen:
            handle = client.submit(graph)
            result = handle.wait(timeout=WAIT_S)
        port = port_of(client)
    assert (result.status, result.output, result.path) == ("completed", {"n": 2}, ["gate", "echo", "done"])
    assert [r["node"] for r in result.steps] == ["gate", "echo", "done"]
    assert [e.status for e in cluster.store.steps(handle.id)] == [None, None, "completed"]
    # a run that ended before its wait began (a loaded machine) is read at once, without a block
    assert sent(seen, port) in (["EVALSHA", "EVALSHA", "BLPOP", *RESULT], ["EVALSHA", "EVALSHA", *RESULT])
    after = sent(seen, port, final_commit(seen, handle.id, "completed"))
    assert after in (RESULT, ["BLPOP", *RESULT], ["EVALSHA", *RESULT])  # the last two: a late client


@pytest.mark.usefixtures("long_slices")
def test_waiting_clients_see_a_cancel_at_its_commit(
    cluster: Client, redis_server: EmbeddedRedis, tmp_path: Path
) -> None:
    """Two clients blocked on a sleeping run each wake at the cancel's commit and read only the
    result after it."""
    run_id = cluster.submit(graph_file(tmp_path, NAP)).id
    wait_for(lambda: bool(cluster.store.steps(run_id)), WAIT_S, "the sleep to start")
    with Client(redis_server.url) as one, Client(redis_server.url) as two:
        with monitored(redis_server.url) as seen:
            waits = [waiting(RunHandle(client, run_id)) for client in (one, two)]
            wait_for(
                lambda: [c["command"][:5] for c in seen].count("BLPOP") == 2, WAIT_S, "two blocked waits"
            )
            cluster.cancel(run_id)
            for thread, _ in waits:
                thread.join(WAIT_S)
        ports = [port_of(client) for client in (one, two)]
    for (_, [result]), port in zip(waits, ports, strict=True):
        assert isinstance(result, RunResult) and result.status == "cancelled"
        assert [r["status"] for r in result.steps] == ["sleeping", "cancelled"]
        assert sent(seen, port) == ["EVALSHA", "BLPOP", *RESULT]
        assert sent(seen, port, final_commit(seen, run_id, "cancelled")) == RESULT


def test_wait_returns_for_every_way_a_run_settles(cluster: Client, tmp_path: Path) -> None:
    """Failed, paused, resumed and finished before the wait; and a wait that runs out of time,
    which counts its client out of the run's waiters."""
    failed = cluster.submit(graph_file(tmp_path, FAILING)).wait(timeout=WAIT_S)
    assert failed.status == "failed" and failed.error is not None and failed.error.node == "boom"
    paused = cluster.submit(graph_file(tmp_path, PAUSING))
    assert paused.wait(timeout=WAIT_S).status == "paused"
    assert cluster.resume(paused.id).wait(timeout=WAIT_S).status == "completed"
    assert [r["status"] for r in paused.wait(timeout=WAIT_S).steps] == ["paused", "resumed", "end"]
    napping = cluster.submit(graph_file(tmp_path, NAP))
    with pytest.raises(WaitTimeout, match=r"did not finish within 0\.2s"):
        napping.wait(timeout=0.2)
    assert cluster.store.redis.get(cluster.store.keys.waiters(napping.id)) == "0"
    cluster.cancel(napping.id)
    assert napping.wait(timeout=WAIT_S).status == "cancelled"
