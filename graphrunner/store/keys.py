"""Every Redis key graphrunner uses, built here and nowhere else.

A run's keys and the shared structures its commit writes (run indexes, the sweeper's
progress deadlines, durable timers) live in one *shard*, so the Lua script that commits a
step touches one Redis Cluster slot. On one Redis there is a single shard and the keys are
`gr:run:{<run_id>}...` and `gr:idx:...`. On a Redis Cluster there are `shards` shards
(GRAPHRUNNER_CLUSTER_SHARDS); a run belongs to the shard its id hashes to, and every key of
the shard starts `gr:{<tag>}:`, where `<tag>` is a short string chosen so that the shards'
slots are spread evenly over the 16,384 slots (and so over the masters). Listing, the
sweeper and the timer pump read every shard; `RunIndex` says what merging them costs.

Graph definitions and their index by graph id, cached results, concurrency keys and the
sweeper's lock are global keys.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from functools import lru_cache

from redis.crc import REDIS_CLUSTER_HASH_SLOTS, key_slot

PREFIX = "gr"


@dataclass(frozen=True)
class Shard:
    """The structures runs of one shard share; `base` is `gr` (one Redis) or `gr:{<tag>}`."""

    base: str

    def index_all(self) -> str:
        """Sorted set: every run id, scored by creation time (ms)."""
        return f"{self.base}:idx:runs"

    def index_graph(self, graph_id: str) -> str:
        """Sorted set: the runs of one graph id, scored by creation time (ms)."""
        return f"{self.base}:idx:graph:{graph_id}"

    def index_status(self, status: str) -> str:
        """Sorted set: the runs in one status, scored by creation time (ms)."""
        return f"{self.base}:idx:status:{status}"

    def index_graph_status(self, graph_id: str, status: str) -> str:
        """Sorted set: the runs of one graph id in one status, scored by creation time (ms).

        The status comes first: statuses hold no `:`, so no graph id can make two keys collide.
        """
        return f"{self.base}:idx:status:{status}:graph:{graph_id}"

    def index_expiry(self) -> str:
        """Sorted set: finished runs by the time (ms) their keys expire; members `[run_id, graph_id]`."""
        return f"{self.base}:idx:expiry"

    def progress(self) -> str:
        """Sorted set: running runs by the time (ms) the sweeper should look at them if nothing happens."""
        return f"{self.base}:idx:progress"

    def timers(self) -> str:
        """Sorted set: durable timers (message tags) by the time (ms) they come due."""
        return f"{self.base}:timers"

    def timer_bodies(self) -> str:
        """Hash: a durable timer's message by its tag, as `<queue>\\n<body>`."""
        return f"{self.base}:timers:bodies"


class KeySpace:
    """The key layout of one store: one shard on one Redis, `shards` shards on a Redis Cluster."""

    def __init__(self, shards: int = 0) -> None:
        if shards < 0:
            raise ValueError(f"shards must be 0 (one Redis) or more, got {shards}")
        self.clustered = shards > 0
        bases = [f"{PREFIX}:{{{tag}}}" for tag in shard_tags(shards)] if shards else [PREFIX]
        self.shards: tuple[Shard, ...] = tuple(Shard(base) for base in bases)

    def shard(self, run_id: str) -> Shard:
        """The shard run `run_id` belongs to."""
        if not self.clustered:
            return self.shards[0]
        return self.shards[zlib.crc32(run_id.encode()) % len(self.shards)]

    def _run_base(self, run_id: str) -> str:
        if not self.clustered:
            return f"{PREFIX}:run:{{{run_id}}}"
        return f"{self.shard(run_id).base}:run:{run_id}"

    def run(self, run_id: str) -> str:
        """Hash: the run record (snapshot, state, status, step, timestamps)."""
        return self._run_base(run_id)

    def steps(self, run_id: str) -> str:
        """Stream: the run's transcript, one entry per committed step (field `r`, JSON; `s`, the
        run's status, on the records of a commit that left it not running)."""
        return f"{self._run_base(run_id)}:steps"

    def waiters(self, run_id: str) -> str:
        """String: how many clients wait for the run to settle (finish or pause); see `settle`."""
        return f"{self._run_base(run_id)}:waiters"

    def settle(self, run_id: str) -> str:
        """List: when the run settles, its status once per client counted in `waiters`, each of
        which takes one (BLPOP); short-lived."""
        return f"{self._run_base(run_id)}:settle"

    def path(self, run_id: str) -> str:
        """List: the executed node names in order, one pushed per committed step."""
        return f"{self._run_base(run_id)}:path"

    def outbox(self, run_id: str) -> str:
        """List: messages a commit sent that are still to be published (broker other than this Redis)."""
        return f"{self._run_base(run_id)}:outbox"

    def items(self, run_id: str, tag: str) -> str:
        """Hash: the results of one foreach's items by index (`tag` is `step.phase` of its start)."""
        return f"{self._run_base(run_id)}:items:{tag}"

    def ended(self, run_id: str, step: int) -> str:
        """Set: child runs of the run's step `step` that have ended and that the step has not
        taken in yet (each child's last commit adds itself; the step takes them in at once)."""
        return f"{self._run_base(run_id)}:ended:{step}"

    def ended_wake(self, run_id: str, step: int) -> str:
        """String: set while a wake-up of the run's step `step` is pending (a child's last commit
        sends one only when it is not set; the step clears it when it takes the ended set)."""
        return f"{self._run_base(run_id)}:ended:{step}:wake"

    def dead_letters(self) -> str:
        """List: messages workers refused (newest first), capped; JSON records."""
        return f"{PREFIX}:{{dead}}" if self.clustered else f"{PREFIX}:dead"

    def dead_count(self) -> str:
        """String: how many messages workers have refused, ever (on the dead letters' slot)."""
        return f"{self.dead_letters()}:count"


