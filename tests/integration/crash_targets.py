"""Functions that worker processes call in the crash and scale tests (imported via PYTHONPATH)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path


def slow_step(marker: str, seconds: float) -> dict[str, int]:
    """Record which worker process runs this step, then take `seconds`."""
    folder = Path(marker)
    with (folder / "calls").open("a", encoding="utf-8") as fh:
        fh.write(f"{os.getpid()} {os.getppid()}\n")
    time.sleep(seconds)
    return {"pid": os.getpid()}


def kill_self(marker: str) -> dict[str, int]:
    """Record the attempt, then SIGKILL this (pool) process: a step that always kills its worker."""
    with (Path(marker) / "attempts").open("a", encoding="utf-8") as fh:
        fh.write(f"{os.getpid()}\n")
    os.kill(os.getpid(), signal.SIGKILL)
    return {}
