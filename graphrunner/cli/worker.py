"""`graphrunner worker [celery worker options]` and `graphrunner beat`."""

from __future__ import annotations

import contextlib
import inspect
import signal
import threading
from typing import TYPE_CHECKING, Any

import click

from graphrunner.cli.common import OWN_HELP, USAGE_ERROR, fail
from graphrunner.cli.connect import server_settings
from graphrunner.errors import ConfigurationError
from graphrunner.settings import Settings

if TYPE_CHECKING:
    from graphrunner.telemetry.prometheus import Endpoint


@click.command("worker", context_settings=OWN_HELP)
@click.option(
    "--metrics-port",
    type=click.IntRange(1, 65535),
    metavar="PORT",
    help="Serve Prometheus metrics on this port (all the worker's pool processes added up).",
)
@click.option(
    "--metrics-host",
    default="127.0.0.1",
    show_default=True,
    metavar="HOST",
    help="The address the metrics endpoint listens on (0.0.0.0: every interface).",
)
@click.argument("celery_args", nargs=-1, type=click.UNPROCESSED)
def worker(celery_args: tuple[str, ...], metrics_port: int | None, metrics_host: str) -> None:
    """Run a Celery worker for the configured Redis (GRAPHRUNNER_REDIS_URL).

    The state store is GRAPHRUNNER_REDIS_URL: one Redis (redis://) or a Redis Cluster
    (redis+cluster://host:port, which needs GRAPHRUNNER_BROKER_URL, and
    GRAPHRUNNER_RESULT_BACKEND_URL when that broker is RabbitMQ; see docs/operations.md).

    Every option but --metrics-port and --metrics-host is passed to `celery worker`, e.g.
    `graphrunner worker -c 4 -Q graphrunner,cpu` (Celery's options are listed below). The worker
    consumes the default queue (GRAPHRUNNER_QUEUE, `graphrunner`) unless -Q says otherwise, moves
    due timers onto their queues and takes its turn at sweeping. GRAPHRUNNER_WORKER_CONFIG names the
    team's worker configuration (a .py file or a module: its tools and deployment hooks). SIGTERM is
    a warm shutdown: no new steps are taken and the steps in flight finish. Settings that cannot
    work are refused before it starts, and so is a GRAPHRUNNER_REDIS_URL whose password is an
    example file's placeholder (`change-me`).

    It logs at WARNING unless told otherwise (Celery's line per task is INFO): a failed step is
    one WARNING line with the run id, step, node and error; `--loglevel INFO` adds the step's
    traceback, when it has one (also kept in the transcript: `graphrunner steps RUN --traceback`).
    A line logged during a step names its run, step, node and trace; GRAPHRUNNER_LOG_FORMAT=json
    writes one JSON object per line instead.

    --metrics-port PORT serves Prometheus metrics (steps, runs, items, retries, redeliveries, dead
    letters, repairs, timers) on http://HOST:PORT/metrics, the pool processes added up;
    OTEL_METRICS_EXPORTER exports the same as OpenTelemetry metrics (docs/operations.md, Metrics).
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
        endpoint = _observability(runtime, settings, metrics_host, metrics_port)
    except ConfigurationError as exc:
        runtime.close()
        fail(str(exc), USAGE_ERROR)
    try:
        # WARNING by default: failed steps, not Celery's line per task; a later --loglevel wins
        _celery_worker(runtime.app, ["--loglevel=WARNING", *celery_args])
    finally:
        if endpoint is not None:
            endpoint.close()
        runtime.close()


def _celery_worker(app: Any, args: list[str]) -> None:
    """Run Celery's `worker` command on `app` with `args`: that click command alone, not Celery's
    whole CLI (`app.worker_main`), whose plugins (Flower, the REPL's prompt_toolkit) add about
    14 MB to the worker and to every pool process forked from it."""
    from celery.bin.base import CLIContext
    from celery.bin.worker import worker as celery_worker

    context = CLIContext(app=app, no_color=None, workdir=None)
    with contextlib.suppress(click.exceptions.Exit):  # the worker's exit, as `worker_main` ends
        celery_worker.main(args=args, prog_name="graphrunner worker", obj=context, standalone_mode=False)


def _runtime(settings: Settings) -> Any:
    from graphrunner.cluster.worker.runtime import WorkerRuntime

    return WorkerRuntime(settings, liveness=settings.liveness_file)


def _observability(runtime: Any, settings: Settings, host: str, port: int | None) -> Endpoint | None:
    """Log lines by GRAPHRUNNER_LOG_FORMAT, runs in flight read from the store, and the metrics
    endpoint when there is a port (before the pool forks); raises `ConfigurationError`."""
    from graphrunner.telemetry import logs, metrics, sdk

    sdk.wanted()  # an OTEL_* setting that cannot work is refused now, not in every pool process
    logs.install(settings.log_format)
    store = runtime.cluster.store
    metrics.watch_runs(lambda: {status: store.count_runs(status) for status in metrics.IN_FLIGHT})
    if port is None:
        return None
    from graphrunner.telemetry import prometheus

    try:
        return prometheus.serve(host, port)
    except OSError as exc:
        raise ConfigurationError(
            f"--metrics-port {port}: cannot listen on {host}:{port} ({exc.strerror or exc})"
        ) from None


def _help_with_celery_options() -> None:
    """This command's help, then Celery's worker options (without Celery's own usage lines)."""
    from celery.bin.worker import worker as celery_worker

    ctx = click.get_current_context()
    own = inspect.cleandoc(ctx.command.help or "")
    click.echo("Usage: graphrunner worker [CELERY WORKER OPTIONS]\n")
    click.echo(
        click.formatting.wrap_text(own, initial_indent="  ", subsequent_indent="  ", preserve_paragraphs=True)
    )
    formatter = ctx.make_formatter()
    with formatter.section("Graphrunner Options"):
        ours = [p for p in ctx.command.get_params(ctx) if isinstance(p, click.Option)]
        formatter.write_dl([r for p in ours if (r := p.get_help_record(ctx))])
    click.echo(f"\n{formatter.getvalue().rstrip()}")
    celery_help = celery_worker.get_help(click.Context(celery_worker, info_name="graphrunner worker"))
    options = celery_help[celery_help.find("Worker Options:") :]
    options = options[: options.rfind("\nOptions:")]  # Celery's own --help line
    click.echo(f"\n{options.rstrip()}\n\n  -h, --help  Show this message and exit.")
    raise click.exceptions.Exit(0)


@click.command("beat")
def beat() -> None:
    """Move due timers, fire due schedule ticks and sweep stalled runs, without taking steps
    (until SIGTERM or Ctrl-C).

    Every worker does this already; run `beat` to keep timers, schedules and sweeps going where
    workers come and go (for example scaled to zero). Any number may run: a lock keeps one sweep
    at a time, and each schedule tick fires once (docs/schedules.md). At start it registers the
    schedules the graphs on GRAPHRUNNER_GRAPH_PATH declare.
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
