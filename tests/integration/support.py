"""Small helpers the integration tests share (imported as a plain module)."""

from __future__ import annotations

import textwrap
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import redis

from graphrunner.settings import Settings

FAILED = pytest.StashKey[bool]()  # set on a test whose call failed (conftest), for fixtures that explain it


def settings_of(**fields: Any) -> Settings:
    """Settings of a producer the suite operates: every capability granted unless `fields` say
    otherwise (as conftest grants through GRAPHRUNNER_DEFAULT_CAPABILITIES=* to `from_env`)."""
    return Settings(**{"default_capabilities": ("*",), **fields})


def uid() -> str:
    """A short random suffix for graph ids, run ids and queues no other test uses."""
    return uuid.uuid4().hex[:8]


def write(folder: Path, name: str, text: str) -> Path:
    """Write a dedented graph (or hooks) file and return its path."""
    path = folder / name
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def first_pid(path: Path, timeout: float = 60) -> int:
    """The first pid a step wrote into `path`, once written (the file exists before its line does)."""
    wait_for(lambda: path.exists() and bool(path.read_text().split()), timeout, f"a pid in {path}")
    return int(path.read_text().split()[0])


def wait_for(check: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll `check` until it holds; raise `TimeoutError` naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.02)


def lines(path: Path) -> list[str]:
    """The lines of a side-effect log (none when it does not exist yet)."""
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def multi_calls(conn: redis.Redis) -> int:
    """MULTI commands Redis ran: a Redis broker's kombu opens one to record a delivered message and,
    unless the step's commit acknowledged it (cluster/transport/acks.py), one to acknowledge it."""
    return int(conn.info("commandstats").get("cmdstat_multi", {}).get("calls", 0))
