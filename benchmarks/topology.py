"""`--broker amqp` and `--rtt-ms` of `benchmarks.steps` and `benchmarks.foreach`: where the Celery
broker is, and the round-trip time added between the workers and Redis. The same for both sides.

- `--broker redis` (the default): the private Redis is the broker too, as before.
- `--broker amqp`: a private RabbitMQ node (benchmarks/rabbitmq.py) is the broker of both sides
  (baseline: `CELERY_BROKER_URL`, read by Celery before the URL its app was configured with;
  graphrunner: `GRAPHRUNNER_BROKER_URL`), in the workers and in the harness's producers; Redis
  keeps the run state, the baseline's state and the result backend (chord counters).
- `--rtt-ms X` (default 0: none): a userspace delay line (benchmarks/rtt_proxy.py) in a process of
  its own between the workers and Redis, X/2 ms each way; the workers' Redis URLs point at it.
  With `--broker amqp` the broker's connections do not go through it. The harness's own
  connections (submitting, polling, MONITOR) go to Redis directly.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any

import redis

from benchmarks.rabbitmq import BROKERS, RabbitMQ, celery_broker, private_rabbitmq
from benchmarks.rtt_proxy import Proxy, running_proxy

PINGS = 200  # PINGs through the proxy, and directly, to report the round-trip time it really adds


def add_arguments(p: argparse.ArgumentParser) -> None:
    """`--broker` and `--rtt-ms`."""
    p.add_argument(
        "--broker",
        choices=BROKERS,
        default="redis",
        help="the Celery broker of both sides: the private Redis, or a private RabbitMQ node "
        "(Redis stays the state store and result backend)",
    )
    p.add_argument(
        "--rtt-ms",
        type=float,
        default=0.0,
        help="round-trip time (ms) added between the workers and Redis by a userspace proxy, both sides "
        "(0: none)",
    )


def check_arguments(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse what cannot be set up."""
    if args.rtt_ms < 0:
        p.error("--rtt-ms cannot be negative")
    if args.rtt_ms > 0 and getattr(args, "store", "redis") == "cluster":
        p.error("--rtt-ms needs --store redis: a cluster's nodes send clients to their own addresses")


@dataclass(frozen=True)
class Topology:
    """The private RabbitMQ node (`--broker amqp`) and the RTT proxy (`--rtt-ms`), where there are."""

    rabbitmq: RabbitMQ | None = None
    proxy: Proxy | None = None
    ping_ms: dict[str, float] | None = None  # PING round trips measured at the start: p50 and p90

    def worker_redis(self, url: str) -> str:
        """The private Redis `url` as the workers reach it: through the proxy, if there is one."""
        return self.proxy.url_for(url) if self.proxy else url

    def cpu_groups(self) -> tuple[tuple[str, int], ...]:
        """The CPU roles this adds (process groups): `rabbitmq`, `proxy`."""
        groups = (("rabbitmq", self.rabbitmq.pgid),) if self.rabbitmq else ()
        return groups + ((("proxy", self.proxy.pid),) if self.proxy else ())

    def facts(self) -> dict[str, Any]:
        """The broker and the round-trip time, for the JSON line (`broker`, `rtt`)."""
        broker: dict[str, Any] = {"kind": "redis", "sides": "both", "result_backend": "the private Redis"}
        if self.rabbitmq:
            broker = {**broker, "kind": "amqp", "rabbitmq": self.rabbitmq.version, "node": "private"}
        rtt: dict[str, Any] = {"rtt_ms": self.proxy.rtt_ms if self.proxy else 0.0}
        if self.ping_ms:
            rtt["ping_ms"] = self.ping_ms
        if self.proxy:
            rtt["between"] = "the workers (both sides) and Redis" + (
                "; not the RabbitMQ broker" if self.rabbitmq else ", broker included"
            )
            rtt["harness"] = "direct"
        return {"broker": broker, "rtt": rtt}


def lines(facts: dict[str, Any]) -> list[str]:
    """The broker and the round-trip time, as the first lines of the tables."""
    broker, rtt = facts["broker"], facts["rtt"]
    found = []
    if broker["kind"] == "amqp":
        found.append(
            f"broker: a private RabbitMQ node ({broker['rabbitmq']}), both sides (--broker amqp); "
            "Redis: run state, the baseline's state and the result backend"
        )
    else:
        found.append("broker: the private Redis, both sides (--broker redis)")
    if rtt["rtt_ms"]:
        where = "the RabbitMQ broker is not behind it" if broker["kind"] == "amqp" else "broker included"
        found.append(
            f"round-trip time: +{rtt['rtt_ms']:g} ms between the workers and Redis, both sides (userspace "
            f"proxy, benchmarks/rtt_proxy.py; {where}); the harness connects directly"
        )
        ping = rtt.get("ping_ms")
        if ping:
            found.append(
                f"  Redis PING, measured at the start: through the proxy p50 {ping['proxy_p50']:.2f} ms, "
                f"p90 {ping['proxy_p90']:.2f} ms; direct p50 {ping['direct_p50']:.2f} ms"
            )
    return found


def ping_ms(proxied_url: str, direct_url: str, pings: int = PINGS) -> dict[str, float]:
    """PING round trips through the proxy and directly: what the proxy really adds on this machine."""
    found = {}
    for name, url in (("proxy", proxied_url), ("direct", direct_url)):
        with redis.Redis.from_url(url, single_connection_client=True) as client:
            client.ping()
            times = []
            for _ in range(pings):
                started = time.perf_counter()
                client.ping()
                times.append((time.perf_counter() - started) * 1000)
        times.sort()
        found[f"{name}_p50"] = round(statistics.median(times), 3)
        found[f"{name}_p90"] = round(times[int(len(times) * 0.9)], 3)
    return found


@contextmanager
def started(args: argparse.Namespace, redis_url: str) -> Iterator[Topology]:
    """The RabbitMQ node and the proxy in front of `redis_url` the arguments ask for, for the block;
    both stopped by PID after. With RabbitMQ, this process's `CELERY_BROKER_URL` names it meanwhile."""
    with ExitStack() as stack:
        rabbitmq = stack.enter_context(private_rabbitmq()) if args.broker == "amqp" else None
        stack.enter_context(celery_broker(rabbitmq.url if rabbitmq else None))
        proxy = stack.enter_context(running_proxy(redis_url, args.rtt_ms)) if args.rtt_ms > 0 else None
        ping = ping_ms(proxy.url_for(redis_url), redis_url) if proxy else None
        yield Topology(rabbitmq, proxy, ping)
