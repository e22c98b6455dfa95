"""What the executor sends to the broker: step messages, and foreach items as chords."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from graphrunner.engine import RunSnapshot
from graphrunner.graph import Graph


class Sender(Protocol):
    """Sends the messages that carry runs forward (the Celery `Runtime` implements it)."""

    def enqueue(self, snap: RunSnapshot, graph: Graph | None = None, countdown: float | None = None) -> None:
        """The message that takes (or goes on with) the step after `snap`."""
        ...

    def finished(self, snap: RunSnapshot) -> None:
        """A run has finished: wake its parent's step, hand its concurrency key on."""
        ...

    def fan_out(self, snap: RunSnapshot, graph: Graph, items: Sequence[dict[str, Any]]) -> None:
        """Send foreach item messages; when all have run, the step after `snap` goes on (a chord)."""
        ...
