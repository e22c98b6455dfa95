"""Per-node statistics of a graph's recent runs, from their transcripts (no metrics backend):
steps taken, run time p50/p95/max, failure rate (steps ending `error` of all), queue wait p50/p95
and retries. A pure function over parsed records; `reading.graph_stats` reads them, capped."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from graphrunner.services.records import STEP_STATUSES, AnyRecord, RetryRecord, StepRecord, UnknownRecord
from graphrunner.services.timings import percentile

WINDOWS = {"1h": 3_600_000, "24h": 86_400_000, "7d": 604_800_000}  # what the graph page offers, in ms
DEFAULT_WINDOW = "24h"


@dataclass
class _Node:
    """What is counted of one node while the records are read."""

    steps: int = 0
    errors: int = 0
    retries: int = 0
    durations: list[float] = field(default_factory=list)
    queued: list[float] = field(default_factory=list)

    def view(self, node: str) -> dict[str, Any]:
        durations, queued = sorted(self.durations), sorted(self.queued)
        return {
            "node": node,
            "steps": self.steps,
            "errors": self.errors,
            "failure_rate": self.errors / self.steps if self.steps else None,
            "p50_ms": percentile(durations, 0.50),
            "p95_ms": percentile(durations, 0.95),
            "max_ms": durations[-1] if durations else None,
            "queue_p50_ms": percentile(queued, 0.50),
            "queue_p95_ms": percentile(queued, 0.95),
            "retries": self.retries,
        }


def node_stats(records: Iterable[AnyRecord]) -> list[dict[str, Any]]:
    """Per node, in the order nodes first appear: `steps` (step records), `errors` (those with
    status `error`), `failure_rate` (errors / steps; None without steps), run time `p50_ms`,
    `p95_ms`, `max_ms`, queue wait `queue_p50_ms`, `queue_p95_ms` (None where not recorded),
    and `retries` (retried attempts)."""
    nodes: dict[str, _Node] = {}
    for record in records:
        if record.node is None or isinstance(record, UnknownRecord):
            continue
        if isinstance(record, RetryRecord):
            nodes.setdefault(record.node, _Node()).retries += 1
        elif isinstance(record, StepRecord) and record.status in STEP_STATUSES:
            _count(nodes.setdefault(record.node, _Node()), record)
    return [counted.view(node) for node, counted in nodes.items()]


def _count(node: _Node, record: StepRecord) -> None:
    node.steps += 1
    node.errors += record.status == "error"
    if record.duration_ms is not None:
        node.durations.append(record.duration_ms)
    if record.queue_ms is not None:
        node.queued.append(record.queue_ms)
