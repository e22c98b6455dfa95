"""Python targets of test_brokers, imported by worker processes (via PYTHONPATH)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any


def flaky(path: str, failures: int) -> dict[str, Any]:
    """Raise ConnectionError (transient) on the first `failures` calls, then return the count."""
    with Path(path).open("a") as fh:
        fh.write(f"{os.getpid()}\n")
    calls = len(Path(path).read_text().splitlines())
    if calls <= failures:
        raise ConnectionError(f"attempt {calls} of {failures} failing")
    return {"calls": calls}


def slow(path: str, seconds: float) -> dict[str, Any]:
    """Write this pid to `path` (a step has started), sleep `seconds`, return."""
    with Path(path).open("a") as fh:
        fh.write(f"{os.getpid()}\n")
    time.sleep(seconds)
    return {"slept": seconds}


def pause(path: str, run: str, n: int, seconds: float) -> dict[str, Any]:
    """Append `run n` to `path` (the step ran), sleep `seconds`, return `n + 1`."""
    with Path(path).open("a") as fh:
        fh.write(f"{run} {n}\n")
    time.sleep(seconds)
    return {"n": n + 1}
