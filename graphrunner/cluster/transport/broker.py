"""The broker as the cluster sees it: queues to push onto, and whether a message is still waiting.

`Broker` is what the publisher, the sweeper and the vouching need of it. `RedisBroker` reads and
writes kombu's Redis transport: its queues and unacknowledged messages. `MemoryBroker` is a
`MemoryStore`'s own queues (the unit tests take messages from them and run them).

kombu keeps a Redis queue as a list (`LPUSH` to send, `BRPOP` to take: the right end is
next), one list per priority step (`<queue>\\x06\\x16<n>` for n > 0), and every message a
worker holds unacknowledged in the hash `unacked` (delivery tag to message) with its
delivery time in the sorted set `unacked_index`. A worker restores to its queue every
message whose `unacked_index` time is older than the visibility timeout. These names are
kombu's (`kombu.transport.redis.Channel`); this module is the only place that knows them.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

import redis

from graphrunner.cluster.transport.envelope import sent_at
from graphrunner.store import Sent
from graphrunner.store.memory_store import MemoryStore

BINDINGS = "_kombu.binding.*"  # one set per exchange: `<routing key>\x06\x16<pattern>\x06\x16<queue>`
UNACKED = "unacked"
UNACKED_INDEX = "unacked_index"
PRIORITY_SEP = "\x06\x16"
PRIORITY_STEPS = (0, 3, 6, 9)


def queue_lists(queue: str) -> list[str]:
    """The Redis lists of one kombu queue, one per priority step."""
    return [queue if p == 0 else f"{queue}{PRIORITY_SEP}{p}" for p in PRIORITY_STEPS]


class Broker(Protocol):
    """Queues messages are pushed onto and looked for."""

    def push(self, queue: str, body: str) -> None: ...

    def push_many(self, queue: str, bodies: Sequence[str]) -> None: ...

    def lost(self, sent: Sent) -> bool: ...

    def depths(self, queues: Iterable[str]) -> dict[str, int]: ...

    def refresh(self, tags: Sequence[str]) -> None: ...

    def task_queues(self) -> list[str]: ...

    def unacked(self) -> int: ...

    def close(self) -> None: ...


class RedisBroker:
    """A Redis broker's queues and unacknowledged messages, seen through kombu's layout."""

    def __init__(self, client: Any) -> None:
        self.redis = client

    @classmethod
    def from_url(cls, url: str) -> RedisBroker:
        """A view of the Redis broker at `url`."""
        return cls(
            redis.Redis.from_url(url, decode_responses=True, socket_connect_timeout=2, socket_timeout=15)
        )

    def push(self, queue: str, body: str) -> None:
        """Put an envelope on `queue` (as kombu's `_put` does)."""
        self.redis.lpush(queue, body)

    def push_many(self, queue: str, bodies: Sequence[str]) -> None:
        """Put envelopes on `queue` in one command, taken in the order given (as `push` each)."""
        if bodies:
            self.redis.lpush(queue, *bodies)

    def held(self, tag: str) -> bool:
        """A worker holds message `tag` unacknowledged (kombu restores it if that worker dies)."""
        return bool(self.redis.hexists(UNACKED, tag))

    def lost(self, sent: Sent) -> bool:
        """Message `sent` is neither held by a worker nor waiting on its queue.

        A message not held is waiting unless its queue is empty, or the next message on the
        queue was sent after it (a queue is first in, first out: it was taken before that one).
        """
        if self.held(sent.tag):
            return False
        pipe = self.redis.pipeline(transaction=False)
        for name in queue_lists(sent.queue):
            pipe.lindex(name, -1)
        tails = [t for t in pipe.execute() if t is not None]
        if not tails:
            return not self.held(sent.tag)  # taken meanwhile: held now, unless it was lost
        stamps = [sent_at(t) for t in tails]
        return all(s is not None and s > sent.at for s in stamps) and not self.held(sent.tag)

    def depths(self, queues: Iterable[str]) -> dict[str, int]:
        """Messages waiting on each queue (all priorities)."""
        names = list(dict.fromkeys(queues))
        pipe = self.redis.pipeline(transaction=False)
        for queue in names:
            for name in queue_lists(queue):
                pipe.llen(name)
        counts = pipe.execute()
        steps = len(PRIORITY_STEPS)
        return {q: sum(counts[i * steps : (i + 1) * steps]) for i, q in enumerate(names)}

    def task_queues(self) -> list[str]:
        """The task queues workers have declared (Celery binds each to an exchange of its name)."""
        found = []
        for key in self.redis.scan_iter(BINDINGS):
            exchange = key.removeprefix(BINDINGS[:-1])
            for member in self.redis.smembers(key):
                queue = member.split(PRIORITY_SEP)[-1]
                if queue == exchange:
                    found.append(queue)
        return sorted(set(found))

    def unacked(self) -> int:
        """Messages held unacknowledged by workers (all queues)."""
        return int(self.redis.hlen(UNACKED))

    def refresh(self, tags: Sequence[str]) -> None:
        """Mark messages held by a live worker as delivered now, so no worker restores them."""
        if tags:
            self.redis.zadd(UNACKED_INDEX, dict.fromkeys(tags, time.time()), xx=True)

    def close(self) -> None:
        """Release the client's connections."""
        self.redis.close()


class MemoryBroker:
    """A `MemoryStore`'s queues as a broker. Nothing holds a message taken off one (whoever takes
    it runs it at once), so a message not waiting on its queue is lost."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store

    def push(self, queue: str, body: str) -> None:
        """Put a message on `queue`."""
        self.store.enqueue(queue, body)

    def push_many(self, queue: str, bodies: Sequence[str]) -> None:
        """Put messages on `queue`, taken in the order given."""
        for body in bodies:
            self.store.enqueue(queue, body)

    def lost(self, sent: Sent) -> bool:
        """Message `sent` is not waiting on its queue."""
        return not self.store.waiting(sent.tag, sent.queue)

    def depths(self, queues: Iterable[str]) -> dict[str, int]:
        """Messages waiting on each queue."""
        return {q: len(self.store.queues.get(q, ())) for q in queues}

    def refresh(self, tags: Sequence[str]) -> None:
        """Nothing to vouch for: no worker holds these messages."""

    def task_queues(self) -> list[str]:
        """The queues messages were pushed onto."""
        return sorted(self.store.queues)

    def unacked(self) -> int:
        """None held: a message taken off a queue is run at once."""
        return 0

    def close(self) -> None:
        """Nothing to release."""
