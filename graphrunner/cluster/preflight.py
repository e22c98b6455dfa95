"""What `graphrunner worker` checks before it starts: settings that cannot work are refused,
each with a message naming the setting (and the graph and node when one is the cause)."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence

from graphrunner.cluster.context import check_store_url
from graphrunner.errors import ConfigurationError, GraphrunnerError
from graphrunner.settings import Settings

log = logging.getLogger("graphrunner.worker")
MIN_VISIBILITY = 2  # seconds: a worker vouches every max(1 s, a quarter of it) for what it holds
REFUSED_POOLS = {"solo": "it runs steps in the worker's own loop, which then cannot vouch for them"}


def check_worker(settings: Settings, celery_args: Sequence[str]) -> None:
    """Raise `ConfigurationError` for settings a worker cannot run with (see `check_stop_grace` too)."""
    if not settings.redis_url:
        raise ConfigurationError(
            "GRAPHRUNNER_REDIS_URL is not set: a worker needs the Redis the cluster uses "
            "(e.g. redis://localhost:6379/0)"
        )
    check_store_url(settings.redis_url)
    if settings.visibility_timeout < MIN_VISIBILITY:
        raise ConfigurationError(
            f"GRAPHRUNNER_VISIBILITY_TIMEOUT is {settings.visibility_timeout}s: it must be at least "
            f"{MIN_VISIBILITY}s, or a message is delivered again while its worker still runs it"
        )
    pool = pool_of(celery_args)
    if pool in REFUSED_POOLS:
        raise ConfigurationError(
            f"--pool={pool} is not supported: {REFUSED_POOLS[pool]}; use prefork or threads"
        )


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


def node_timeouts(settings: Settings) -> Iterator[tuple[str, str, float]]:
    """(graph id, node, timeout) of every node with a timeout in the graphs on the graph path.

    A graph that does not load is skipped with a warning: its runs fail with the graph's own error.
    """
    from graphrunner.loading import load_graph
    from graphrunner.loading.locate import graph_files

    for path in graph_files(settings.graph_path):
        try:
            graph = load_graph(path, settings=settings)
        except GraphrunnerError as exc:
            log.warning("graph file %s does not load (%s); its node timeouts are not checked", path, exc)
            continue
        for name, node in graph.spec.nodes.items():
            timeout = getattr(node, "timeout", None)
            if timeout is not None:
                yield graph.spec.id, name, float(timeout)
