"""`graphrunner run GRAPH [-i k=v ...] [--inputs JSON|@file] [--json] [--timeout S] [--local]`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any

import click

from graphrunner.cli.common import (
    USAGE_ERROR,
    capability_option,
    chosen,
    fail,
    input_options,
    load_settings,
    merge_inputs,
    open_graph,
    set_up_telemetry,
    traceback_option,
)
from graphrunner.cli.connect import reported_errors
from graphrunner.cli.progress import progress_line
from graphrunner.cli.result import print_settled
from graphrunner.cli.signals import cancelled_on_signals, exit_code, exit_on_signals, how_stopped
from graphrunner.errors import (
    GraphNotFound,
    GraphrunnerError,
    GraphValidationError,
    InvalidCapabilities,
    StateValidationError,
    WaitTimeout,
)
from graphrunner.settings import Settings

if TYPE_CHECKING:
    from graphrunner.client import RunHandle
    from graphrunner.engine import RunSnapshot
    from graphrunner.graph import Graph
    from graphrunner.results import RunResult
    from graphrunner.runner.local import StepObserver

STEP_LOGGERS = ("graphrunner.worker.steps",)  # a worker's failed steps (cluster.executor)


@click.command("run")
@click.argument("graph_ref", metavar="GRAPH")
@input_options
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON object.")
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    metavar="S",
    help="Stop waiting when the run takes longer than S seconds (on a cluster the run keeps going).",
)
@click.option(
    "--local",
    is_flag=True,
    help="With GRAPHRUNNER_REDIS_URL set, also run a worker in this process while waiting.",
)
@click.option(
    "--in-process",
    is_flag=True,
    help="Run in this process with the in-process runner: no Redis, no Celery, nothing stored.",
)
@capability_option
@traceback_option
def run(
    graph_ref: str,
    input_pairs: dict[str, Any],
    inputs_json: dict[str, Any],
    as_json: bool,
    timeout: float | None,
    local: bool,
    in_process: bool,
    capabilities: tuple[str, ...],
    tracebacks: bool,
) -> None:
    """Run a graph to the end and print its result.

    With GRAPHRUNNER_REDIS_URL set, the run is submitted to that Redis and the cluster's workers
    run it (--local adds a worker in this process). Without it, an embedded Redis and an
    in-process worker are started for the run and stopped afterwards. --in-process skips Redis
    and Celery altogether.

    Progress lines go to stderr (GRAPHRUNNER_QUIET=1 silences them); stdout carries only the result.
    A failed run's summary ends with the traceback of its error when it has one (a Python tool's
    exception); --traceback also prints the traceback of every failed step under its progress line.
    With GRAPHRUNNER_REDIS_URL set, a run no worker takes is pointed out on stderr after a few
    seconds (naming the queue), and waited for all the same.

    Exit 0 completed (with or without suppressed errors), 1 failed, cancelled, timed out or
    paused (a pause node: the summary shows its message; `graphrunner resume RUN` goes on),
    2 invalid graph or inputs. On SIGINT (Ctrl-C), SIGTERM or SIGHUP, what the command started
    (the embedded Redis and its directory, the worker) is stopped and removed, and it exits
    128 + the signal number: 130, 143 or 129.
    """
    if local and in_process:
        fail("--local and --in-process cannot be combined", USAGE_ERROR)
    settings = load_settings()
    caps = chosen(capabilities)
    set_up_telemetry("run")
    with exit_on_signals():
        graph = open_graph(graph_ref, settings)
        inputs = merge_inputs(inputs_json, input_pairs, graph)
        if in_process:
            observer = None if settings.quiet else progress_printer(tracebacks)
            result = execute(graph, inputs, observer, timeout, caps)
        else:
            result = run_on_cluster(
                graph,
                inputs,
                settings,
                local=local,
                timeout=timeout,
                capabilities=caps,
                tracebacks=tracebacks,
            )
    print_settled(result, as_json)


def run_on_cluster(
    graph: Graph,
    inputs: Mapping[str, Any],
    settings: Settings,
    *,
    local: bool,
    timeout: float | None,
    capabilities: Sequence[str] | None = None,
    tracebacks: bool = False,
) -> RunResult:
    """Submit the run, print its progress until it settles, and return its result.

    The worker this command may run (embedded, or --local) logs no failed steps: the progress
    lines show them. Without one, a run no worker takes is pointed out (`no_worker_warning`).
    """
    from graphrunner.cli.consumers import no_worker_warning
    from graphrunner.cli.session import muted, run_session  # Celery and redis-py: only for this path

    with reported_errors(), muted(STEP_LOGGERS), run_session(settings, graph, local=local) as session:
        if capabilities is None and session.embedded:  # a run of one's own, on one's own machine
            capabilities = settings.local_capabilities
        handle = session.client.submit(graph, inputs, capabilities=capabilities)
        lonely = not (session.embedded or local)
        with no_worker_warning(session.client, handle.id) if lonely else nullcontext():
            return await_result(
                handle,
                graph.id,
                timeout,
                quiet=settings.quiet,
                embedded=session.embedded,
                tracebacks=tracebacks,
            )


def await_result(
    handle: RunHandle,
    graph_id: str,
    timeout: float | None,
    *,
    quiet: bool,
    embedded: bool,
    tracebacks: bool = False,
) -> RunResult:
    """Print one progress line on stderr per step until the run settles; then its result."""
    try:
        for record in handle.follow(timeout):
            if not quiet:
                click.echo(progress_line(graph_id, record, tracebacks), err=True)
    except WaitTimeout:
        fail(timed_out(handle.id, timeout, embedded), 1)
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM/SIGHUP (cli.signals): say where the run is
        fail(interrupted(handle.id, embedded, how_stopped(exc)), exit_code(exc))
    return handle.result()


def timed_out(run_id: str, timeout: float | None, embedded: bool) -> str:
    """The `--timeout` message: where the run is left."""
    head = f"run {run_id} timed out after {timeout or 0:g}s (--timeout)"
    if embedded:
        return f"{head}; it was abandoned with the embedded Redis (set GRAPHRUNNER_REDIS_URL to keep runs)"
    return f"{head}; it keeps running on the cluster: graphrunner wait {run_id}"


def interrupted(run_id: str, embedded: bool, how: str) -> str:
    """The message for Ctrl-C (`how`: or SIGTERM, SIGHUP): where the run is left."""
    if embedded:
        return f"{how}; stopping the embedded worker and Redis (run {run_id} is abandoned)"
    return f"{how}; run {run_id} keeps running on the cluster: graphrunner watch {run_id}"


def execute(
    graph: Graph,
    inputs: Mapping[str, Any],
    observer: StepObserver | None,
    timeout: float | None,
    capabilities: Sequence[str] | None = None,
) -> RunResult:
    """Run the graph in-process; user errors print `error: ...` and exit (2 for bad inputs, else 1)."""
    try:
        return run_graph(graph, inputs, observer, timeout, capabilities)
    except TimeoutError:
        limit = f" after {timeout:g}s" if timeout else ""
        fail(f"run of graph {graph.id!r} timed out{limit} (--timeout)", 1)
    except (StateValidationError, GraphNotFound, GraphValidationError, InvalidCapabilities) as exc:
        fail(str(exc), USAGE_ERROR)
    except GraphrunnerError as exc:
        fail(str(exc), 1)


def run_graph(
    graph: Graph,
    inputs: Mapping[str, Any],
    observer: StepObserver | None,
    timeout: float | None,
    capabilities: Sequence[str] | None = None,
) -> RunResult:
    """The in-process runner, bounded by `timeout` seconds (capabilities: the deployment's default).

    A signal cancels the run, so its tools clean up (a shell tool kills its process group).
    """
    import asyncio  # about 25 ms: only this path needs it

    run = graph.invoke(inputs, on_step=observer, capabilities=capabilities)
    return asyncio.run(cancelled_on_signals(asyncio.wait_for(run, timeout)))


def label(snapshot: RunSnapshot) -> str:
    """The graph id of a progress line; a child run's also says where it is: `STEP.KEY` after
    its root run's id (`research/web 1.web`: step 1's branch web; `docs/process 2.7`: item 7)."""
    if snapshot.depth == 0 or "." not in snapshot.run_id:
        return snapshot.graph_id
    return f"{snapshot.graph_id} {snapshot.run_id.split('.', 1)[1]}"


def progress_printer(tracebacks: bool = False) -> StepObserver:
    """An `on_step` observer printing one progress line per step on stderr (`tracebacks`: and
    the traceback of a failed step under its line)."""

    def observe(snapshot: RunSnapshot, record: dict[str, Any]) -> None:
        click.echo(progress_line(label(snapshot), record, tracebacks), err=True)

    return observe
