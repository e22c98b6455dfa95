"""Python targets of the graphs the deployment tests run on worker processes."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any


def slow(seconds: float, marker: str = "", label: str = "") -> dict[str, Any]:
    """Sleep `seconds`; append `label` and this pid to `marker` when it starts and `done` when it ends."""
    if marker:
        with Path(marker).open("a") as fh:
            fh.write(f"start {label} {os.getpid()}\n")
    time.sleep(seconds)
    if marker:
        with Path(marker).open("a") as fh:
            fh.write(f"done {label} {os.getpid()}\n")
    return {"slept": seconds}
