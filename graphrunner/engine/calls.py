"""`ActionCall`: one dispatch the engine asks the runner to make."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from graphrunner.model import DEFAULT_RETRY, RetryPolicy


@dataclass(frozen=True)
class ActionCall:
    """One dispatch: tool, interpolated params, and how to run it."""

    node: str
    tool: str
    params: dict[str, Any]
    timeout: float | None = None
    retry: tuple[RetryPolicy, ...] = DEFAULT_RETRY
    cache: bool = False
    queue: str | None = None
    item_index: int | None = None
    rye: bool = False  # a Rye graph's dispatch: its result is unwrapped as the walker does
    non_finite: str = "fail"  # the graph's `config.non_finite`: "null" writes NaN and ±Infinity as null
