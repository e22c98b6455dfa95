"""What `graphrunner worker` checks before it starts: settings that cannot work are refused,
each with a message naming the setting (and the graph and node when one is the cause)."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Any

from graphrunner.cluster.runs.context import check_topology
from graphrunner.cluster.transport.app import check_queue_type
from graphrunner.errors import ConfigurationError, GraphrunnerError
from graphrunner.model import DEFAULT_RETRY
from graphrunner.services import INLINE_WAIT
from graphrunner.settings import Settings

log = logging.getLogger("graphrunner.worker")
MIN_VISIBILITY = 2  # seconds: a worker vouches every max(1 s, a quarter of it) for what it holds
SUPPORTED_POOLS = ("prefork", "processes", "threads")  # `processes` is Celery's alias of prefork
# Pools whose consumer loop stops while a step runs: it then neither vouches for the messages the
# worker holds (they are delivered again to another worker mid-step) nor touches the liveness file.
REFUSED_POOLS = {
    "solo": "it runs steps in the worker's own loop, which then cannot vouch for them",
    "gevent": (
        "`graphrunner worker` does not monkey-patch, so a step's blocking calls stop the worker's "
        "loop, which then cannot vouch for the messages it holds"
    ),
    "eventlet": (
        "`graphrunner worker` does not monkey-patch, so a step's blocking calls stop the worker's "
        "loop, which then cannot vouch for the messages it holds"
    ),
}


def check_worker(settings: Settings, celery_args: Sequence[str]) -> None:
    """Raise `ConfigurationError` for settings a worker cannot run with (see `check_stop_grace` and
    `check_consumer_timeout` too)."""
    if not settings.redis_url:
        raise ConfigurationError(
            "GRAPHRUNNER_REDIS_URL is not set: a worker needs the Redis the cluster uses "
            "(e.g. redis://localhost:6379/0)"
        )
    check_topology(settings)
    if settings.visibility_timeout < MIN_VISIBILITY:
        raise ConfigurationError(
            f"GRAPHRUNNER_VISIBILITY_TIMEOUT is {settings.visibility_timeout}s: it must be at least "
            f"{MIN_VISIBILITY}s, or a message is delivered again while its worker still runs it"
        )
    check_queue_type(settings)
    pool = pool_of(celery_args)
    if pool is not None and pool not in SUPPORTED_POOLS:
        why = REFUSED_POOLS.get(pool, "graphrunner cannot tell whether its loop vouches for held messages")
        raise ConfigurationError(f"--pool={pool} is not supported: {why}; use prefork or threads")


def pool_of(celery_args: Sequence[str]) -> str | None:
    """The pool named by `-P X`, `-PX`, `--pool X` or `--pool=X` (the last one wins), else None."""
    pool = None
    args = list(celery_args)
    for i, arg in enumerate(args):
        if arg in ("-P", "--pool") and i + 1 < len(args):
            pool = args[i + 1]
        elif arg.startswith("--pool="):
            pool = arg.removeprefix("--pool=")
        elif arg.startswith("-P") and len(arg) > 2 and not arg.startswith("--"):
            pool = arg[2:]
    return pool


def check_stop_grace(settings: Settings) -> None:
    """Refuse a graph on the graph path whose node may run longer than GRAPHRUNNER_STOP_GRACE.

    Run it after the worker configuration is imported: graphs may name the tools it registers.
    """
    grace = settings.stop_grace
    if grace is None:
        return
    for graph_id, node, timeout in node_timeouts(settings):
        if timeout > grace:
            raise ConfigurationError(
                f"GRAPHRUNNER_STOP_GRACE is {grace}s but node '{node}' of graph '{graph_id}' may run "
                f"{timeout:g}s (its timeout): a scale-down would cut it off; raise the grace "
                "(docker compose stop_grace_period, Kubernetes terminationGracePeriodSeconds) "
                "and GRAPHRUNNER_STOP_GRACE with it"
            )


def check_consumer_timeout(settings: Settings) -> None:
    """Refuse a graph on the graph path whose node may hold its message longer than RabbitMQ lets
    a delivery go unacknowledged (GRAPHRUNNER_CONSUMER_TIMEOUT; RabbitMQ's 1800 s when unset).

    Past it, RabbitMQ closes the worker's channel and delivers the message again while the step
    still runs. Run it after the worker configuration is imported, as `check_stop_grace`.
    """
    limit = settings.ack_timeout
    if limit is None:
        return
    prefetch = max(1, settings.prefetch)
    for graph_id, name, node in timed_nodes(settings):
        attempts, backoff = inline_attempts(node)
        held = prefetch * (attempts * float(node.timeout) + backoff)
        if held <= limit:
            continue
        why = f"its timeout, {float(node.timeout):g}s"
        if attempts > 1:
            why += (
                f", for each of {attempts} attempts in one delivery (retries with a backoff up to "
                f"{INLINE_WAIT:g}s are slept within the step)"
            )
        if prefetch > 1:
            why += f", times GRAPHRUNNER_PREFETCH={prefetch} (a message waits behind other steps)"
        source = "RabbitMQ's default" if settings.consumer_timeout is None else "the broker's"
        raise ConfigurationError(
            f"GRAPHRUNNER_CONSUMER_TIMEOUT is {limit}s ({source} consumer_timeout) but node '{name}' "
            f"of graph '{graph_id}' may hold its message {held:g}s ({why}): RabbitMQ would close the "
            "worker's channel and deliver the step again while it runs; raise consumer_timeout on the "
            "broker (rabbitmq.conf, or a consumer-timeout policy on RabbitMQ 3.12+) and "
            "GRAPHRUNNER_CONSUMER_TIMEOUT with it (0: the broker has no limit), or lower the node's "
            "timeout"
        )


def inline_attempts(node: Any) -> tuple[int, float]:
    """The most attempts of `node`'s action one delivery may run, and the longest backoff between
    them: a retry whose backoff can be at most INLINE_WAIT is slept within the step."""
    worst = (1, 0.0)
    for policy in node.retry if node.retry is not None else DEFAULT_RETRY:
        attempts, backoff = 1, 0.0
        while attempts < policy.max_attempts:
            shortest = min(policy.initial * policy.multiplier ** (attempts - 1), policy.max_delay)
            if shortest > INLINE_WAIT or (shortest == INLINE_WAIT and policy.jitter > 0):
                break  # this backoff is always longer: the step is suspended, its message acked
            attempts += 1
            backoff += min(shortest + policy.jitter, policy.max_delay, INLINE_WAIT)
        worst = max(worst, (attempts, backoff))
    return worst


def node_timeouts(settings: Settings) -> Iterator[tuple[str, str, float]]:
    """(graph id, node, timeout) of every node with a timeout in the graphs on the graph path.

    A graph that does not load is skipped with a warning: its runs fail with the graph's own error.
    """
    for graph_id, name, node in timed_nodes(settings):
        yield graph_id, name, float(node.timeout)


def timed_nodes(settings: Settings) -> Iterator[tuple[str, str, Any]]:
    """(graph id, node name, node) of every node with a timeout in the graphs on the graph path."""
    from graphrunner.loading import load_graph
    from graphrunner.loading.locate import graph_files

    for path in graph_files(settings.graph_path):
        try:
            graph = load_graph(path, settings=settings)
        except GraphrunnerError as exc:
            log.warning("graph file %s does not load (%s); its node timeouts are not checked", path, exc)
            continue
        for name, node in graph.spec.nodes.items():
            if getattr(node, "timeout", None) is not None:
                yield graph.spec.id, name, node
