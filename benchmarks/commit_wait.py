"""What GRAPHRUNNER_REDIS_MIN_REPLICAS costs a commit: a private master with one replica (both on
loopback), the same chain of commits with and without `WAIT 1`, rounds interleaved.

    python -m benchmarks.commit_wait [--commits 2000] [--repeat 3]

Prints the median and 99th percentile of one commit (the store's `commit`, one run moved step by
step) and commits per second, per mode. Loopback only: on a network the replica's round trip is
added to every commit.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager

import redis

from graphrunner.embedded import EmbeddedRedis, free_port, redis_binary
from graphrunner.engine import RunSnapshot
from graphrunner.store import Fence, RedisStore
from graphrunner.store.replicas import Replicas


@contextmanager
def master_and_replica() -> Iterator[str]:
    """A private master with one linked replica; the master's URL."""
    with EmbeddedRedis() as master, tempfile.TemporaryDirectory() as folder:
        with redis.Redis(port=master.port) as client:
            client.config_set("repl-diskless-sync-delay", 0)
        port = free_port()
        argv = [redis_binary(), "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", folder]
        replica = subprocess.Popen(
            [*argv, "--replicaof", "127.0.0.1", str(master.port)], stdout=subprocess.DEVNULL
        )
        try:
            with redis.Redis(port=port, decode_responses=True) as client:
                while client.info("replication").get("master_link_status") != "up":
                    time.sleep(0.05)
            yield master.url
        finally:
            replica.terminate()
            replica.wait(timeout=10)


def chain(url: str, replicas: Replicas, commits: int, run_id: str) -> list[float]:
    """Seconds taken by each of `commits` commits moving one run on by a step."""
    store = RedisStore.from_url(url, replicas=replicas)
    try:
        snap = RunSnapshot(run_id=run_id, graph_id="bench/wait", node="a", state={"n": 0})
        store.create_run(snap, "fp")
        took = []
        for n in range(commits):
            moved = snap.model_copy(update={"step": n + 1, "state": {"n": n + 1}})
            start = time.perf_counter()
            assert store.commit(Fence.of(snap), moved).committed
            took.append(time.perf_counter() - start)
            snap = moved
        return took
    finally:
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    modes = {"no WAIT": Replicas(), "WAIT 1 (GRAPHRUNNER_REDIS_MIN_REPLICAS=1)": Replicas(1, 1000)}
    times: dict[str, list[float]] = {name: [] for name in modes}
    with master_and_replica() as url:
        for round_ in range(args.repeat):
            for mode, (name, replicas) in enumerate(modes.items()):
                times[name] += chain(url, replicas, args.commits, f"r{round_}-{mode}")
    for name, took in times.items():
        took.sort()
        p99 = took[int(len(took) * 0.99)]
        print(
            f"{name:42} median {statistics.median(took) * 1e6:7.0f} µs   p99 {p99 * 1e6:7.0f} µs   "
            f"{len(took) / sum(took):8.0f} commits/s"
        )


if __name__ == "__main__":
    main()
