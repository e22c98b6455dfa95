"""Functions the `python` tool calls in tests/unit/test_tool_python.py."""

from __future__ import annotations

import asyncio
import errno
import functools
import time
from os.path import basename  # noqa: F401  (imported, not defined here: `tool_targets:basename` is refused)
from typing import Any

from graphrunner.errors import ToolError

SENTINEL: dict[str, Any] = {"the": "same object"}


def add(a: int, b: int = 1) -> int:
    """Sync: a + b."""
    return a + b


async def async_add(a: int, b: int = 1) -> int:
    """Async: a + b."""
    await asyncio.sleep(0)
    return a + b


def sentinel() -> dict[str, Any]:
    """Returns the module's SENTINEL object itself."""
    return SENTINEL


def raise_value_error(text: str = "bad value") -> None:
    """Raises ValueError."""
    raise ValueError(text)


async def raise_connection_error() -> None:
    """Raises ConnectionRefusedError (a ConnectionError)."""
    raise ConnectionRefusedError("refused by peer")


def raise_timeout_error() -> None:
    """Raises the builtin TimeoutError."""
    raise TimeoutError("remote too slow")


def raise_os_error(code: int) -> None:
    """Raises a plain OSError with errno `code`."""
    raise OSError(code, errno.errorcode.get(code, "?"))


def raise_tool_error() -> None:
    """Raises a ToolError of its own."""
    raise ToolError("mine", error_type="Custom", classification="permission_denied")


def slow(seconds: float) -> str:
    """Sync and slow: blocks its thread for `seconds`."""
    time.sleep(seconds)
    return "done"


async def async_slow(seconds: float) -> str:
    """Async and slow."""
    await asyncio.sleep(seconds)
    return "done"


NOT_CALLABLE = 42


ADD_TEN = functools.partial(add, b=10)  # a partial names no module of its own: refused


class Greeter:
    """A class whose methods are defined here (a reference may name them through the class)."""

    @classmethod
    def kind(cls) -> str:
        """The class's name."""
        return cls.__name__
