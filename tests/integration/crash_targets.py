"""Functions that worker processes call in the crash and scale tests (imported via PYTHONPATH)."""

from __future__ import annotations

import os
import time
from pathlib import Path


def slow_step(marker: str, seconds: float) -> dict[str, int]:
    """Record which worker process runs this step, then take `seconds`."""
    folder = Path(marker)
    with (folder / "calls").open("a", encoding="utf-8") as fh:
        fh.write(f"{os.getpid()} {os.getppid()}\n")
    time.sleep(seconds)
    return {"pid": os.getpid()}
