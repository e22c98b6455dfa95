"""A step's message is acknowledged by the commit that takes the step (a Redis broker on the store's Redis).

kombu keeps a delivered message in the hash `unacked` and the sorted set `unacked_index` until
it is acknowledged. The commit script removes both in its own write; the worker's main process
then only forgets the message, without the MULTI/ZREM/HDEL/EXEC round trip it otherwise makes
per message. Messages whose handling commits nothing (a stale duplicate) are acknowledged by
the main process as before.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from store_contract import snapshot
from support import multi_calls, wait_for
from worker_procs import WorkerProcess, process_env

from graphrunner.client import Client
from graphrunner.cluster.runs.context import Cluster
from graphrunner.cluster.transport.acks import ACKED, Delivery, acked_outcome, was_acked
from graphrunner.cluster.transport.broker import UNACKED, UNACKED_INDEX
from graphrunner.embedded import EmbeddedRedis
from graphrunner.results import RunResult
from graphrunner.settings import Settings
from graphrunner.store import Ack, Fence, RedisStore

STEPS = 12
LOOP = f"""
id: ack-loop
state:
  n: {{type: integer, default: 0}}
config:
  start: tick
nodes:
  tick:
    type: gate
    assign: {{n: "${{state.n + 1}}"}}
    next:
      - to: tick
        when: state.n < {STEPS}
      - to: $end
"""


def held(store: RedisStore, tag: str) -> tuple[bool, bool]:
    """Whether kombu's records of unacknowledged messages hold `tag`: (the hash, the index)."""
    return store.redis.hexists(UNACKED, tag), store.redis.zscore(UNACKED_INDEX, tag) is not None


def deliver(store: RedisStore, tag: str) -> None:
    """Record `tag` as kombu's Redis QoS does when a worker takes a message."""
    store.redis.hset(UNACKED, tag, json.dumps([{"body": "x"}, "", "graphrunner"]))
    store.redis.zadd(UNACKED_INDEX, {tag: 1.0})


@pytest.fixture
def store(private_redis: EmbeddedRedis) -> Iterator[RedisStore]:
    made = RedisStore.from_url(private_redis.url)
    yield made
    made.close()


def test_a_commit_acknowledges_the_message_it_is_given(store: RedisStore) -> None:
    first = snapshot()
    store.create_run(first, "fp")
    deliver(store, "tag-1")
    deliver(store, "tag-other")
    done = store.commit(Fence.of(first), first.model_copy(update={"step": 1}), ack=ack("tag-1"))
    assert done.committed and done.acked
    assert held(store, "tag-1") == (False, False)
    assert held(store, "tag-other") == (True, True)  # nobody else's message


def test_a_fenced_off_commit_acknowledges_nothing(store: RedisStore) -> None:
    first = snapshot()
    store.create_run(first, "fp")
    deliver(store, "tag-1")
    stale = first.model_copy(update={"step": 5})
    done = store.commit(Fence.of(stale), stale.model_copy(update={"step": 6}), ack=ack("tag-1"))
    assert not done.committed and not done.acked
    assert held(store, "tag-1") == (True, True)


def test_a_store_whose_redis_is_not_the_broker_acknowledges_nothing(private_redis: EmbeddedRedis) -> None:
    outbox = RedisStore.from_url(private_redis.url, direct=False)
    try:
        first = snapshot()
        outbox.create_run(first, "fp")
        deliver(outbox, "tag-1")
        done = outbox.commit(Fence.of(first), first.model_copy(update={"step": 1}), ack=ack("tag-1"))
        assert done.committed and not done.acked
        assert held(outbox, "tag-1") == (True, True)
    finally:
        outbox.close()


def test_an_item_save_acknowledges_the_item_message(store: RedisStore) -> None:
    deliver(store, "item-1")
    saved = store.save_items("run-1", "t", [(0, {"ok": True, "result": 1})], upto=1, ack=ack("item-1"))
    assert saved.kept == 1 and saved.completed and saved.acked
    assert held(store, "item-1") == (False, False)
    again = store.save_items("run-1", "t", [(0, {"ok": True, "result": 2})], upto=1)
    assert (again.kept, again.completed, again.acked) == (0, False, False)
    assert store.item_records("run-1", "t", 1).__next__() == {"ok": True, "result": 1}


