"""The redis-py client for a store URL: one Redis (`redis://`, `rediss://`, `unix://`) or a
Redis Cluster (`redis+cluster://host:port`, `rediss+cluster://...`; any node, the others are
discovered). A URL that names no cluster, a cluster with uncovered slots, or a cluster whose
runs were written with another shard count is refused with an error naming the setting.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import redis
from kombu.utils.url import maybe_sanitize_url
from redis.cluster import RedisCluster

from graphrunner.errors import ConfigurationError, StoreUnavailable
from graphrunner.store import keys

CLUSTER_SCHEMES = {"redis+cluster": "redis", "rediss+cluster": "rediss"}
SOCKETS: dict[str, Any] = {"socket_connect_timeout": 2, "socket_timeout": 15, "health_check_interval": 30}
SETTING = "GRAPHRUNNER_REDIS_URL"


def is_cluster_url(url: str) -> bool:
    """Whether `url` names a Redis Cluster (`redis+cluster://` or `rediss+cluster://`)."""
    return url.split("://", 1)[0] in CLUSTER_SCHEMES


def single_client(url: str) -> redis.Redis:
    """A client for one Redis; sockets time out so a dead server is noticed quickly."""
    return redis.Redis.from_url(url, decode_responses=True, **SOCKETS)


def cluster_client(url: str, shards: int) -> RedisCluster:
    """A client for the Redis Cluster `url` names, checked: every slot covered, `shards` agreed."""
    plain = _plain_url(url)
    try:
        client = RedisCluster.from_url(plain, decode_responses=True, **SOCKETS)
    except redis.exceptions.RedisClusterException as exc:
        raise _refusal(url, exc) from exc
    except redis.ConnectionError as exc:
        raise StoreUnavailable(f"cannot reach the Redis Cluster at {_safe(url)} ({SETTING}): {exc}") from exc
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


def _refusal(url: str, exc: Exception) -> ConfigurationError:
    text = str(exc)
    if "not enabled" in text.lower() or "cluster mode" in text.lower():
        return ConfigurationError(
            f"{SETTING} names a Redis Cluster (redis+cluster://) but {_safe(url)} is not a cluster "
            "node (cluster mode is not enabled there); use redis:// for a single Redis"
        )
    if "slots" in text.lower() and "covered" in text.lower():
        return ConfigurationError(
            f"the Redis Cluster at {_safe(url)} ({SETTING}) does not cover every slot: {text}"
        )
    return ConfigurationError(f"cannot use the Redis Cluster at {_safe(url)} ({SETTING}): {text}")


def _check_state(client: RedisCluster, url: str) -> None:
    info = client.cluster_info()
    if info.get("cluster_state") != "ok" or int(info.get("cluster_slots_assigned", 0)) != 16384:
        raise ConfigurationError(
            f"the Redis Cluster at {_safe(url)} ({SETTING}) is not ready: cluster_state "
            f"{info.get('cluster_state')}, {info.get('cluster_slots_assigned')} of 16384 slots assigned"
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
    """`url` without its password."""
    return str(maybe_sanitize_url(url))
