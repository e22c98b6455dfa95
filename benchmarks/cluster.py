"""A private Redis Cluster for `steps --store cluster`: graphrunner's run state on 3 masters.

The nodes are started by the test suite's fixture, tests/redis_cluster.py (masters on free ports,
`redis-cli --cluster create`, `cluster_state:ok` awaited, every node stopped by PID), loaded from
its file (`processes.suite_launcher`) rather than copied. This module adds
what the benchmark needs on top: the nodes' pids (CPU) and their INFO commandstats (commands).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import redis

from benchmarks.processes import suite_launcher

MASTERS = 3


@dataclass(frozen=True)
class ClusterStore:
    """A running private cluster: its URL (`redis+cluster://...`), its nodes' ports and pids (all masters)."""

    url: str
    ports: tuple[int, ...]
    pids: tuple[int, ...]

    def commandstats(self) -> Counter[str]:
        """Calls so far by command name (lower case), summed over every node: all are masters."""
        total: Counter[str] = Counter()
        for port in self.ports:
            total.update(node_commandstats(port))
        return total


def node_commandstats(port: int) -> Counter[str]:
    """One node's INFO commandstats as calls by command name (commands run by Lua scripts included)."""
    with redis.Redis(host="127.0.0.1", port=port, decode_responses=True) as client:
        stats = client.info("commandstats")
    return Counter({name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in stats.items()})


@contextmanager
def private_cluster(masters: int = MASTERS) -> Iterator[ClusterStore]:
    """A Redis Cluster of `masters` masters (no replicas) for the block; every node stopped by PID after."""
    with suite_launcher("redis_cluster").RedisCluster(masters=masters) as cluster:
        pids = tuple(proc.pid for proc in cluster.procs)
        yield ClusterStore(cluster.url, tuple(cluster.ports), pids)
