"""`RedisStore`: runs, state, transcripts, indexes, messages and graph definitions in Redis.

Per step a worker makes two store round trips: `load_run` (one HMGET) and `commit` (one
EVALSHA, fenced on step, phase and status), which also writes the transcript record, the
status indexes and expiry when the status changes, the sweeper's progress deadline, and
the next step's message: onto the broker's queue itself when the broker is this Redis
(`direct`), into the run's outbox otherwise. Connection errors are retried with backoff,
then raised as `StoreUnavailable`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

import redis

from graphrunner.engine import RunSnapshot
from graphrunner.errors import ConfigurationError, StoreUnavailable
from graphrunner.settings import is_cluster_url
from graphrunner.store import keys
from graphrunner.store.base import (
    VERSIONS_KEPT,
    Ack,
    Aside,
    Committed,
    Created,
    Fence,
    Gather,
    GraphVersion,
    Kept,
    Send,
    Sent,
    StepEntry,
    ack_parts,
    history_start,
    now_ms,
    read_kept,
)
from graphrunner.store.keys import KeySpace, Shard
from graphrunner.store.query import RunPage, RunQuery, RunSummary
from graphrunner.store.redis_aux import (
    CacheMixin,
    DeadLettersMixin,
    ItemsMixin,
    KeysMixin,
    LivenessMixin,
)
from graphrunner.store.redis_clients import cluster_client, single_client
from graphrunner.store.redis_index import RunIndex, expiry_member
from graphrunner.store.replicas import Replicas, call_and_wait

RETENTION_SECONDS = 7 * 24 * 3600  # finished runs expire after this (GRAPHRUNNER_RETENTION)
HISTORY_BYTES = 8 * 1024 * 1024  # a run's kept history at most (GRAPHRUNNER_HISTORY_MAX_BYTES)
WATCH_SECONDS = 24 * 3600  # a run's waiters counter lives this long after a client last counted in
CLUSTER_SHARDS = 16  # shards of the run indexes on a Redis Cluster (GRAPHRUNNER_CLUSTER_SHARDS)
NO_REPLICAS = Replicas()  # commits wait for no replica (GRAPHRUNNER_REDIS_MIN_REPLICAS unset)
__all__ = ["RETENTION_SECONDS", "RedisStore", "now_ms"]


class RedisStore(ItemsMixin, CacheMixin, KeysMixin, LivenessMixin, DeadLettersMixin):
    """The Redis implementation of `Store`."""

    def __init__(
        self,
        client: redis.Redis | redis.RedisCluster,
        *,
        retry_seconds: float = 30.0,
        url: str = "",
        retention_seconds: int = RETENTION_SECONDS,
        direct: bool = True,
        keyspace: KeySpace | None = None,
        history_bytes: int = HISTORY_BYTES,
        replicas: Replicas = NO_REPLICAS,
    ) -> None:
        super().__init__(client, retry_seconds=retry_seconds, url=url, keyspace=keyspace)
        if self.keys.clustered and direct:
            raise ConfigurationError(
                "GRAPHRUNNER_REDIS_URL names a Redis Cluster, which cannot be the broker (Celery has "
                "no Redis Cluster transport): set GRAPHRUNNER_BROKER_URL to RabbitMQ (amqp://) or a "
                "separate Redis"
            )
        self.direct = direct
        self.retention_seconds = retention_seconds
        self.history_bytes = history_bytes
        self.replicas = replicas  # that must acknowledge every commit (`store/replicas.py`)
        self._create = self.script("create_run.lua", sends=True)
        self._commit = self.script("commit_run.lua", sends=True)
        self._push = self.script("push.lua", sends=True)
        self._pump = self.script("pump_timers.lua")
        self._claim = self.script("claim_dispatch.lua")
        self._beat = self.script("beat.lua")
        self._save_item = self.script("save_item.lua", sends=True)  # its `acknowledge`
        self._acquire = self.script("acquire_key.lua")
        self._release = self.script("release_key.lua")
        self._watch = self.script("watch_run.lua")
        self.index = RunIndex(self, self.script("prune_run.lua"), retention_seconds)

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        retry_seconds: float = 30.0,
        retention_seconds: int = RETENTION_SECONDS,
        direct: bool = True,
        shards: int = CLUSTER_SHARDS,
        history_bytes: int = HISTORY_BYTES,
        replicas: Replicas = NO_REPLICAS,
    ) -> RedisStore:
        """A store for `redis://...`, or for a Redis Cluster (`redis+cluster://...`) in `shards` shards."""
        options: dict[str, Any] = {"retry_seconds": retry_seconds, "url": url, "direct": direct}
        options["retention_seconds"] = retention_seconds
        options["history_bytes"] = history_bytes
        options["replicas"] = replicas
        if not is_cluster_url(url):
            return cls(single_client(url), **options)
        return cls(cluster_client(url, shards, retry_seconds), keyspace=KeySpace(shards), **options)

    # -- graphs ----------------------------------------------------------------------------------

    def save_graph(self, content_hash: str, definition: dict[str, Any]) -> None:
        """Store a graph definition once per content hash, and index it under its graph id."""
        graph_id = definition.get("id")

        def write() -> None:  # one round trip; each key on its own slot, so no script
            pipe = self.redis.pipeline(transaction=False)
            pipe.set(keys.graph(content_hash), json.dumps(definition), nx=True)
            if isinstance(graph_id, str):
                versions = keys.graph_versions(graph_id)
                pipe.zadd(versions, {content_hash: now_ms()}, nx=True)  # first stored: kept on a retry
                pipe.zremrangebyrank(versions, 0, -VERSIONS_KEPT - 1)
            pipe.execute()

        self._call(write)

    def load_graph(self, content_hash: str) -> dict[str, Any] | None:
        """The stored definition for a content hash."""
        raw = self._call(lambda: self.redis.get(keys.graph(content_hash)))
        return json.loads(raw) if raw else None

    def graph_versions(self, graph_id: str) -> list[GraphVersion]:
        """The versions stored for `graph_id`, newest first (the newest `VERSIONS_KEPT`)."""

        def read() -> list[GraphVersion]:
            key = keys.graph_versions(graph_id)
            entries = self.redis.zrange(key, 0, VERSIONS_KEPT - 1, desc=True, withscores=True)
            pipe = self.redis.pipeline(transaction=False)
            for content_hash, _ in entries:
                pipe.exists(keys.graph(content_hash))
            present = pipe.execute() if entries else []
            return [GraphVersion(h, int(at), bool(n)) for (h, at), n in zip(entries, present, strict=True)]

        return self._call(read)

    # -- runs ------------------------------------------------------------------------------------

    def create_run(
        self, snap: RunSnapshot, fingerprint: str, sends: Sequence[Send] = (), progress: float | None = None
    ) -> Created:
        """Create the run unless its id exists: record, indexes and first messages in one write."""
        return self.create_runs([(snap, fingerprint, sends, progress)])[0]

    def create_runs(
        self, runs: Sequence[tuple[RunSnapshot, str, Sequence[Send], float | None]]
    ) -> list[Created]:
        """`create_run` for each (snapshot, fingerprint, sends, progress): one round trip on one Redis."""
        calls = [self._create_call(*run) for run in runs]
        replies = self._call(lambda: self.run_scripts(self._create, calls)) if calls else []
        return [Created(True) if int(r[0]) == 1 else Created(False, str(r[1])) for r in replies]

    def _create_call(
        self, snap: RunSnapshot, fingerprint: str, sends: Sequence[Send], progress: float | None
    ) -> tuple[list[str], list[Any]]:
        """The keys and arguments of `create_run.lua` for one run."""
        run_id, status = snap.run_id, snap.status.value
        shard = self.keys.shard(run_id)
        run_keys = [
            self.keys.run(run_id),
            shard.index_all(),
            shard.index_graph(snap.graph_id),
            shard.index_status(status),
            shard.index_graph_status(snap.graph_id, status),
            shard.progress(),
            *self._message_keys(run_id, sends),
        ]
        state = json.dumps(snap.state)
        args = [
            run_id,
            fingerprint,
            status,
            snap.step,
            _meta(snap),
            state,
            snap.graph_id,
            now_ms(),
            _deadline(progress),
            snap.phase,
            history_start(snap, state, self.history_bytes),
            *self._send_args(sends),
        ]
        return run_keys, args

    def load_run(self, run_id: str, with_path: bool = False) -> RunSnapshot | None:
        """The run's snapshot with its state (and its path when asked), or None for an unknown run.

        One round trip either way (with the path, the two reads are pipelined: the keys share a slot).
        """
        if with_path:
            (meta, state), walked = self._call(lambda: self._read_with_path(run_id))
        else:
            meta, state = self._call(lambda: self.redis.hmget(self.keys.run(run_id), "snapshot", "state"))
            walked = []
        return _snapshot(meta, state, walked)

    def load_runs(self, run_ids: Sequence[str]) -> list[RunSnapshot | None]:
        """`load_run` (without the path) of each run, in one round trip."""

        def read() -> list[Any]:
            pipe = self.redis.pipeline(transaction=False)
            for run_id in run_ids:
                pipe.hmget(self.keys.run(run_id), "snapshot", "state")
            return pipe.execute()  # type: ignore[no-any-return]

        rows = self._call(read) if run_ids else []
        return [
            None if meta is None else RunSnapshot.model_validate_json(_joined(meta, state))
            for meta, state in rows
        ]

    def ended(self, run_id: str, step: int) -> list[str]:
        """The child runs of the run's step `step` that ended and are not yet taken in (`Gather`):
        the step reads them while it holds the step's wake-up flag (children that end meanwhile
        join the set and send nothing); they stay until `release_ended`."""
        if self.keys.clustered:
            return []  # nothing is gathered there: each child's wake-up names it
        return sorted(self._call(lambda: self.redis.smembers(self.keys.ended(run_id, step))))

    def release_ended(self, run_id: str, step: int, members: Sequence[str]) -> int:
        """Take `members` out of the step's ended set (its commit took them in) and clear its wake-up
        flag (a child that ends from now on sends one): how many are left, which the step must be
        woken for. One round trip; in this order, no wake-up is ever missed."""
        if self.keys.clustered:
            return 0

        def release() -> list[Any]:
            pipe = self.redis.pipeline(transaction=False)
            if members:
                pipe.srem(self.keys.ended(run_id, step), *members)
            pipe.delete(self.keys.ended_wake(run_id, step))
            pipe.scard(self.keys.ended(run_id, step))
            return pipe.execute()  # type: ignore[no-any-return]

        return int(self._call(release)[-1])

    def drop_ended(self, run_id: str, step: int) -> None:
        """Delete the step's ended set and wake-up flag (the step starts, or is done)."""
        if not self.keys.clustered:
            self._call(
                lambda: self.redis.delete(self.keys.ended(run_id, step), self.keys.ended_wake(run_id, step))
            )

    def _read_with_path(self, run_id: str) -> list[Any]:
        pipe = self.redis.pipeline(transaction=False)
        pipe.hmget(self.keys.run(run_id), "snapshot", "state")
        pipe.lrange(self.keys.path(run_id), 0, -1)
        return pipe.execute()  # type: ignore[no-any-return]

    def commit(
        self,
        fence: Fence,
        snap: RunSnapshot,
        records: Sequence[str] = (),
        walked: Sequence[str] = (),
        sends: Sequence[Send] = (),
        progress: float | None = None,
        ack: Ack | None = None,
        asides: Sequence[Aside] = (),
    ) -> Committed:
        """Write the new snapshot, if the run is at `fence`, with everything that follows it.

        In one atomic write: the snapshot (without its path, which grows every step: the
        nodes `walked` are appended to a list), the transcript `records` (JSON), the status
        indexes and expiry when the status changes, the sweeper's `progress` deadline (epoch
        s; None once the run is no longer running), the `sends` and, when this Redis is the
        broker (`direct`), the acknowledgement of the message being handled (`ack`), and the
        history side records of its transcript records (`asides`), within the history budget.
        With `replicas`, the commit then waits for them; raises `StoreUnavailable` when too few
        acknowledge it in time (`store/replicas.py`).
        """
        run_id, old, new = snap.run_id, fence.status, snap.status.value
        ack_keys, ack_tag = ack_parts(ack if self.direct else None)
        shard = self.keys.shard(run_id)
        run_keys = [
            self.keys.run(run_id),
            self.keys.steps(run_id),
            self.keys.path(run_id),
            shard.progress(),
            shard.timers(),
            shard.timer_bodies(),
            self.keys.outbox(run_id),
            *_status_keys(shard, snap.graph_id, old, new),
            *self._push_queues(sends),
            *ack_keys,
            self.keys.waiters(run_id),  # the last two: whom a commit that settles the run wakes
            self.keys.settle(run_id),
        ]
        args = [
            run_id,
            fence.step,
            fence.phase,
            old,
            snap.step,
            snap.phase,
            new,
            _meta(snap),
            json.dumps(snap.state),
            now_ms(),
            _deadline(progress),
            self.retention_seconds,
            expiry_member(run_id, snap.graph_id),
            len(records),
            *records,
            len(walked),
            *walked,
            *self._send_args(sends),
            ack_tag,
            self.history_bytes,
            len(asides),
            *[part for a in asides for part in (a.index + 1, a.step, a.body)],
        ]
        if self.replicas.count <= 0:
            reply = self._call(lambda: self._commit(keys=run_keys, args=args))
        else:
            reply = self._replicated(snap, run_keys, args)
        if int(reply[0]) == 0:
            step = int(reply[1]) if reply[1] not in ("", None) else None
            return Committed(False, step, str(reply[2]) or None)
        return Committed(True, acked=bool(ack_tag))

    def _replicated(self, snap: RunSnapshot, run_keys: list[str], args: list[Any]) -> Any:
        """The commit script's reply, once `replicas` have acknowledged an applied commit."""
        reply, acked = self._call(
            lambda: call_and_wait(self.redis, self._commit, run_keys, args, self.replicas)
        )
        wanted = self.replicas
        if int(reply[0]) == 1 and acked < wanted.count:
            raise StoreUnavailable(
                f"the commit of run {snap.run_id} at step {snap.step} is written on the master but was "
                f"acknowledged by {acked} of GRAPHRUNNER_REDIS_MIN_REPLICAS={wanted.count} replica(s) "
                f"within {wanted.timeout_ms} ms: its message is delivered again (a fenced duplicate "
                "unless a failover loses the commit)"
            )
        return reply

    def _message_keys(self, run_id: str, sends: Sequence[Send]) -> list[str]:
        """The keys the `sends.lua` library writes: timers, timer bodies, outbox, then push queues."""
        shard = self.keys.shard(run_id)
        return [shard.timers(), shard.timer_bodies(), self.keys.outbox(run_id), *self._push_queues(sends)]

    def _push_queues(self, sends: Sequence[Send]) -> list[str]:
        """The keys `sends.lua` takes for the sends, in order: the queue of each send pushed now (the
        broker is this Redis); for a gathered wake-up, its step's ended set and flag (and queue)."""
        found: list[str] = []
        for send in sends:
            gather = self._gathered(send)
            if gather is not None:
                found += [
                    self.keys.ended(gather.run_id, gather.step),
                    self.keys.ended_wake(gather.run_id, gather.step),
                ]
            if self.direct and send.due is None:
                found.append(send.queue)
        return found

    def _gathered(self, send: Send) -> Gather | None:
        """What `send` gathers, when this store can: never on a Redis Cluster (a child's commit is on
        its own slot, not its parent's), where the wake-up goes as it is."""
        return None if send.gather is None or send.due is not None or self.keys.clustered else send.gather

    def _send_args(self, sends: Sequence[Send]) -> list[Any]:
        """`sends.lua`'s arguments: the count, then mode, due, tag, entry, tracked, queue per send (and
        the member and flag TTL of a gathered wake-up, whose `due` is its ended set's TTL)."""
        args: list[Any] = [len(sends)]
        for send in sends:
            gather = self._gathered(send)
            if send.due is not None:
                mode, entry = "timer", f"{send.queue}\n{send.body}"
            elif self.direct:
                mode, entry = "push", send.body
            else:
                mode, entry = "outbox", json.dumps(send.entry())
            due = math.ceil(send.due * 1000) if send.due is not None else 0  # never moved early
            if gather is not None:
                mode, due = f"gather{'' if self.direct else '_outbox'}", self.retention_seconds
            args += [mode, due, send.tag, entry, int(send.tracked), send.queue]
            if gather is not None:
                args += [gather.member, gather.hold or self.retention_seconds]
        return args

    def run_fields(self, run_id: str) -> dict[str, str]:
        """The raw record fields of a run (status, step, graph_id, timestamps)."""
        fields = ("status", "step", "graph_id", "created_at", "updated_at", "fingerprint")
        values = self._call(lambda: self.redis.hmget(self.keys.run(run_id), *fields))
        return {k: v for k, v in zip(fields, values, strict=True) if v is not None}

    def status_of(self, run_id: str) -> str | None:
        """The run's status (None for an unknown run): one HGET, for item tasks."""
        status = self._call(lambda: self.redis.hget(self.keys.run(run_id), "status"))
        return str(status) if status else None

    def sent(self, run_id: str) -> Sent | None:
        """The message the run last sent to carry itself forward (None if it sent none)."""
        tag, queue, at = self._call(
            lambda: self.redis.hmget(self.keys.run(run_id), "sent_tag", "sent_queue", "sent_at")
        )
        return Sent(tag, queue or "", int(at or 0)) if tag else None

    def claim_dispatch(self, run_id: str, phase: int) -> bool:
        """Claim the sending of what the suspension at `phase` waits for (True once per phase)."""
        return bool(self._call(lambda: self._claim(keys=[self.keys.run(run_id)], args=[phase])))

    def count_redelivery(self, run_id: str, what: str) -> int:
        """Count one more redelivery of `what` (a step and phase, or an item) of a run."""
        return int(self._call(lambda: self.redis.hincrby(self.keys.run(run_id), f"redeliveries:{what}", 1)))

    # -- transcripts -------------------------------------------------------------------------------

    def note(self, run_id: str, record: str) -> None:
        """Append a transcript record (JSON) that commits nothing (the sweeper's repairs)."""
        self._call(lambda: self.redis.xadd(self.keys.steps(run_id), {"r": record}))

    def last_record(self, run_id: str) -> dict[str, Any]:
        """The run's last transcript record ({} when it has none)."""
        entries = self._call(lambda: self.redis.xrevrange(self.keys.steps(run_id), count=1))
        return _entry(*entries[0]).record if entries else {}

    def steps(self, run_id: str, after: str = "-", count: int | None = None) -> list[StepEntry]:
        """Transcript records after stream id `after` (exclusive; `-` for all)."""
        start = "-" if after == "-" else f"({after}"
        entries = self._call(lambda: self.redis.xrange(self.keys.steps(run_id), min=start, count=count))
        return [_entry(i, fields) for i, fields in entries]

    def wait_steps(self, run_id: str, after: str, block_ms: int) -> list[StepEntry]:
        """Block up to `block_ms` for transcript records after `after` (`0` for all)."""
        reply = self._call(lambda: self.redis.xread({self.keys.steps(run_id): after}, block=block_ms))
        return [_entry(i, fields) for _, entries in (reply or []) for i, fields in entries]

    def status_and_steps(self, run_id: str, after: str) -> tuple[str | None, list[StepEntry]]:
        """The run's status (None for an unknown run), then its records after `after`: one round trip.

        Read in that order, a record committed in between comes with the status it says (if any).
        """

        def read() -> list[Any]:
            pipe = self.redis.pipeline(transaction=False)  # the run's keys share a slot
            pipe.hget(self.keys.run(run_id), "status")
            pipe.xrange(self.keys.steps(run_id), min="-" if after == "-" else f"({after}")
            return pipe.execute()  # type: ignore[no-any-return]

        status, entries = self._call(read)
        return (str(status) if status else None), [_entry(i, fields) for i, fields in entries]

    def watch(self, run_id: str) -> str | None:
        """The run's status (None for an unknown run); unless it has settled (finished or paused),
        count this client in as waiting for it: the commit that settles it wakes `wait_settle`."""
        run_keys = [self.keys.run(run_id), self.keys.waiters(run_id)]
        status = self._call(lambda: self._watch(keys=run_keys, args=[WATCH_SECONDS]))
        return str(status) if status else None

    def wait_settle(self, run_id: str, block_ms: int) -> str | None:
        """Block up to `block_ms` for the run to settle, once `watch` counted this client in: the
        status it settled at, or None (and this client is still counted in)."""
        reply = self._call(lambda: self.redis.blpop([self.keys.settle(run_id)], timeout=block_ms / 1000))
        return str(reply[1]) if reply else None

    def settle_and_read(
        self, run_id: str, block_ms: int
    ) -> tuple[str | None, RunSnapshot | None, list[StepEntry]]:
        """`wait_settle`, then `run_and_steps`, in one round trip: the reads wait in Redis behind the
        blocked BLPOP, so they see the run as the commit that settles it left it (or as it is when
        the block ends), and no round trip follows the commit."""

        def read() -> list[Any]:
            pipe = self.redis.pipeline(transaction=False)  # the run's keys share a slot
            pipe.blpop([self.keys.settle(run_id)], timeout=block_ms / 1000)
            self._read_run(pipe, run_id)
            return pipe.execute()  # type: ignore[no-any-return]

        woken, (meta, state), walked, entries = self._call(read)
        found = _snapshot(meta, state, walked), [_entry(i, fields) for i, fields in entries]
        return (str(woken[1]) if woken else None), *found

    def unwatch(self, run_id: str) -> None:
        """Count this client out of the run's waiters (it gave up before the run settled)."""
        self._call(lambda: self.redis.decr(self.keys.waiters(run_id)))

    def history(self, run_id: str) -> tuple[Kept, list[StepEntry]] | None:
        """What the run keeps of its history and its transcript (None for an unknown run): one
        round trip, the transcript read first (a record read has its side record, written with it)."""

        def read() -> list[Any]:
            pipe = self.redis.pipeline(transaction=False)  # the run's keys share a slot
            pipe.xrange(self.keys.steps(run_id))
            pipe.hgetall(self.keys.run(run_id))
            return pipe.execute()  # type: ignore[no-any-return]

        entries, fields = self._call(read)
        if not fields or "snapshot" not in fields:
            return None
        return read_kept(fields), [_entry(i, f) for i, f in entries]

    def run_and_steps(self, run_id: str) -> tuple[RunSnapshot | None, list[StepEntry]]:
        """The run's snapshot with its path (None for an unknown run) and its transcript: one round trip."""

        def read() -> list[Any]:
            pipe = self.redis.pipeline(transaction=False)  # the run's keys share a slot
            self._read_run(pipe, run_id)
            return pipe.execute()  # type: ignore[no-any-return]

        (meta, state), walked, entries = self._call(read)
        return _snapshot(meta, state, walked), [_entry(i, fields) for i, fields in entries]

    def _read_run(self, pipe: Any, run_id: str) -> None:
        """Queue the reads of the run's snapshot, state, path and transcript on `pipe`."""
        pipe.hmget(self.keys.run(run_id), "snapshot", "state")
        pipe.lrange(self.keys.path(run_id), 0, -1)
        pipe.xrange(self.keys.steps(run_id))

    # -- messages ------------------------------------------------------------------------------------

    def push(self, sends: Sequence[Send], run_id: str) -> None:
        """Send messages no commit carries, for run `run_id` (which records the tracked one).

        Onto their queues now (direct), into the run's outbox (to be published), or as
        durable timers.
        """
        if not sends:
            return
        run_keys = [*self._message_keys(run_id, ()), self.keys.run(run_id), *self._push_queues(sends)]
        args = [now_ms(), *self._send_args(sends)]
        self._call(lambda: self._push(keys=run_keys, args=args))

    def pump_timers(self, now: float, limit: int = 100) -> list[Send]:
        """Take the timers due by `now` (epoch s): pushed onto their queues when direct; returned."""
        taken: list[str] = []
        for shard in self.keys.shards:  # on a cluster, one script per shard: each on its own slot
            args = [int(now * 1000), limit - len(taken), int(self.direct)]
            pumped = [shard.timers(), shard.timer_bodies()]
            taken += self._call(lambda k=pumped, a=args: self._pump(keys=k, args=a))  # type: ignore[misc]
            if len(taken) >= limit:
                break
        return [_timer_send(entry) for entry in taken]

    def timer_due(self, run_id: str, tag: str) -> float | None:
        """When run `run_id`'s durable timer `tag` comes due (epoch s), None when it is not armed."""
        score = self._call(lambda: self.redis.zscore(self.keys.shard(run_id).timers(), tag))
        return None if score is None else float(score) / 1000

    def timers_armed(self) -> int:
        """How many durable timers are armed (not yet due or not yet moved), in every shard."""

        def count() -> int:
            pipe = self.redis.pipeline(transaction=False)
            for shard in self.keys.shards:
                pipe.zcard(shard.timers())
            return sum(int(n) for n in pipe.execute())

        return self._call(count)

    def outbox(self, run_id: str) -> list[Send]:
        """The run's messages committed but not yet published (oldest first)."""
        raw = self._call(lambda: self.redis.lrange(self.keys.outbox(run_id), 0, -1))
        return [Send(**json.loads(r)) for r in raw]

    def drop_outbox(self, run_id: str, sends: Sequence[Send]) -> None:
        """Drop these messages (published) from the run's outbox, each by its entry: never another
        publisher's, which a commit that came in between may have put there (one round trip)."""
        if not sends:
            return
        key = self.keys.outbox(run_id)

        def drop() -> None:
            pipe = self.redis.pipeline(transaction=False)  # one key: one slot
            for send in sends:
                pipe.lrem(key, 1, json.dumps(send.entry()))
            pipe.execute()

        self._call(drop)

    # -- listing -------------------------------------------------------------------------------------

    def prune_expired(self, now_ms: int | None = None, batch: int = 1000) -> int:
        """Take runs whose keys the retention expired out of every index; how many were pruned.

        Runs whose record is still there (alive, resumed, expiring later) are left alone;
        `now_ms` (epoch ms, default now) bounds the expiry times looked at, `batch` each read.
        """
        return self.index.prune(now_ms, batch)

    def list_runs(
        self, graph_id: str | None = None, status: str | None = None, limit: int = 50, offset: int = 0
    ) -> Sequence[RunSummary]:
        """Runs newest first, filtered by graph id and/or status."""
        return list(self.page_runs(RunQuery.build(graph_id, status, limit, offset)).runs)

    def page_runs(self, query: RunQuery) -> RunPage:
        """A page of runs matching `query`, newest first, and the cursor of the next page."""
        return self.index.page(query)

    def count_runs(self, status: str) -> int:
        """How many runs are in `status` now, by its index (one ZCARD per shard)."""
        return self.index.count(status)


