"""User functions for tests/integration/test_debuggable_failures.py (the in-thread worker imports
them; worker processes through PYTHONPATH)."""

from __future__ import annotations

import time


def check(x: int) -> int:
    """Refuse 3."""
    if x == 3:
        raise ValueError("I do not like 3")
    return x


def boom(x: int) -> int:
    """Call `check`, which refuses 3."""
    return check(x)


def nap(seconds: float) -> float:
    """Hold the worker's slot for `seconds` (a blocking step)."""
    time.sleep(seconds)
    return seconds
