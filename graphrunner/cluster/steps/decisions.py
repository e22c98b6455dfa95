"""What a step on a worker does next, decided by the helpers for foreach, items and child runs.

The helpers (`fanout`, `sequence`, `children`) plan; only the executor commits and sends.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from graphrunner.cluster.waits.base import Wait
from graphrunner.engine import Outcome
from graphrunner.services.records import AnyRecord


@dataclass(frozen=True)
class Complete:
    """Complete the step with `outcome` (through the engine and the error hooks), and commit it."""

    outcome: Outcome
    hook_round: int = 0
    retries: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True)
class Suspend:
    """Commit `wait` for the step (phase + 1) with `records` and snapshot `changes`, then send what
    it waits for: a timer, the next foreach chunk, the child run, or the step again."""

    wait: Wait
    records: tuple[AnyRecord, ...] = ()
    changes: dict[str, Any] = field(default_factory=dict)
    kids: tuple[str, ...] = ()  # a `kids` wait: the kid runs to create once the wait is committed


@dataclass(frozen=True)
class Checkpoint:
    """Save a sequential item's record (`item`: index and record), commit `wait` (phase + 1),
    and go on with the next item in this task."""

    wait: Wait
    item: tuple[int, dict[str, Any]]


@dataclass(frozen=True)
class Collect:
    """Save `item` (if any), then complete the foreach with the records of its first `count`
    items under `tag`, in item order."""

    tag: str
    count: int
    hook_round: int = 0
    item: tuple[int, dict[str, Any]] | None = None


@dataclass(frozen=True)
class Poll:
    """Nothing to commit yet: look again in `delay` seconds (the same step and phase)."""

    delay: float


@dataclass(frozen=True)
class Idle:
    """Nothing to do: what the step waits for has not happened (a stray wake-up)."""


Decision = Complete | Suspend | Checkpoint | Collect | Poll | Idle