def _snapshot(meta: str | None, state: str | None, walked: list[str]) -> RunSnapshot | None:
    if meta is None:
        return None
    data = {**json.loads(meta), "state": json.loads(state or "{}"), "path": walked}
    return RunSnapshot.model_validate(data)


def _meta(snap: RunSnapshot) -> str:
    return snap.model_dump_json(exclude={"state", "path"})


def _joined(meta: str, state: str | None) -> str:
    """A stored snapshot (without state and path) and its state as one snapshot's JSON text."""
    return f'{meta[:-1]},"state":{state or "{}"},"path":[]}}'


def _deadline(progress: float | None) -> str:
    return "" if progress is None else str(int(progress * 1000))


def _status_keys(shard: Shard, graph_id: str, old: str, new: str) -> list[str]:
    return [
        shard.index_status(old),
        shard.index_status(new),
        shard.index_graph_status(graph_id, old),
        shard.index_graph_status(graph_id, new),
        shard.index_expiry(),
    ]


def _timer_send(entry: str) -> Send:
    queue, _, body = entry.partition("\n")
    return Send(queue, body, tag="")


def _entry(stream_id: str, fields: dict[str, str]) -> StepEntry:
    return StepEntry(stream_id, json.loads(fields.get("r", "{}")), fields.get("s"))
