"""Sample a run's record size and the broker's queue while the run goes on (a background thread).

Every `interval` seconds one pipelined round trip to the private Redis reads:

- the run's record (the hash `gr:run:{<id>}`): the bytes of every field name and value, summed
  server-side by a small Lua script (nothing but the lengths travels), and `MEMORY USAGE` of
  the key (what Redis allocates for it, overhead included);
- `LLEN` of the graphrunner queue (messages published and not yet taken by a worker; the sum
  over kombu's lists of the queue, one per priority step) and
  `HLEN unacked` (taken by a worker and not yet acknowledged: with `acks_late`, the tasks
  running or prefetched);
- `ZCARD` of the `running` status index: every run in status running (the parent and its kids);
- the run's `status` and `snapshot` fields: the sizes of the snapshot's `wait` (where a suspended
  step keeps the kids in flight) and `inputs` (the items), `len(wait.open)`, and `phase` (bumped
  by every commit that suspends the step again).

`command_calls` and `without_probe` count the Redis commands a run sent, less the probe's own.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import redis

from graphrunner.cluster.transport.broker import PRIORITY_STEPS, UNACKED, queue_lists
from graphrunner.store.keys import KeySpace

# The record's fields and, for each, len(name) + len(value) in bytes.
FIELD_BYTES = """
local flat = redis.call('HGETALL', KEYS[1])
local out = {}
for i = 1, #flat, 2 do
  out[#out + 1] = flat[i]
  out[#out + 1] = #flat[i] + #flat[i + 1]
end
return out
"""


@dataclass(frozen=True)
class Sample:
    """One look at Redis: seconds since the probe started, and what it read."""

    t: float
    record_bytes: int
    memory_usage: int
    queue: int
    unacked: int
    running: int
    status: str
    fields: dict[str, int]
    wait_bytes: int  # the snapshot's `wait` (JSON, compact): the kids in flight live here
    inputs_bytes: int  # the snapshot's `inputs` (JSON, compact): the items themselves
    open_kids: int  # len(wait.open)
    phase: int  # the snapshot's phase: bumped by every commit that suspends the step again


@dataclass
class Probe:
    """Samples of one run, taken by a daemon thread between `start` and `stop`."""

    url: str
    run_id: str
    queue: str
    interval: float = 0.02
    samples: list[Sample] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        """Start sampling in the background."""
        self._thread = threading.Thread(target=self._loop, name=f"probe-{self.run_id}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Take one last sample (the run's final record) and stop the thread."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _loop(self) -> None:
        keys = KeySpace()
        record, running = keys.run(self.run_id), keys.shards[0].index_status("running")
        client = redis.Redis.from_url(self.url, decode_responses=True, single_connection_client=True)
        script = client.register_script(FIELD_BYTES)
        started = time.monotonic()
        try:
            while True:
                last = self._stop.is_set()
                self.samples.append(self._read(client, script, record, running, time.monotonic() - started))
                if last:
                    return
                self._stop.wait(self.interval)
        finally:
            client.close()

    def _read(self, client: redis.Redis, script: Any, record: str, running: str, t: float) -> Sample:
        pipe = client.pipeline(transaction=False)
        script(keys=[record], client=pipe)
        pipe.memory_usage(record, samples=0)
        for name in queue_lists(self.queue):
            pipe.llen(name)
        pipe.hlen(UNACKED)
        pipe.zcard(running)
        pipe.hmget(record, "status", "snapshot")
        flat, usage, *depths, unacked, count, (status, raw) = pipe.execute()
        queued = sum(depths)
        fields = {str(flat[i]): int(flat[i + 1]) for i in range(0, len(flat), 2)}
        snapshot = json.loads(raw) if raw else {}
        wait, inputs = snapshot.get("wait"), snapshot.get("inputs")
        return Sample(
            t,
            sum(fields.values()),
            int(usage or 0),
            queued,
            unacked,
            count,
            str(status),
            fields,
            _json_bytes(wait),
            _json_bytes(inputs),
            len((wait or {}).get("open") or ()),
            int(snapshot.get("phase") or 0),
        )

    # -- figures -------------------------------------------------------------------------------------------

    def during(self) -> list[Sample]:
        """The samples taken while the run was still running (before its last commit)."""
        return [s for s in self.samples if s.status == "running"]

    def biggest(self) -> Sample | None:
        """The sample with the largest record while the run was running (the first one, on a tie)."""
        return max(self.during(), key=lambda s: s.record_bytes, default=None)

    def final(self) -> Sample | None:
        """The last sample: taken after the run has finished."""
        return self.samples[-1] if self.samples else None

    def peak(self, name: str, samples: list[Sample] | None = None) -> int:
        """The largest value of one sampled figure (`queue`, `unacked`, `running`, ...)."""
        return max((int(getattr(s, name)) for s in (self.samples if samples is None else samples)), default=0)


# What one sample sends (INFO commandstats counts the script's HGETALL too; redis-py checks that the
# script is loaded, SCRIPT EXISTS, before every pipelined call): subtracted from a run's counts so
# that they are the cluster's own.
PER_SAMPLE = ("evalsha", "hgetall", "memory", "llen", "hlen", "zcard", "hmget", "script")


def command_calls(client: redis.Redis) -> Counter[str]:
    """Calls per Redis command so far (INFO commandstats; commands inside Lua scripts included)."""
    stats = client.info("commandstats")
    return Counter({name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in stats.items()})


def without_probe(delta: Counter[str], samples: int) -> Counter[str]:
    """`delta` (calls during a run) less what a probe taking `samples` samples sent itself."""
    own = Counter(delta)
    for name in PER_SAMPLE:
        key = "memory|usage" if name == "memory" and "memory|usage" in own else name
        own[key] -= samples * (len(PRIORITY_STEPS) if name == "llen" else 1)
    own["info"] -= 1  # the INFO that read the counts after the run
    return +own


def _json_bytes(value: Any) -> int:
    """Bytes of `value` as compact JSON (as the store writes it); 0 for None."""
    return 0 if value is None else len(json.dumps(value, separators=(",", ":")).encode())
