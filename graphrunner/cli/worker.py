"""`graphrunner worker [celery worker options]` and `graphrunner flower [flower options]`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from graphrunner.cli.common import USAGE_ERROR, fail, load_settings
from graphrunner.errors import ConfigurationError

if TYPE_CHECKING:  # imported when used: Celery is not needed for --help
    from graphrunner.cluster.app import Runtime

PASS_THROUGH = {"ignore_unknown_options": True, "allow_extra_args": True, "help_option_names": ["--help"]}


def _runtime() -> Runtime:
    from graphrunner.cluster.app import Runtime

    try:
        return Runtime(load_settings())
    except ConfigurationError as exc:
        fail(f"{exc}: point it at the Redis the cluster uses (e.g. redis://localhost:6379/0)", USAGE_ERROR)


@click.command("worker", context_settings=PASS_THROUGH)
@click.argument("celery_args", nargs=-1, type=click.UNPROCESSED)
def worker(celery_args: tuple[str, ...]) -> None:
    """Run a Celery worker for the configured Redis (GRAPHRUNNER_REDIS_URL).

    Every option is passed to `celery worker`, e.g. `graphrunner worker -c 4 -Q graphrunner,cpu`.
    The worker consumes the default queue (GRAPHRUNNER_QUEUE, `graphrunner`) unless -Q says otherwise.
    """
    from celery import signals

    try:
        runtime = _runtime().serve()
    except ConfigurationError as exc:
        fail(str(exc), USAGE_ERROR)

    def preflight(sender: Any = None, instance: Any = None, **_: Any) -> None:
        if getattr(instance, "app", None) is runtime.app:  # once Celery's logging is set up
            runtime.preflight()

    signals.celeryd_after_setup.connect(preflight, weak=False)
    runtime.app.worker_main(["worker", "--loglevel=WARNING", *celery_args])


@click.command("flower", context_settings=PASS_THROUGH)
@click.argument("flower_args", nargs=-1, type=click.UNPROCESSED)
def flower(flower_args: tuple[str, ...]) -> None:
    """Run Flower against the configured broker; options go to Flower (e.g. --basic-auth=user:pass)."""
    runtime = _runtime()
    runtime.app.start(["flower", *flower_args])


@click.command("beat", context_settings=PASS_THROUGH)
@click.argument("beat_args", nargs=-1, type=click.UNPROCESSED)
def beat(beat_args: tuple[str, ...]) -> None:
    """Run the beat schedule alone (the stalled-run sweeper every GRAPHRUNNER_SWEEP_INTERVAL s).

    The same as starting one worker with -B; options go to `celery beat`. Run one.
    """
    runtime = _runtime()
    runtime.app.start(["beat", "--loglevel=WARNING", *beat_args])
