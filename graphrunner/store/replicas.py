"""Commits acknowledged by replicas (GRAPHRUNNER_REDIS_MIN_REPLICAS): Redis `WAIT` after the
commit script, on the same connection (`WAIT` counts the replicas that have this client's
writes), in one round trip; on a Redis Cluster, on the master holding the run's slot.

A commit that enough replicas do not acknowledge in time is already written on the master and
cannot be taken back. The step is then treated like one that met Redis trouble after its
commit (`StoreUnavailable`): its message is put back, and whatever follows the commit off Redis
(a publish to another broker) is left to the sweeper. If the master survives, the message comes
back to a run that has moved on, a fenced duplicate; if a failover loses the commit, it runs
the step again on the new master.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Replicas:
    """How many replicas must acknowledge a commit (0: none, no `WAIT`), and for how long to wait."""

    count: int = 0
    timeout_ms: int = 1000


def call_and_wait(
    client: Any, script: Any, keys: Sequence[str], args: Sequence[Any], replicas: Replicas
) -> tuple[Any, int]:
    """Run the registered `script`, then `WAIT`, on one connection; the script's reply and how
    many replicas acknowledged it. The pipeline loads the script first where the server lacks it
    (a new master after a failover): a `SCRIPT EXISTS` more per commit, but never a `WAIT` behind
    a script that did not run."""
    node = _node_client(client, keys[0])
    pipe = node.pipeline(transaction=False)
    script(keys=list(keys), args=list(args), client=pipe)
    pipe.wait(replicas.count, replicas.timeout_ms)
    reply, acked = pipe.execute()
    return reply, int(acked)


def _node_client(client: Any, key: str) -> Any:
    """The client of the master holding `key` (on a Redis Cluster), else `client` itself."""
    locate = getattr(client, "get_node_from_key", None)  # a redis.RedisCluster's
    return client if locate is None else client.get_redis_connection(locate(key))