def test_the_outcome_says_so_only_when_a_commit_acknowledged() -> None:
    delivery = Delivery("tag-1")
    assert acked_outcome("advanced", delivery) == "advanced" and delivery.pending() is not None
    delivery.acked = True
    assert delivery.pending() is None  # a later commit of the same handling acknowledges nothing
    outcome = acked_outcome("advanced", delivery)
    assert outcome == "advanced" + ACKED
    assert was_acked(repr(outcome)) and was_acked(outcome)  # as the main process gets it: its repr
    assert not was_acked(repr("advanced")) and not was_acked(None) and not was_acked(repr(ACKED + "x"))


def ack(tag: str) -> Ack:
    return Ack(tag, UNACKED, UNACKED_INDEX)


ITEMS = 30
FAN_OUT = f"""
id: ack-fan-out
inputs:
  items: {{type: list, default: {list(range(ITEMS))}}}
state:
  out: {{type: list, default: []}}
config:
  start: each
nodes:
  each:
    type: foreach
    over: "${{inputs.items}}"
    parallel: true
    action: {{tool: echo, params: {{value: "${{item}}"}}}}
    batch_size: 1
    collect: out
    next: $end
"""


@pytest.fixture(scope="module")
def worked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Client, redis.Redis, Settings]]:
    """A prefork `graphrunner worker` process on a Redis of its own (also its broker; an in-thread
    worker could not stop without stopping the session's), a client and a plain connection."""
    logs = tmp_path_factory.mktemp("ack-worker")
    with EmbeddedRedis() as server:
        proc = WorkerProcess("ack", process_env(server.url), logs, concurrency=2)
        settings = Settings.from_env().with_redis(server.url)
        conn = redis.Redis.from_url(server.url, decode_responses=True)
        try:
            proc.wait_ready()
            with Client(settings=settings) as client:
                yield client, conn, settings
        finally:
            conn.close()
            proc.stop()


def run_counting(client: Client, conn: redis.Redis, path: Path, graph: str) -> tuple[RunResult, int]:
    """Run `graph` (written to `path`) to the end; its result, and the MULTIs Redis ran for it
    once every message of it is acknowledged."""
    path.write_text(textwrap.dedent(graph))
    before = multi_calls(conn)
    result = client.submit(path).wait(timeout=60)
    assert result.status == "completed", result.error
    wait_for(lambda: conn.hlen(UNACKED) == 0, 30, "every message acknowledged")
    return result, multi_calls(conn) - before


def test_a_worker_acknowledges_each_item_in_its_save(
    worked: tuple[Client, redis.Redis, Settings], tmp_path: Path
) -> None:
    client, conn, _ = worked
    result, multis = run_counting(client, conn, tmp_path / "ack-fan-out.yaml", FAN_OUT)
    assert len(result.state["out"]) == ITEMS
    # kombu's MULTI records each of the 30 item messages and the few step messages; the main
    # process acknowledging the items as well would take 30 more
    assert multis < ITEMS + 12


def test_a_worker_acknowledges_each_step_in_its_commit(
    worked: tuple[Client, redis.Redis, Settings], tmp_path: Path
) -> None:
    client, conn, settings = worked
    result, multis = run_counting(client, conn, tmp_path / "ack-loop.yaml", LOOP)
    assert result.state["n"] == STEPS
    # one MULTI per message (kombu recording it), none to acknowledge: the commits did
    assert multis < 1.5 * STEPS, "the main process acknowledged committed steps"
    assert conn.zcard(UNACKED_INDEX) == 0

    # a duplicate of a step already taken commits nothing: the main process acknowledges it
    cluster = Cluster.connect(settings)
    try:
        finished = cluster.store.load_run(result.run_id)
        assert finished is not None
        before = multi_calls(conn)
        cluster.store.push(
            cluster.publisher.encode_all([cluster.publisher.step(finished, None)]), finished.run_id
        )
    finally:
        cluster.close()

    def taken_and_acknowledged() -> bool:  # recorded, then acknowledged by the main process
        held = conn.hlen(UNACKED) + conn.zcard(UNACKED_INDEX)
        return conn.llen(settings.queue) == 0 and multi_calls(conn) - before >= 2 and held == 0

    wait_for(taken_and_acknowledged, 30, "the stale duplicate taken and acknowledged")
