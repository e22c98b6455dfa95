"""A worker process sets up OpenTelemetry itself, from the `OTEL_*` variables, where its spans go.

With the prefork pool every pool process sets up the SDK after the fork (`worker_process_init`):
the batch span processor's thread and the exporters' connections must be the child's own.
With the solo or threads pool the worker's own process does (`worker_init`). A pool process
flushes what it holds before it exits. A prefork worker's own process (timers, sweeps, refused
messages) exports its metrics through a meter provider of its own, never the global one, so
nothing of it is inherited by the pool. Nothing is set up when no `OTEL_*` asks for it.
"""

from __future__ import annotations

from typing import Any

from graphrunner.telemetry import metrics, sdk

_connected = False
_main_meter: Any = None


def connect() -> None:
    """Connect the set-up to Celery's worker signals (once per process)."""
    global _connected
    if _connected:
        return
    from celery import signals

    signals.worker_init.connect(_worker_init, weak=False)
    signals.worker_process_init.connect(_pool_process_init, weak=False)
    signals.worker_process_shutdown.connect(_pool_process_shutdown, weak=False)
    _connected = True


def _worker_init(sender: Any = None, **_: Any) -> None:
    if not _forks(sender):
        sdk.configure("worker")
        return
    global _main_meter
    _main_meter = sdk.main_process_meter()  # the timers, sweeps and refusals of the main process
    metrics.use_meter_provider(_main_meter)


def _pool_process_init(**_: Any) -> None:
    metrics.use_meter_provider(None)  # the main process's (its reader's thread did not fork with it)
    sdk.configure("worker")


def _pool_process_shutdown(**_: Any) -> None:
    sdk.shutdown()


def _forks(worker: Any) -> bool:
    """True when `worker`'s pool forks processes (prefork): they set up the SDK themselves."""
    pool = getattr(worker, "pool_cls", None)
    name = (
        pool
        if isinstance(pool, str)
        else getattr(pool, "__module__", "") + "." + getattr(pool, "__name__", "")
    )
    return "prefork" in name
