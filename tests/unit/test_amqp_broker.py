"""RabbitMQ as the broker, without one: the settings (GRAPHRUNNER_QUEUE_TYPE,
GRAPHRUNNER_CONSUMER_TIMEOUT), the Celery app they make, the worker's start-up checks, and a
broker that is away when a step has committed (over a MemoryStore whose queues refuse messages).

The same behaviour against real RabbitMQ nodes: tests/integration/test_rabbitmq_queues.py and
tests/integration/test_rabbitmq_outage.py.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from amqp.exceptions import ConnectionForced, PreconditionFailed
from memory_cluster import MemoryCluster, child_graphs

from graphrunner.cluster.transport.app import create_app
from graphrunner.cluster.transport.guard import consumer_timed_out
from graphrunner.cluster.worker.preflight import check_consumer_timeout, check_worker, inline_attempts
from graphrunner.engine import RunStatus
from graphrunner.errors import BrokerUnavailable, ConfigurationError
from graphrunner.loading import load_graph
from graphrunner.model import RetryPolicy
from graphrunner.settings import Settings
from graphrunner.store.memory_store import MemoryStore

REDIS = "redis://127.0.0.1:1/0"
AMQP = "amqp://guest:guest@127.0.0.1:1//"


# -- settings ----------------------------------------------------------------------------------------


def test_queue_type_is_classic_unless_set_to_quorum(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GRAPHRUNNER_QUEUE_TYPE", raising=False)
    assert Settings.from_env().queue_type == "classic"
    monkeypatch.setenv("GRAPHRUNNER_QUEUE_TYPE", " Quorum ")
    assert Settings.from_env().queue_type == "quorum"
    monkeypatch.setenv("GRAPHRUNNER_QUEUE_TYPE", "stream")
    with pytest.raises(
        ValueError, match="GRAPHRUNNER_QUEUE_TYPE must be one of classic, quorum, got 'stream'"
    ):
        Settings.from_env()


def test_consumer_timeout_is_rabbitmqs_default_on_amqp_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GRAPHRUNNER_CONSUMER_TIMEOUT", raising=False)
    assert Settings.from_env().consumer_timeout is None
    assert Settings(redis_url=REDIS).ack_timeout is None  # a Redis broker: workers vouch instead
    assert Settings(redis_url=REDIS, broker_url=AMQP).ack_timeout == 1800
    assert Settings(redis_url=REDIS, broker_url=AMQP, consumer_timeout=7200).ack_timeout == 7200
    assert Settings(redis_url=REDIS, broker_url=AMQP, consumer_timeout=0).ack_timeout is None  # no limit
    monkeypatch.setenv("GRAPHRUNNER_CONSUMER_TIMEOUT", "3600")
    assert Settings.from_env().consumer_timeout == 3600
    monkeypatch.setenv("GRAPHRUNNER_CONSUMER_TIMEOUT", "-1")
    with pytest.raises(ValueError, match="GRAPHRUNNER_CONSUMER_TIMEOUT must be 0 or more, got -1"):
        Settings.from_env()
    monkeypatch.setenv("GRAPHRUNNER_CONSUMER_TIMEOUT", "30m")
    with pytest.raises(ValueError, match="GRAPHRUNNER_CONSUMER_TIMEOUT must be a whole number"):
        Settings.from_env()


@pytest.mark.parametrize("url", [AMQP, "amqps://u:p@host//", "pyamqp://host//"])
def test_amqp_urls_are_rabbitmq(url: str) -> None:
    assert Settings(redis_url=REDIS, broker_url=url).amqp
    assert not Settings(redis_url=REDIS).amqp and not Settings(redis_url=REDIS, broker_url=REDIS).amqp


# -- the Celery app ----------------------------------------------------------------------------------


def test_quorum_queues_are_refused_on_a_redis_broker() -> None:
    settings = Settings(redis_url=REDIS, queue_type="quorum")
    for check in (lambda: check_worker(settings, []), lambda: create_app(settings)):
        with pytest.raises(ConfigurationError) as refused:
            check()
        assert "GRAPHRUNNER_QUEUE_TYPE is quorum but the broker is redis://" in str(refused.value)
    check_worker(Settings(redis_url=REDIS, broker_url=AMQP, queue_type="quorum"), [])


def test_quorum_queues_on_rabbitmq_are_declared_quorum() -> None:
    app = create_app(Settings(redis_url=REDIS, broker_url=AMQP, queue="gr", queue_type="quorum"))
    try:
        assert app.amqp.queues["gr"].queue_arguments == {"x-queue-type": "quorum"}
        # a node's own `queue` (or `-Q name`) is created on demand: quorum too
        assert app.amqp.queues["cpu"].queue_arguments == {"x-queue-type": "quorum"}
    finally:
        app.close()
    classic = create_app(Settings(redis_url=REDIS, broker_url=AMQP, queue="gr"))
    try:
        assert not classic.amqp.queues["gr"].queue_arguments
    finally:
        classic.close()


def test_a_rabbitmq_app_confirms_publishes_and_survives_channel_errors() -> None:
    app = create_app(Settings(redis_url=REDIS, broker_url=AMQP))
    try:
        assert app.conf.broker_transport_options == {"confirm_publish": True}
        assert app.conf.broker_channel_error_retry is True  # a consumer timeout: reconnect, not exit
        assert app.conf.worker_cancel_long_running_tasks_on_connection_loss is False
    finally:
        app.close()
    redis_app = create_app(Settings(redis_url=REDIS))
    try:
        assert "visibility_timeout" in redis_app.conf.broker_transport_options
        assert redis_app.conf.broker_channel_error_retry is False
    finally:
        redis_app.close()


def test_a_consumer_timeout_is_told_from_other_channel_errors() -> None:
    timed_out = PreconditionFailed(
        "PRECONDITION_FAILED - delivery acknowledgement on channel 1 timed out. Timeout value used: "
        "1800000 ms. This timeout value can be configured, see consumers doc guide to learn more",
        (0, 0),
    )
    assert consumer_timed_out(timed_out)
    assert not consumer_timed_out(PreconditionFailed("PRECONDITION_FAILED - inequivalent arg 'x-queue-type'"))
    assert not consumer_timed_out(ConnectionForced("CONNECTION_FORCED - broker forced connection closure"))
    assert not consumer_timed_out(OSError("timed out"))


# -- the consumer timeout against the graphs a worker serves ------------------------------------------


def _graphs(tmp_path: Path, retry: str = "") -> tuple[Path, ...]:
    (tmp_path / "long.yaml").write_text(
        "id: t/long\nconfig: {start: a}\nnodes:\n"
        f"  a: {{action: {{tool: echo}}, timeout: 900{retry}, next: b}}\n"
        "  b: {action: {tool: echo}, next: done}\n"
        "  done: {type: return}\n"
    )
    return (tmp_path,)


def _amqp(path: tuple[Path, ...], **settings: Any) -> Settings:
    return Settings(graph_path=path, redis_url=REDIS, broker_url=AMQP, **settings)


def test_a_node_that_may_hold_its_message_past_the_consumer_timeout_is_refused(tmp_path: Path) -> None:
    path = _graphs(tmp_path)  # the default retry: a second attempt after a backoff under 1 s
    check_consumer_timeout(Settings(graph_path=path, redis_url=REDIS))  # Redis broker: nothing to check
    check_consumer_timeout(_amqp(path, consumer_timeout=0))
    check_consumer_timeout(_amqp(path, consumer_timeout=1801))
    with pytest.raises(ConfigurationError) as refused:
        check_consumer_timeout(_amqp(path))
    message = str(refused.value)
    assert message.startswith(
        "GRAPHRUNNER_CONSUMER_TIMEOUT is 1800s (RabbitMQ's default consumer_timeout) but node 'a' "
        "of graph 't/long' may hold its message 1801s (its timeout, 900s, for each of 2 attempts"
    )
    assert "consumer-timeout policy" in message
    with pytest.raises(ConfigurationError, match="GRAPHRUNNER_PREFETCH=2"):
        check_consumer_timeout(_amqp(path, consumer_timeout=3000, prefetch=2))


def test_a_single_attempt_is_held_for_its_timeout(tmp_path: Path) -> None:
    path = _graphs(tmp_path, retry=", retry: {max_attempts: 1}")
    check_consumer_timeout(_amqp(path, consumer_timeout=900))
    with pytest.raises(ConfigurationError, match=r"the broker's consumer_timeout.*may hold its message 900s"):
        check_consumer_timeout(_amqp(path, consumer_timeout=899))


class _Node:
    def __init__(self, *retry: RetryPolicy) -> None:
        self.retry = retry or None


@pytest.mark.parametrize(
    ("policies", "attempts"),
    [
        ((), 2),  # the default policy: 0.5 s + jitter may be slept, 1 s + jitter never
        ((RetryPolicy(max_attempts=1),), 1),
        ((RetryPolicy(max_attempts=5, initial=2),), 1),  # every backoff suspends the step
        ((RetryPolicy(max_attempts=5, initial=0.1, jitter=0),), 5),  # 0.1, 0.2, 0.4, 0.8 s: all slept
        ((RetryPolicy(max_attempts=4, initial=1, jitter=0),), 2),  # exactly 1 s is slept, 2 s is not
        ((RetryPolicy(max_attempts=1), RetryPolicy(max_attempts=3, initial=0.2, multiplier=1)), 3),
    ],
)
def test_attempts_one_delivery_may_run(policies: tuple[RetryPolicy, ...], attempts: int) -> None:
    assert inline_attempts(_Node(*policies))[0] == attempts


# -- a broker away after a commit -------------------------------------------------------------------------


class BrokerAway(MemoryStore):
    """A store with an outbox (a broker of its own), whose queues refuse messages while `down`,
    as the publisher reports a RabbitMQ that is not there."""

    def __init__(self) -> None:
        super().__init__(direct=False)
        self.down = False

    def enqueue(self, queue: str, body: str) -> None:
        if self.down:
            raise BrokerUnavailable("the broker amqp://guest:**@127.0.0.1:1// did not take a message")
        super().enqueue(queue, body)


def test_a_broker_away_when_a_child_run_is_sent_does_not_fail_the_parent(tmp_path: Path) -> None:
    store = BrokerAway()
    mc = MemoryCluster(store)
    try:
        run_id = mc.client.submit(load_graph(child_graphs(tmp_path))).id
        child_id = f"{run_id}.2"
        assert mc.step().outcome == "committed"  # greet
        sub = mc.take()
        assert sub is not None
        store.down = True
        with pytest.raises(BrokerUnavailable):  # raised for a requeue, not a failed run
            mc.executor.execute(sub)
        parent, child = mc.snap(run_id), mc.store.load_run(child_id)
        assert parent.status is RunStatus.RUNNING and parent.phase == 1  # suspended, waiting for its child
        assert child is not None and len(mc.store.outbox(child_id)) == 1  # its first step: in its outbox
        store.down = False
        assert mc.executor.execute(sub, redelivered=True).outcome == "stale"  # the requeued message
        mc.store.touch(child_id, time.time() - 1)  # the sweeper looks at the child: past its deadline
        report = mc.client.sweep()
        assert [(r.run_id, r.action) for r in report.repaired] == [(child_id, "published_outbox")]
        mc.drive()
        assert mc.snap(run_id).status is RunStatus.COMPLETED and mc.snap(run_id).output == {"heard": "HI"}
    finally:
        mc.close()
