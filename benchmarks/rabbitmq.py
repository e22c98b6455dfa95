"""The private RabbitMQ node of `--broker amqp` (`benchmarks.steps`, `benchmarks.foreach`).

Started by the test suite's launcher, tests/rabbitmq_node.py (this machine's `rabbitmq-server`,
its own node name, AMQP, distribution and epmd ports, Erlang cookie and directories; never the
RabbitMQ already running here), loaded from its file (`processes.suite_launcher`); stopped by PID
when the block ends. Both sides' workers and the harness's producers use it as the Celery broker;
Redis stays the run state, the baseline's state and the result backend (chord counters).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from kombu.connection import Connection

from benchmarks.processes import suite_launcher

BROKERS = ("redis", "amqp")


@dataclass(frozen=True)
class RabbitMQ:
    """A running private node: its AMQP URL, the process group of the server (CPU), its version."""

    url: str
    pgid: int
    version: str


@contextmanager
def private_rabbitmq() -> Iterator[RabbitMQ]:
    """A private RabbitMQ node for the block; the server and its epmd stopped by PID after."""
    launcher = suite_launcher("rabbitmq_node")
    with launcher.RabbitMQNode(prefix="graphrunner-bench") as node:
        assert node.server is not None
        yield RabbitMQ(node.url, node.server.pid, server_version(node.url))


def server_version(url: str) -> str:
    """The version the broker announces when a client connects."""
    with Connection(url, connect_timeout=10) as connection:  # type: ignore[no-untyped-call]
        connection.connect()
        return str(connection.connection.server_properties.get("version", "?"))


@contextmanager
def celery_broker(url: str | None) -> Iterator[None]:
    """This process's `CELERY_BROKER_URL` set to `url` (or unset, for `None`) for the block, restored after.

    Celery reads `CELERY_BROKER_URL` before the broker an app was configured with
    (`celery.app.utils.Settings.broker_url`): that is how the baseline, whose files stay unchanged
    so that ratios compare across sessions, publishes to RabbitMQ (its workers get the same
    variable). Unset for a Redis broker, so that one left in the shell cannot redirect the harness.
    """
    previous = os.environ.pop("CELERY_BROKER_URL", None)
    if url is not None:
        os.environ["CELERY_BROKER_URL"] = url
    try:
        yield
    finally:
        os.environ.pop("CELERY_BROKER_URL", None)
        if previous is not None:
            os.environ["CELERY_BROKER_URL"] = previous
