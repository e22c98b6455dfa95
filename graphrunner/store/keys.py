"""Every Redis key graphrunner uses, built here and nowhere else.

The keys of one run share the hash tag `{run_id}`, so a run lives on one Redis Cluster
slot and its Lua scripts touch one slot only. Indexes and graph definitions are global.
"""

from __future__ import annotations

PREFIX = "gr"


def run(run_id: str) -> str:
    """Hash: the run record (snapshot, state, status, step, timestamps)."""
    return f"{PREFIX}:run:{{{run_id}}}"


def steps(run_id: str) -> str:
    """Stream: the run's transcript, one entry per committed step (field `r`, JSON)."""
    return f"{PREFIX}:run:{{{run_id}}}:steps"


def path(run_id: str) -> str:
    """List: the executed node names in order, one pushed per committed step."""
    return f"{PREFIX}:run:{{{run_id}}}:path"


def outbox(run_id: str) -> str:
    """List: messages a commit sent that are still to be published (broker other than this Redis)."""
    return f"{PREFIX}:run:{{{run_id}}}:outbox"


def graph(content_hash: str) -> str:
    """String: a graph definition (JSON `{text, file, id}`), stored once per content hash."""
    return f"{PREFIX}:graph:{content_hash}"


def index_all() -> str:
    """Sorted set: every run id, scored by creation time (ms)."""
    return f"{PREFIX}:idx:runs"


def index_graph(graph_id: str) -> str:
    """Sorted set: the runs of one graph id, scored by creation time (ms)."""
    return f"{PREFIX}:idx:graph:{graph_id}"


def index_status(status: str) -> str:
    """Sorted set: the runs in one status, scored by creation time (ms)."""
    return f"{PREFIX}:idx:status:{status}"


def index_graph_status(graph_id: str, status: str) -> str:
    """Sorted set: the runs of one graph id in one status, scored by creation time (ms).

    The status comes first: statuses hold no `:`, so no graph id can make two keys collide.
    """
    return f"{PREFIX}:idx:status:{status}:graph:{graph_id}"


def index_expiry() -> str:
    """Sorted set: finished runs by the time (ms) their keys expire; members `[run_id, graph_id]`."""
    return f"{PREFIX}:idx:expiry"


def items(run_id: str, tag: str) -> str:
    """Hash: the results of one foreach's items by index (`tag` is `step.phase` of its start)."""
    return f"{PREFIX}:run:{{{run_id}}}:items:{tag}"


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


def progress() -> str:
    """Sorted set: running runs by the time (ms) the sweeper should look at them if nothing happens."""
    return f"{PREFIX}:idx:progress"


def timers() -> str:
    """Sorted set: durable timers (message tags) by the time (ms) they come due."""
    return f"{PREFIX}:timers"


def timer_bodies() -> str:
    """Hash: a durable timer's message by its tag, as `<queue>\\n<body>`."""
    return f"{PREFIX}:timers:bodies"


def last_sweep() -> str:
    """String: when (ms) the last sweeper pass ended."""
    return f"{PREFIX}:sweep:last"


def dead_letters() -> str:
    """List: messages workers refused (newest first), capped; JSON records."""
    return f"{PREFIX}:dead"


def dead_count() -> str:
    """String: how many messages workers have refused, ever."""
    return f"{PREFIX}:dead:count"
