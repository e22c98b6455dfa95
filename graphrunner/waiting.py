"""Waiting for a cluster run to settle (finish or pause): what `RunHandle.wait` does.

One round trip reads the run's status and, unless it has settled, counts the client in as
waiting (`Store.watch`); the client then blocks until the commit that settles the run wakes it
(once per run, however many steps it takes, where following the transcript would wake at every
record), with the reads of the result, snapshot and transcript, queued behind the block in the
same round trip (`settle_and_read`): nothing is sent after the commit. When nothing woke it for
`WAIT_SLICE_MS`, it blocks again without the reads, and reads the status itself (a worker of an
older graphrunner wakes no one).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from graphrunner.errors import RunNotFound
from graphrunner.results import RunResult
from graphrunner.streaming import SETTLED, slice_ms, timed_out

if TYPE_CHECKING:
    from graphrunner.engine import RunSnapshot
    from graphrunner.store.base import StepEntry, Store


def wait_for(store: Store, run_id: str, timeout: float | None) -> RunResult:
    """The result of run `run_id` once it has finished or paused; `WaitTimeout` after `timeout`
    seconds, `RunNotFound` for an unknown run."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        status = store.watch(run_id)
        if status is None:
            raise RunNotFound(f"no run with id {run_id!r}")
        if status in SETTLED:
            snap, entries = store.run_and_steps(run_id)
        else:
            snap, entries = _woken(store, run_id, deadline, timeout)
        if snap is None:
            raise RunNotFound(f"no run with id {run_id!r}")
        if snap.status in SETTLED:
            return RunResult.from_snapshot(snap, [e.record for e in entries])
        # resumed since it settled, or woken by what a client that gave up left: wait again (if
        # counted in twice now, the settle leaves one more element, which expires)


def _woken(
    store: Store, run_id: str, deadline: float | None, timeout: float | None
) -> tuple[RunSnapshot | None, list[StepEntry]]:
    """Block until the run settles, counted in by `watch` (and out again when it stops without
    having been woken: a timeout, or a settle no one woke it for); the run and its transcript
    then."""
    woken, snap, entries = store.settle_and_read(run_id, slice_ms(deadline))
    while woken is None and snap is not None and snap.status not in SETTLED:
        if deadline is not None and time.monotonic() >= deadline:
            store.unwatch(run_id)
            raise timed_out(store, run_id, timeout)
        woken = store.wait_settle(run_id, slice_ms(deadline))  # a long wait: not read every slice
        status = store.status_of(run_id) if woken is None else woken
        if status is None or status in SETTLED:
            snap, entries = store.run_and_steps(run_id)
    if woken is None:
        store.unwatch(run_id)
    return snap, entries
