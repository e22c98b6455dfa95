"""User code that fails, for tests/unit/test_tracebacks.py: Python tool functions, a routing
function, a custom reducer and a tool class. Their line numbers do not matter: tests look for
function names and source lines."""

from __future__ import annotations

from typing import Any

from graphrunner.errors import ToolError
from graphrunner.tools import ToolContext


def check(x: int) -> int:
    """Refuse 3."""
    if x == 3:
        raise ValueError("I do not like 3")
    return x


def boom(x: int) -> int:
    """Call `check`, which refuses 3."""
    return check(x)


async def aboom(x: int) -> int:
    """The async `boom`."""
    return check(x)


def refuse() -> None:
    """Raise a classified ToolError of its own."""
    raise ToolError("not today", error_type="NotToday", classification="permanent")


def down() -> None:
    """A connection error: transient, so it is retried."""
    raise ConnectionError("the remote is down")


def ping(n: int) -> None:
    """Recurse `n` times through `pong` (frames Python does not fold into one), then fail."""
    if n == 0:
        raise RuntimeError("bottom")
    pong(n - 1)


def pong(n: int) -> None:
    """See `ping`."""
    ping(n)


def fail_on(value: int) -> int:
    """Fail for 3 (a foreach item)."""
    return boom(value)


def route_raises(state: dict[str, Any]) -> str:
    """A routing function that fails."""
    raise KeyError("no route for this state")


def reducer_raises(current: Any, update: Any) -> Any:
    """A custom reducer that fails."""
    raise TypeError("cannot merge these")


class Broken:
    """A tool with a bug: its `run` raises an exception that is not a ToolError."""

    name = "test/broken"
    version = "1"

    async def run(self, params: dict[str, Any], context: ToolContext) -> Any:
        return {}["missing"]
