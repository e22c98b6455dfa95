"""Python targets of test_cluster_semantics (imported by the in-thread worker and, via PYTHONPATH,
by worker processes). Calls are recorded in files, so any process can count them."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any


def _record(path: str, entry: Any) -> int:
    """Append `entry` as one JSON line to `path`; return how many lines it has now."""
    with Path(path).open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(entry, default=str) + "\n")
    return len(Path(path).read_text(encoding="utf-8").splitlines())


def records(path: str | Path) -> list[Any]:
    """The entries `_record` appended to `path` (none when it does not exist)."""
    file = Path(path)
    if not file.exists():
        return []
    return [json.loads(line) for line in file.read_text(encoding="utf-8").splitlines()]


def flaky(path: str, failures: int, value: Any = "ok") -> dict[str, Any]:
    """Fail with ConnectionError (transient) on the first `failures` calls, then return `value`."""
    calls = _record(path, {"pid": os.getpid()})
    if calls <= failures:
        raise ConnectionError(f"attempt {calls} of {failures} failing")
    return {"value": value, "calls": calls}


async def slow(seconds: float) -> str:
    """Sleep asynchronously, then return."""
    await asyncio.sleep(seconds)
    return "slept"


def doubled(path: str, x: int) -> dict[str, int]:
    """A side effect (one line in `path` per call) and a pure result: `x` doubled."""
    _record(path, {"x": x})
    return {"doubled": 2 * x}


def hook(path: str, event: Any, answer: str | None = None, tag: str = "graph") -> Any:
    """A hook that records the event it saw, who it is (`tag`) and answers `answer`."""
    _record(path, {"tag": tag, "event": event})
    return {"control": answer} if answer else None


def hook_raises(path: str) -> None:
    """A hook that records its call, then fails."""
    _record(path, {"tag": "raises"})
    raise RuntimeError("this hook is broken")
