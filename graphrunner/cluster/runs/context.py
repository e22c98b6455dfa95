"""`Cluster`: what both sides of the cluster share: settings, the store, the publisher, graphs.

A producer (`Client`) and a worker (`WorkerRuntime`) each build one; the run operations
(`operations`), the sweeper and the step executor take it. Nothing here runs tasks.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from graphrunner.cluster.runs.graphs import GraphCache
from graphrunner.cluster.runs.history import asides
from graphrunner.cluster.transport.messages import Outgoing
from graphrunner.cluster.transport.publisher import Publisher
from graphrunner.compiled import CompiledGraph
from graphrunner.engine import RunSnapshot, RunStatus
from graphrunner.errors import ConfigurationError, GraphrunnerError
from graphrunner.services.records import AnyRecord
from graphrunner.settings import CLUSTER_SCHEMES, SINGLE_REDIS, Settings
from graphrunner.store import Created, Fence, RedisStore, Store
from graphrunner.store.replicas import Replicas

if TYPE_CHECKING:
    from celery import Celery

    from graphrunner.cluster.runs.items import ItemRecord
    from graphrunner.cluster.transport.acks import Delivery


@dataclass(frozen=True)
class Cluster:
    """Settings, store, publisher and compiled graphs of one connection to a cluster."""

    settings: Settings
    store: Store
    publisher: Publisher
    graphs: GraphCache

    @classmethod
    def connect(
        cls, settings: Settings, *, retry_seconds: float = 60.0, app: Celery | None = None
    ) -> Cluster:
        """Connect to the Redis (and broker) `settings` name; raises `ConfigurationError`.

        `app` is the Celery app that publishes chords (a worker's own); without it one is
        made when first needed.
        """
        if not settings.redis_url:
            raise ConfigurationError("GRAPHRUNNER_REDIS_URL is not set")
        check_topology(settings)
        direct = settings.broker_url in (None, "", settings.redis_url)
        store = RedisStore.from_url(
            settings.redis_url,
            retry_seconds=retry_seconds,
            retention_seconds=settings.retention,
            direct=direct,
            shards=settings.cluster_shards,
            history_bytes=settings.history_max_bytes,
            replicas=Replicas(settings.redis_min_replicas, settings.redis_wait_timeout_ms),
        )
        return cls.over(settings, store, app=app)

    @classmethod
    def over(cls, settings: Settings, store: Store, *, app: Celery | None = None) -> Cluster:
        """A cluster over an existing store (the tests pass a `MemoryStore`)."""
        return cls(settings, store, Publisher(settings, store, app=app), GraphCache(store))

    def commit(
        self,
        fence: Fence,
        new: RunSnapshot,
        records: Sequence[AnyRecord] = (),
        walked: Sequence[str] = (),
        outs: Sequence[Outgoing] = (),
        delivery: Delivery | None = None,
    ) -> bool:
        """Commit `new` if the run is at `fence`, with its records and the messages that follow
        (in the same write), and the sweeper's progress deadline; False when fenced off.

        `delivery`: the message being handled, which the commit acknowledges when the store can
        (the broker is its Redis); `delivery.acked` says it did.
        """
        sends = self.publisher.encode_all(outs)
        progress = self.deadline(new)
        encoded = [r.to_json() for r in records]
        ack = delivery.pending() if delivery is not None else None
        kept = asides(records, new.state)
        committed = self.store.commit(fence, new, encoded, walked, sends, progress, ack, kept)
        if not committed.committed:
            return False
        if delivery is not None and committed.acked:
            delivery.acked = True
        if sends and not self.store.direct:
            self.publisher.flush(new.run_id, [s for s in sends if s.due is None])
        return True

    def following(self, snap: RunSnapshot, graph: CompiledGraph | None) -> list[Outgoing]:
        """What a committed `snap` sends: its next step, or its parent's wake-up when it ended."""
        if snap.status is RunStatus.RUNNING:
            return [self.publisher.step(snap, graph)]
        if snap.status.finished and snap.parent:
            return [self.publisher.wake(snap.parent, snap.run_id)]
        return []

    def create_run(self, snap: RunSnapshot, graph: CompiledGraph, fingerprint: str) -> Created:
        """Create the run with its first step's message (unless it waits for its concurrency
        key) and the sweeper's progress deadline, in one write; publish it when it was created."""
        return self.create_runs([(snap, graph, fingerprint)])[0]

    def create_runs(self, runs: Sequence[tuple[RunSnapshot, CompiledGraph, str]]) -> list[Created]:
        """`create_run` of each (snapshot, graph, fingerprint), the writes in one round trip (child
        runs); every one created is published before the first error of the broker is raised."""
        batch = []
        for snap, graph, fingerprint in runs:
            first = [self.publisher.step(snap, graph)] if snap.status is RunStatus.RUNNING else []
            batch.append((snap, fingerprint, self.publisher.encode_all(first), self.deadline(snap)))
        created = self.store.create_runs(batch)
        trouble: GraphrunnerError | None = None
        for (snap, _, _), done in zip(runs, created, strict=True):
            try:
                if done.created:
                    self.publisher.flush(snap.run_id)
            except GraphrunnerError as exc:
                trouble = trouble or exc
        if trouble is not None:
            raise trouble
        return created

    def deadline(self, snap: RunSnapshot) -> float | None:
        """When the sweeper should look at `snap` if nothing else happens (epoch s): STALL_AFTER
        from now, or as its wait says; None when the run is not running (nothing to look at)."""
        if snap.status is not RunStatus.RUNNING:
            return None
        if snap.wait is None:
            return time.time() + self.settings.stall_after
        return snap.wait.deadline(time.time(), self.settings.stall_after)

    def save_item(self, run_id: str, tag: str, index: int, record: ItemRecord) -> None:
        """Record item `index` of the foreach `tag`; the run has made progress."""
        self.save_items(run_id, tag, [(index, record)])

    def save_items(
        self,
        run_id: str,
        tag: str,
        records: Sequence[tuple[int, ItemRecord]],
        upto: int = 0,
        delivery: Delivery | None = None,
    ) -> bool:
        """Record items of the foreach `tag` in one write; the run has made progress. True when one
        of them was the `upto`-th record (the last its chunk in flight waited for): the caller
        sends the join, and no other save of the chunk does. `delivery`: the item message, which
        the write acknowledges when the store can (as `commit`)."""
        progress = time.time() + self.settings.stall_after
        dumped = [(index, record.model_dump()) for index, record in records]
        ack = delivery.pending() if delivery is not None else None
        saved = self.store.save_items(run_id, tag, dumped, progress=progress, upto=upto, ack=ack)
        if delivery is not None and saved.acked:
            delivery.acked = True
        return saved.completed

    def close(self) -> None:
        """Release the connections."""
        self.publisher.close()
        self.store.close()


STORE_SCHEMES = (*SINGLE_REDIS, *(f"{scheme}://" for scheme in CLUSTER_SCHEMES))


def check_topology(settings: Settings) -> None:
    """Raise `ConfigurationError` for a store URL, broker and result backend that cannot work together."""
    check_store_url(settings.redis_url or "")
    if settings.clustered and settings.broker_url in (None, "", settings.redis_url):
        raise ConfigurationError(
            "GRAPHRUNNER_BROKER_URL is not set: GRAPHRUNNER_REDIS_URL names a Redis Cluster, which cannot "
            "be the broker (Celery has no Redis Cluster transport); set it to RabbitMQ (amqp://) or a "
            "separate Redis (redis://)"
        )
    settings.result_backend()  # raises when Celery's chord counters have no Redis to live in


def check_store_url(url: str) -> None:
    """Raise `ConfigurationError` naming GRAPHRUNNER_REDIS_URL for a URL the store cannot use."""
    if not url.startswith(STORE_SCHEMES):
        scheme = url.split("://", 1)[0] if "://" in url else url[:20]
        raise ConfigurationError(
            "GRAPHRUNNER_REDIS_URL must start with redis://, rediss://, unix:// or, for a Redis "
            f"Cluster, redis+cluster:// or rediss+cluster://, not {scheme!r}"
        )
