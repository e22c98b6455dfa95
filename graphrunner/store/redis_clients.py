"""The redis-py client for a store URL: one Redis (`redis://`, `rediss://`, `unix://`) or a
Redis Cluster (`redis+cluster://host:port`, `rediss+cluster://...`; any node, the others are
discovered). A URL that names no cluster, a cluster with uncovered slots, or a cluster whose
runs were written with another shard count is refused with an error naming the setting.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import redis
from redis.cluster import RedisCluster
from tenacity import Retrying, retry_if_exception_type, stop_after_delay, wait_exponential

from graphrunner.errors import ConfigurationError, StoreUnavailable
from graphrunner.settings import CLUSTER_SCHEMES
from graphrunner.store import keys

SOCKETS: dict[str, Any] = {"socket_connect_timeout": 2, "socket_timeout": 15, "health_check_interval": 30}
SETTING = "GRAPHRUNNER_REDIS_URL"


def single_client(url: str) -> redis.Redis:
    """A client for one Redis; sockets time out so a dead server is noticed quickly."""
    return redis.Redis.from_url(url, decode_responses=True, **SOCKETS)


def cluster_client(url: str, shards: int, retry_seconds: float = 30.0) -> RedisCluster:
    """A client for the Redis Cluster `url` names, checked: every slot covered, `shards` agreed.

    A cluster that cannot be reached is tried again with backoff for `retry_seconds`, then
    `StoreUnavailable` is raised; a cluster that answers but cannot be used is refused at once.
    """
    retrying = Retrying(
        retry=retry_if_exception_type(StoreUnavailable),
        wait=wait_exponential(multiplier=0.1, max=2),
        stop=stop_after_delay(retry_seconds),
        reraise=True,
    )
    client: RedisCluster = retrying(_connect, url, shards)
    return client


def _connect(url: str, shards: int) -> RedisCluster:
    plain = _plain_url(url)
    _check_node(plain, url)
    try:  # coverage is checked below: a client that raises here cannot be closed
        client = RedisCluster.from_url(plain, decode_responses=True, require_full_coverage=False, **SOCKETS)
    except redis.exceptions.RedisClusterException as exc:
        raise ConfigurationError(f"cannot use the Redis Cluster at {_safe(url)} ({SETTING}): {exc}") from exc
    except redis.ConnectionError as exc:
        raise _unreachable(url, exc) from exc
    try:
        _check_state(client, url)
        _agree_shards(client, shards)
    except BaseException:
        client.close()
        raise
    return client


def _plain_url(url: str) -> str:
    scheme, rest = url.split("://", 1)
    parts = urlsplit(url)
    if parts.path not in ("", "/", "/0"):
        raise ConfigurationError(
            f"{SETTING}: a Redis Cluster has only database 0, got {parts.path!r} in {_safe(url)}"
        )
    return f"{CLUSTER_SCHEMES[scheme]}://{rest.split('/', 1)[0]}"


def _check_node(plain: str, url: str) -> None:
    """Refuse a node that is not in cluster mode, before a cluster client is built on it."""
    with redis.Redis.from_url(plain, decode_responses=True, **SOCKETS) as node:
        try:
            enabled = str(node.info("cluster").get("cluster_enabled", 0)) == "1"
        except redis.ConnectionError as exc:
            raise _unreachable(url, exc) from exc
    if not enabled:
        raise ConfigurationError(
            f"{SETTING} names a Redis Cluster (redis+cluster://) but {_safe(url)} is not a cluster "
            "node (cluster mode is not enabled there); use redis:// for a single Redis"
        )


def _unreachable(url: str, exc: Exception) -> StoreUnavailable:
    return StoreUnavailable(f"cannot reach the Redis Cluster at {_safe(url)} ({SETTING}): {exc}")


def _check_state(client: RedisCluster, url: str) -> None:
    info = client.cluster_info()
    assigned = int(info.get("cluster_slots_assigned", 0))
    if assigned != 16384:
        raise ConfigurationError(
            f"the Redis Cluster at {_safe(url)} ({SETTING}) does not cover every slot: {assigned} of "
            "16384 slots are assigned to a master (redis-cli --cluster check names the missing ones)"
        )
    if info.get("cluster_state") != "ok":
        raise ConfigurationError(
            f"the Redis Cluster at {_safe(url)} ({SETTING}) is not ready: cluster_state is "
            f"{info.get('cluster_state')} (redis-cli --cluster check says why)"
        )


def _agree_shards(client: RedisCluster, shards: int) -> None:
    """Record the shard count on a new cluster; refuse a count other than the recorded one."""
    client.set(keys.layout(), shards, nx=True)
    recorded = int(client.get(keys.layout()) or shards)
    if recorded != shards:
        raise ConfigurationError(
            f"GRAPHRUNNER_CLUSTER_SHARDS is {shards}, but the runs on this Redis Cluster were written "
            f"with {recorded} shards: set GRAPHRUNNER_CLUSTER_SHARDS={recorded} (the count cannot change "
            "while runs are kept)"
        )


def _safe(url: str) -> str:
    """`url` without its password (kombu is imported only for an error: producers do without it)."""
    from kombu.utils.url import maybe_sanitize_url

    return str(maybe_sanitize_url(url))
