"""What a step on a worker does next, decided by the kind of wait it starts or goes on with.

The kinds of wait (`graphrunner.cluster.waits`) decide; only the executor commits and sends.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from graphrunner.engine import Outcome, Retried
from graphrunner.engine.waiting import Wait
from graphrunner.services.records import AnyRecord
from graphrunner.services.timings import ItemTimes

if TYPE_CHECKING:
    from graphrunner.cluster.runs.items import ItemRecord


@dataclass(frozen=True)
class Complete:
    """Complete the step with `outcome` (through the engine and the error hooks), and commit it."""

    outcome: Outcome
    hook_round: int = 0
    retries: tuple[Retried, ...] = ()
    times: ItemTimes | None = None  # a foreach's items, as its step record keeps their timing


@dataclass(frozen=True)
class Suspend:
    """Commit `wait` for the step (phase + 1) with `records` and snapshot `changes`, then do what
    its kind does after the commit: send a foreach chunk, create child runs (`kids`)."""

    wait: Wait
    records: tuple[AnyRecord, ...] = ()
    changes: dict[str, Any] = field(default_factory=dict)
    kids: tuple[str, ...] = ()  # child runs: the keys of those to create once the wait is committed


@dataclass(frozen=True)
class Checkpoint:
    """Save a sequential item's record (`item`: index and record) under `tag`, commit `wait`
    (phase + 1), and go on with the wait in this task."""

    wait: Wait
    tag: str
    item: tuple[int, ItemRecord]


@dataclass(frozen=True)
class Collect:
    """Save `item` (if any), then complete the foreach with the records of its first `count`
    items under `tag`, in item order."""

    tag: str
    count: int
    hook_round: int = 0
    item: tuple[int, ItemRecord] | None = None


@dataclass(frozen=True)
class Poll:
    """Nothing to commit yet: look again in `delay` seconds (the same step and phase)."""

    delay: float


@dataclass(frozen=True)
class Idle:
    """Nothing to do: what the step waits for has not happened (a stray wake-up)."""


Decision = Complete | Suspend | Checkpoint | Collect | Poll | Idle