@lru_cache(maxsize=8)
def shard_tags(count: int) -> tuple[str, ...]:
    """`count` hash tags, the i-th on a slot in the i-th of `count` equal slot ranges."""
    tags = []
    for i in range(count):
        low, high = i * REDIS_CLUSTER_HASH_SLOTS // count, (i + 1) * REDIS_CLUSTER_HASH_SLOTS // count
        n = 0
        while not low <= key_slot(f"{i}.{n}".encode()) < high:
            n += 1
        tags.append(f"{i}.{n}")
    return tuple(tags)


def graph(content_hash: str) -> str:
    """String: a graph definition (JSON `{text, file, id}`), stored once per content hash."""
    return f"{PREFIX}:graph:{content_hash}"


def graph_versions(graph_id: str) -> str:
    """Sorted set: the content hashes stored for a graph id, scored by when each was first stored (ms).

    The newest `VERSIONS_KEPT` (store/base.py) are kept; a single key on its own slot, written in
    the same pipeline as the definition, never by a script.
    """
    return f"{PREFIX}:versions:{graph_id}"


def cache(digest: str) -> str:
    """String: a cached node result (JSON), under the digest of DESIGN §2.9's cache key."""
    return f"{PREFIX}:cache:{digest}"


def concurrency(key: str) -> str:
    """String: the run id holding a concurrency key (at most one active run per key)."""
    return f"{PREFIX}:ckey:{{{key}}}"


def concurrency_queue(key: str) -> str:
    """List: run ids waiting (status pending) for a concurrency key, oldest first."""
    return f"{PREFIX}:ckey:{{{key}}}:queue"


def sweep_lock() -> str:
    """String with a TTL: held while one sweeper pass runs, so passes never overlap."""
    return f"{PREFIX}:lock:sweep"


def last_sweep() -> str:
    """String: when (ms) the last sweeper pass ended."""
    return f"{PREFIX}:sweep:last"


def signing_key() -> str:
    """String: the cluster's key for the calls messages carry (made by the first worker to need it)."""
    return f"{PREFIX}:key:signing"


def layout() -> str:
    """String: the number of shards the runs of a Redis Cluster were written with."""
    return f"{PREFIX}:layout:shards"


# -- schedules (graphrunner/cluster/schedules/store.py): every key on the `{sched}` slot, so one script
# claims a schedule's ticks and moves its next fire time together, on one Redis or a cluster.
SCHEDULES = f"{PREFIX}:{{sched}}"


def schedule(schedule_id: str) -> str:
    """Hash: a schedule (spec JSON, graph id and hash, source, paused, last claimed tick)."""
    return f"{SCHEDULES}:s:{schedule_id}"


def schedule_ids() -> str:
    """Sorted set: every schedule id, scored by when it was added (ms)."""
    return f"{SCHEDULES}:ids"


def schedules_due() -> str:
    """Sorted set: schedules that are not paused, by when (ms) their next tick fires."""
    return f"{SCHEDULES}:due"


def schedules_unsettled() -> str:
    """Sorted set: claimed ticks whose outcome is not recorded yet (`<id>\\t<tick>`), by claim time (ms)."""
    return f"{SCHEDULES}:unsettled"


def schedule_ticks(schedule_id: str) -> str:
    """Hash: the outcome of each recorded tick (JSON) by tick (epoch s)."""
    return f"{SCHEDULES}:ticks:{schedule_id}"


def schedule_log(schedule_id: str) -> str:
    """Sorted set: the recorded ticks, scored by tick (epoch s); trimmed with `schedule_ticks`."""
    return f"{SCHEDULES}:log:{schedule_id}"


def schedule_runs(schedule_id: str) -> str:
    """Sorted set: the runs a schedule started, scored by their tick (epoch s)."""
    return f"{SCHEDULES}:runs:{schedule_id}"
