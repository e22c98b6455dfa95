"""The bare Celery chord baseline: N no-op parts and a body that records when, where and over how many."""

from __future__ import annotations

import json
import os
import time
from typing import Any

from celery import Celery

from benchmarks.baseline import _redis

PART_NAME = "bench.chord_part"
BODY_NAME = "bench.chord_body"


def done_key(group: str) -> str:
    """The Redis key the chord body sets when it has run."""
    return f"bench:chord:{group}"


def register(app: Celery, redis_url: str) -> None:
    """Register the chord part and body on `app` (the baseline app, same options as `bench.step`)."""

    # A chord part must store its result: the Redis backend counts the parts as they return.
    @app.task(name=PART_NAME, acks_late=True, ignore_result=False, shared=False)  # type: ignore[untyped-decorator]
    def part(item: Any) -> None:
        """Do nothing with one item; the result (None) is stored for the chord."""

    @app.task(name=BODY_NAME, acks_late=True, ignore_result=True, shared=False)  # type: ignore[untyped-decorator]
    def body(results: list[Any], key: str) -> None:
        """Record the time, this pool process's pid and the number of part results under `key`."""
        done = {"t": time.time(), "pid": os.getpid(), "n": len(results)}
        _redis(redis_url).set(key, json.dumps(done))
