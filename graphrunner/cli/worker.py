"""`graphrunner worker [celery worker options]` and `graphrunner beat`."""

from __future__ import annotations

import inspect
import signal
import threading
from typing import Any

import click

from graphrunner.cli.common import OWN_HELP, USAGE_ERROR, fail
from graphrunner.cli.connect import server_settings
from graphrunner.errors import ConfigurationError
from graphrunner.settings import Settings


@click.command("worker", context_settings=OWN_HELP)
@click.argument("celery_args", nargs=-1, type=click.UNPROCESSED)
def worker(celery_args: tuple[str, ...]) -> None:
    """Run a Celery worker for the configured Redis (GRAPHRUNNER_REDIS_URL).

    The state store is GRAPHRUNNER_REDIS_URL: one Redis (redis://) or a Redis Cluster
    (redis+cluster://host:port, which needs GRAPHRUNNER_BROKER_URL, and
    GRAPHRUNNER_RESULT_BACKEND_URL when that broker is RabbitMQ; see docs/operations.md).

    Every option is passed to `celery worker`, e.g. `graphrunner worker -c 4 -Q graphrunner,cpu`
    (Celery's options are listed below). The worker consumes the default queue (GRAPHRUNNER_QUEUE,
    `graphrunner`) unless -Q says otherwise, moves due timers onto their queues and takes its turn
    at sweeping. GRAPHRUNNER_WORKER_CONFIG names the team's worker configuration (a .py file or a
    module: its tools and deployment hooks). SIGTERM is a warm shutdown: no new steps are taken and
    the steps in flight finish. Settings that cannot work are refused before it starts, and so is
    a GRAPHRUNNER_REDIS_URL whose password is an example file's placeholder (`change-me`).

    It logs at WARNING unless told otherwise (Celery's line per task is INFO): a failed step is
    one WARNING line with the run id, step, node and error; `--loglevel INFO` adds the step's
    traceback, when it has one (also kept in the transcript: `graphrunner steps RUN --traceback`).
    """
    if "-h" in celery_args or "--help" in celery_args:
        _help_with_celery_options()
    settings = server_settings()
    from graphrunner.cluster.worker.preflight import check_consumer_timeout, check_stop_grace, check_worker

    try:
        check_worker(settings, celery_args)
        runtime = _runtime(settings)
    except ConfigurationError as exc:
        fail(str(exc), USAGE_ERROR)
    try:
        check_stop_grace(settings)
        check_consumer_timeout(settings)
    except ConfigurationError as exc:
        runtime.close()
        fail(str(exc), USAGE_ERROR)
    try:
        # WARNING by default: failed steps, not Celery's line per task; a later --loglevel wins
        runtime.app.worker_main(["worker", "--loglevel=WARNING", *celery_args])
    finally:
        runtime.close()


def _runtime(settings: Settings) -> Any:
    from graphrunner.cluster.worker.runtime import WorkerRuntime

    return WorkerRuntime(settings)


def _help_with_celery_options() -> None:
    """This command's help, then Celery's worker options (without Celery's own usage lines)."""
    from celery.bin.worker import worker as celery_worker

    ctx = click.get_current_context()
    own = inspect.cleandoc(ctx.command.help or "")
    click.echo("Usage: graphrunner worker [CELERY WORKER OPTIONS]\n")
    click.echo(
        click.formatting.wrap_text(own, initial_indent="  ", subsequent_indent="  ", preserve_paragraphs=True)
    )
    celery_help = celery_worker.get_help(click.Context(celery_worker, info_name="graphrunner worker"))
    options = celery_help[celery_help.find("Worker Options:") :]
    options = options[: options.rfind("\nOptions:")]  # Celery's own --help line
    click.echo(f"\n{options.rstrip()}\n\n  -h, --help  Show this message and exit.")
    raise click.exceptions.Exit(0)


@click.command("beat")
def beat() -> None:
    """Move due timers and sweep stalled runs, without taking steps (until SIGTERM or Ctrl-C).

    Every worker does this already; run `beat` to keep timers and sweeps going where workers
    come and go (for example scaled to zero). Any number may run: a lock keeps one sweep at a time.
    Like the worker, it refuses a GRAPHRUNNER_REDIS_URL whose password is still `change-me`.
    """
    from graphrunner.cluster.runs.context import Cluster
    from graphrunner.cluster.worker.housekeeping import Housekeeper

    cluster = Cluster.connect(server_settings())  # no worker: nothing here takes steps
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    keeper = Housekeeper(cluster)
    try:
        while not stop.wait(0.5):
            keeper.tick()
    finally:
        cluster.close()
