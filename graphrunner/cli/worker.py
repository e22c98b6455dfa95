"""`graphrunner worker [celery worker options]`, `graphrunner flower [flower options]`, `graphrunner beat`."""

from __future__ import annotations

import signal
import threading
from typing import Any

import click

from graphrunner.cli.common import USAGE_ERROR, fail, load_settings
from graphrunner.errors import ConfigurationError
from graphrunner.settings import Settings

PASS_THROUGH = {"ignore_unknown_options": True, "allow_extra_args": True, "help_option_names": ["--help"]}


def _settings() -> Settings:
    settings = load_settings()
    if not settings.redis_url:
        fail(
            "GRAPHRUNNER_REDIS_URL is not set: point it at the Redis the cluster uses (e.g. redis://localhost:6379/0)",
            USAGE_ERROR,
        )
    return settings


def _runtime(settings: Settings) -> Any:
    from graphrunner.cluster.worker import WorkerRuntime

    try:
        return WorkerRuntime(settings)
    except ConfigurationError as exc:
        fail(str(exc), USAGE_ERROR)


@click.command("worker", context_settings=PASS_THROUGH)
@click.argument("celery_args", nargs=-1, type=click.UNPROCESSED)
def worker(celery_args: tuple[str, ...]) -> None:
    """Run a Celery worker for the configured Redis (GRAPHRUNNER_REDIS_URL).

    Every option is passed to `celery worker`, e.g. `graphrunner worker -c 4 -Q graphrunner,cpu`.
    The worker consumes the default queue (GRAPHRUNNER_QUEUE, `graphrunner`) unless -Q says otherwise.
    Every worker also moves due timers onto their queues and takes its turn at sweeping.
    """
    runtime = _runtime(_settings())
    try:
        runtime.app.worker_main(["worker", "--loglevel=WARNING", *celery_args])
    finally:
        runtime.close()


@click.command("flower", context_settings=PASS_THROUGH)
@click.argument("flower_args", nargs=-1, type=click.UNPROCESSED)
def flower(flower_args: tuple[str, ...]) -> None:
    """Run Flower against the configured broker; options go to Flower (e.g. --basic-auth=user:pass)."""
    from graphrunner.cluster.app import create_app

    create_app(_settings()).start(["flower", *flower_args])


@click.command("beat")
def beat() -> None:
    """Move due timers and sweep stalled runs, without taking steps (until SIGTERM or Ctrl-C).

    Every worker does this already; run `beat` to keep timers and sweeps going where workers
    come and go (for example scaled to zero). Any number may run: a lock keeps one sweep at a time.
    """
    from graphrunner.cluster.context import Cluster
    from graphrunner.cluster.housekeeping import Housekeeper

    cluster = Cluster.connect(_settings())  # no worker: nothing here takes steps
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    keeper = Housekeeper(cluster)
    try:
        while not stop.wait(0.5):
            keeper.tick()
    finally:
        cluster.close()
