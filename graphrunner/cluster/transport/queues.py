"""What an operator sees of the queues: messages waiting and held, timers, dead letters, sweeps."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from graphrunner.store import DeadLetter

if TYPE_CHECKING:
    from graphrunner.cluster.runs.context import Cluster


@dataclass(frozen=True)
class QueueReport:
    """Queue depths, messages held by workers, armed timers, dead letters and the last sweep."""

    depths: dict[str, int]
    held: int | None  # None: the broker does not tell (not Redis)
    timers: int
    dead_total: int
    dead: list[DeadLetter] = field(default_factory=list)
    last_sweep_s: float | None = None  # seconds ago

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON."""
        return {
            "queues": self.depths,
            "held_by_workers": self.held,
            "timers": self.timers,
            "dead_letters": self.dead_total,
            "last_sweep_s": self.last_sweep_s,
            "dead": [d.__dict__ for d in self.dead],
        }


def report(cluster: Cluster, queues: Sequence[str] = (), dead: int = 0) -> QueueReport:
    """The queues the cluster uses (and `queues`), with the newest `dead` dead letters."""
    store, broker = cluster.store, cluster.publisher.broker
    names = [cluster.settings.queue, *queues]
    if broker is not None:
        depths, held = broker.depths([*names, *broker.task_queues()]), broker.unacked()
    else:
        depths, held = _declared_depths(cluster, names), None
    last = store.last_sweep()
    return QueueReport(
        depths=dict(sorted(depths.items())),
        held=held,
        timers=store.timers_armed(),
        dead_total=store.dead_total(),
        dead=store.dead_letters(dead) if dead else [],
        last_sweep_s=None if last is None else round(max(0.0, time.time() - last / 1000), 1),
    )


def _declared_depths(cluster: Cluster, names: Sequence[str]) -> dict[str, int]:
    """Messages ready on each queue, asked of a broker other than Redis (passive declare)."""
    depths = {}
    with cluster.publisher.app.connection_for_read() as connection:
        channel = connection.default_channel
        for name in dict.fromkeys(names):
            try:
                depths[name] = int(channel.queue_declare(queue=name, passive=True).message_count)
            except Exception:  # not declared yet: nothing waits there
                depths[name] = 0
                channel = connection.channel()
    return depths
