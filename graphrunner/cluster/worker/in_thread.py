"""A Celery worker in a thread of this process: for `graphrunner run` and the tests."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from celery.contrib.testing.worker import start_worker

from graphrunner.cluster.worker.runtime import WorkerRuntime


@contextmanager
def local_worker(
    runtime: WorkerRuntime, *, concurrency: int = 2, queues: Sequence[str] = ()
) -> Iterator[Any]:
    """Run a worker of `runtime` with a thread pool until the block ends."""
    wanted = [runtime.settings.queue, *queues]
    with start_worker(
        runtime.app,
        concurrency=concurrency,
        pool="threads",
        perform_ping_check=False,
        loglevel="WARNING",
        shutdown_timeout=30.0,
        queues=list(dict.fromkeys(wanted)),
    ) as worker:
        yield worker
