"""Foreach item functions for the cluster foreach tests (imported via PYTHONPATH by worker processes).

Every side effect goes to files under a folder the test owns, so the tests can count how often
each item ran, in which process and when, whether the item ran in this process or another one.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any


def square(value: int) -> dict[str, int]:
    """What a successful item returns: the value and its square."""
    return {"value": value, "square": value * value}


def fail_on(value: int, bad: list[int]) -> dict[str, int]:
    """Raise RuntimeError for a value in `bad`, else `square(value)`."""
    if value in bad:
        raise RuntimeError(f"value {value} is bad")
    return square(value)


def _append(path: Path, line: str) -> None:
    with path.open("a", encoding="utf-8") as fh:
        fh.write(line + "\n")


def timed(value: int, folder: str, seconds: float) -> dict[str, int]:
    """Sleep `seconds`, logging `start`/`end` wall-clock times (one line each) to `folder`/times."""
    log = Path(folder) / "times"
    _append(log, f"{value} start {time.time():.6f}")
    time.sleep(seconds)
    _append(log, f"{value} end {time.time():.6f}")
    return square(value)


def marked(value: int, folder: str, seconds: float = 0.0, hold: str = "") -> dict[str, int]:
    """Append `value pid` to `folder`/calls, sleep `seconds`, return `square(value)`.

    When the file `hold` names this process's group (a worker process and its pool), the item
    logs `value pid` to `folder`/held and blocks instead, until the worker is killed.
    """
    _append(Path(folder) / "calls", f"{value} {os.getpid()}")
    held = Path(hold) if hold else None
    if held is not None and held.exists() and held.read_text(encoding="utf-8").strip() == str(os.getpgrp()):
        _append(Path(folder) / "held", f"{value} {os.getpid()}")
        time.sleep(120)
    if seconds:
        time.sleep(seconds)
    return square(value)


def stamped(value: int, folder: str) -> dict[str, Any]:
    """A result that differs on every call: the number of calls so far for `value`."""
    calls = Path(folder) / f"calls-{value}"
    _append(calls, str(os.getpid()))
    return {"value": value, "call": len(calls.read_text(encoding="utf-8").splitlines())}


def block_once(value: int, folder: str, block_at: int, seconds: float = 0.05) -> dict[str, int]:
    """Count the call for `value` in `folder`/calls-VALUE; the first call for `block_at` blocks.

    The blocking call first writes `folder`/blocked with its process id, so the test knows
    which worker to kill; calls after that (the take-over) do not block.
    """
    folder_path = Path(folder)
    _append(folder_path / f"calls-{value}", str(os.getpid()))
    marker = folder_path / "blocked"
    if value == block_at and not marker.exists():
        marker.write_text(f"{os.getpid()}\n", encoding="utf-8")
        time.sleep(120)
    time.sleep(seconds)
    return square(value)


def unserializable(value: int, bad: list[int]) -> Any:
    """A set (not JSON) for a value in `bad`, else `square(value)`."""
    if value in bad:
        return {value}
    return square(value)


def flaky_once(value: int, folder: str, fail_for: list[int]) -> dict[str, int]:
    """The first call for a value in `fail_for` raises ConnectionError (transient); later calls succeed."""
    calls = Path(folder) / f"calls-{value}"
    _append(calls, str(os.getpid()))
    if value in fail_for and len(calls.read_text(encoding="utf-8").splitlines()) == 1:
        raise ConnectionError(f"value {value}: first attempt fails")
    return square(value)
