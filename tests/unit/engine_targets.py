"""Python functions the engine tests call through the `python` tool and `next: {fn}`."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

calls: Counter[str] = Counter()


def reset() -> None:
    """Forget every recorded call."""
    calls.clear()


def flaky(key: str, failures: int, value: Any = "ok") -> Any:
    """Fail with ConnectionError the first `failures` calls for `key`, then return `value`."""
    calls[key] += 1
    if calls[key] <= failures:
        raise ConnectionError(f"{key}: attempt {calls[key]} failed")
    return value


def count(key: str) -> int:
    """Record a call under `key` and return how many there were."""
    calls[key] += 1
    return calls[key]


def boom(message: str = "boom") -> None:
    """Always raise RuntimeError."""
    raise RuntimeError(message)


async def slow(seconds: float) -> str:
    """Sleep asynchronously, then return."""
    await asyncio.sleep(seconds)
    return "slept"


def hook_answer(answer: str, key: str = "hook") -> dict[str, Any]:
    """A hook that records its call and answers `answer`."""
    calls[key] += 1
    return {"control": answer}


def hook_raises() -> None:
    """A hook that fails."""
    raise RuntimeError("hook failed")


def route_by_n(state: dict[str, Any]) -> str:
    """Route to `big` or `small` by `state.n`; `ghost` when n is negative."""
    if state["n"] < 0:
        return "ghost"
    return "big" if state["n"] > 10 else "small"


def route_raises(state: dict[str, Any]) -> str:
    """A routing function that raises."""
    raise ValueError("cannot route")


def unserializable() -> Any:
    """A result JSON cannot hold."""
    return {1, 2}
