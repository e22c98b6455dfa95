"""An event loop per worker thread, kept between tasks: steps and items are coroutines."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class ThreadLoops:
    """Runs coroutines on this thread's own event loop (created on first use, kept)."""

    def __init__(self) -> None:
        self._local = threading.local()
        self._loops: list[asyncio.AbstractEventLoop] = []
        self._lock = threading.Lock()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` to the end on this thread's loop."""
        loop = getattr(self._local, "loop", None)
        if loop is None or loop.is_closed():
            loop = self._local.loop = asyncio.new_event_loop()
            with self._lock:
                self._loops.append(loop)
        return loop.run_until_complete(coro)

    def close(self) -> None:
        """Close the loops of the threads that ran coroutines (the worker stops)."""
        with self._lock:
            loops, self._loops = self._loops, []
        for loop in loops:
            if not loop.is_running() and not loop.is_closed():
                loop.run_until_complete(loop.shutdown_default_executor())
                loop.close()
