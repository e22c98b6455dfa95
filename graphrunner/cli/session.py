"""Where `graphrunner run` runs a graph: the configured cluster, or an embedded Redis and worker."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, nullcontext
from dataclasses import dataclass, replace
from typing import Any

from graphrunner.cli.connect import RETRY_SECONDS
from graphrunner.client import Client
from graphrunner.cluster.worker.in_thread import local_worker
from graphrunner.cluster.worker.runtime import WorkerRuntime
from graphrunner.embedded import EmbeddedRedis
from graphrunner.graph import Graph
from graphrunner.settings import Settings
from graphrunner.telemetry import logs

LOCAL_CONCURRENCY = 4
EMBEDDED_RETRY_SECONDS = 1.0  # a Redis of our own only goes away when we stop it (or Ctrl-C does)
WORKER_LOGGERS = ("celery", "kombu", "graphrunner")


@dataclass(frozen=True)
class Session:
    """A client to submit with; `embedded` when its Redis and worker end with the command."""

    client: Client
    embedded: bool


@contextmanager
def run_session(settings: Settings, graph: Graph, *, local: bool = False) -> Iterator[Session]:
    """The configured cluster (plus a worker here if `local`); with no Redis configured, embedded ones.

    Everything started here is stopped when the block ends, also on an error or Ctrl-C.
    """
    with ExitStack() as stack:
        embedded = not settings.redis_url
        if embedded:
            # stopped on the way out, also on SIGTERM (cli.signals); and by the kernel if we are killed
            server = stack.enter_context(EmbeddedRedis(die_with_parent=True))
            client = Client(
                server.url, settings=replace(settings, broker_url=None), retry_seconds=EMBEDDED_RETRY_SECONDS
            )
        else:
            client = Client(settings=settings, retry_seconds=RETRY_SECONDS)
        stack.callback(client.close)
        if embedded or local:
            stack.enter_context(draining_worker(client, graph_queues(graph), embedded=embedded))
        yield Session(client, embedded)


@contextmanager
def draining_worker(client: Client, queues: list[str], *, embedded: bool) -> Iterator[None]:
    """A worker in this process; on the way out, steps still in flight finish before Redis goes.

    When an embedded run is abandoned (timeout, Ctrl-C, error), the failures of its last steps
    are not reported: Ctrl-C in a terminal may already have stopped the embedded Redis.
    """
    worker: Any = None
    abandoned = False
    retry = EMBEDDED_RETRY_SECONDS if embedded else RETRY_SECONDS
    logs.install(client.settings.log_format)  # its log lines name their run, step and trace, as a worker's
    runtime = WorkerRuntime(client.settings, retry_seconds=retry)
    try:
        with local_worker(runtime, concurrency=LOCAL_CONCURRENCY, queues=queues) as worker:
            yield
    except BaseException:
        abandoned = embedded
        raise
    finally:
        with muted(WORKER_LOGGERS) if abandoned else nullcontext():
            drain(worker)
            runtime.close()


@contextmanager
def muted(names: tuple[str, ...]) -> Iterator[None]:
    """Silence the named loggers for the block."""
    loggers = [logging.getLogger(name) for name in names]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


def drain(worker: Any) -> None:
    """Wait for the tasks a stopped worker's thread pool is still running."""
    executor = getattr(getattr(worker, "pool", None), "executor", None)
    if executor is not None:
        executor.shutdown(wait=True)


def graph_queues(graph: Graph) -> list[str]:
    """The Celery queues the graph's nodes name (besides the default one)."""
    named = (getattr(node, "queue", None) for node in graph.spec.nodes.values())
    return list(dict.fromkeys(q for q in named if q))
