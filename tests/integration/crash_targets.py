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


def tick(marker: str, run: str, pause: float) -> dict[str, int]:
    """Count one call for `run` (a line in `<marker>/ticks-<run>`), after `pause` seconds."""
    time.sleep(pause)
    with (Path(marker) / f"ticks-{run}").open("a", encoding="utf-8") as fh:
        fh.write(f"{os.getpid()}\n")
    return {"pid": os.getpid()}


def flaky_once(marker: str) -> dict[str, int]:
    """Fail (transient) on the first call, succeed after; calls counted in `<marker>/flaky`."""
    path = Path(marker) / "flaky"
    with path.open("a", encoding="utf-8") as fh:
        fh.write(f"{os.getpid()}\n")
    if len(path.read_text().splitlines()) == 1:
        raise ConnectionError("the first call fails")
    return {"pid": os.getpid()}
