"""Commands on the runs of a cluster: `submit`, `status`, `wait`, `watch`, `resume`, `state`, `fork`,
`steps`."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import click

from graphrunner.cli.common import (
    USAGE_ERROR,
    capability_option,
    chosen,
    fail,
    input_options,
    iso_time,
    json_object,
    merge_inputs,
    open_graph,
    plural,
    print_json,
    traceback_option,
)
from graphrunner.cli.connect import cluster_client, cluster_settings, reported_errors
from graphrunner.cli.consumers import no_worker_warning
from graphrunner.cli.progress import json_line, progress_line
from graphrunner.cli.result import outcome_lines, print_settled
from graphrunner.errors import WaitTimeout

if TYPE_CHECKING:  # imported when used: Celery and redis-py are not needed for --help or validate
    from graphrunner.client import Client
    from graphrunner.results import RunResult

json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON.")
timeout_option = click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    metavar="S",
    help="Give up waiting after S seconds (the run keeps going).",
)


@click.command("submit")
@click.argument("graph_ref", metavar="GRAPH")
@input_options
@click.option(
    "--run-id", metavar="ID", help="Your own run id; submitting the same id again starts no new run."
)
@click.option(
    "--json", "as_json", is_flag=True, help='Print {"run_id": ...} (with --wait: the result object).'
)
@capability_option
@click.option(
    "--concurrency-key",
    metavar="KEY",
    help="At most one active run per KEY: this run waits (pending) while another holds it.",
)
@click.option(
    "--refuse-if-busy",
    is_flag=True,
    help="With --concurrency-key: submit nothing (exit 1) instead of waiting when the key is held.",
)
@click.option(
    "--wait",
    "wait_for",
    is_flag=True,
    help="Wait for the run to settle and print its result, as `wait` does.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    metavar="S",
    help="With --wait: give up waiting after S seconds (the run keeps going).",
)
def submit(
    graph_ref: str,
    input_pairs: dict[str, Any],
    inputs_json: dict[str, Any],
    run_id: str | None,
    as_json: bool,
    capabilities: tuple[str, ...],
    concurrency_key: str | None,
    refuse_if_busy: bool,
    wait_for: bool,
    timeout: float | None,
) -> None:
    """Enqueue a run of GRAPH on the cluster and print its run id at once.

    With --wait, wait for the run to finish or pause instead and print its result (--json: the
    result object of `run --json`), with the exit codes of `wait`.

    With TRACEPARENT set (a W3C traceparent, as a CI job or a traced script passes it on), the
    run's OpenTelemetry trace hangs under that span; an invalid one is ignored, with a warning.
    """
    from graphrunner.cluster.runs.ids import check_run_id

    if timeout is not None and not wait_for:
        fail("--timeout needs --wait (submit alone does not wait)", USAGE_ERROR)
    settings = cluster_settings()
    with reported_errors():
        if run_id is not None:
            check_run_id(run_id)
        graph = open_graph(graph_ref, settings)
        with cluster_client(settings) as client:
            inputs = merge_inputs(inputs_json, input_pairs, graph)
            handle = client.submit(
                graph,
                inputs,
                run_id=run_id,
                capabilities=chosen(capabilities),
                concurrency_key=concurrency_key,
                when_busy="refuse" if refuse_if_busy else "queue",
                traceparent=_traceparent(),
            )
            result = settle(client, handle.id, timeout, lambda _: None) if wait_for else None
    if result is not None:
        print_settled(result, as_json)
    if as_json:
        print_json({"run_id": handle.id})
    else:
        click.echo(handle.id)


def _traceparent() -> str | None:
    """The TRACEPARENT variable, when it is a W3C traceparent (else a warning, and None)."""
    from graphrunner.telemetry.propagation import valid_traceparent

    value = os.environ.get("TRACEPARENT", "").strip()
    if value and not valid_traceparent(value):
        click.echo(f"warning: TRACEPARENT={value[:80]!r} is not a W3C traceparent; ignored", err=True)
        return None
    return value or None


@click.command("status")
@click.argument("run_id", metavar="RUN")
@json_option
def status(run_id: str, as_json: bool) -> None:
    """Show a run as it is now (--json: the result object, as `run --json` prints it)."""
    with reported_errors(), cluster_client() as client:
        handle = client.run(run_id)
        result = handle.result()
        fields = client.store.run_fields(handle.id)
    if as_json:
        print_json(result.to_dict())
    else:
        click.echo(status_lines(result, fields))


def status_lines(result: RunResult, fields: dict[str, str]) -> str:
    """`run:`, `graph:`, `status:`, `node:`, `steps:`, `path:`, `forked from:` (a fork),
    `schedule:` (a scheduled run), times, one per line; then a paused run's `message:`, or the
    `error:` and its traceback."""
    node = result.snapshot.node if result.snapshot is not None else None
    lines = [f"run: {result.run_id}", f"graph: {result.graph_id}", f"status: {result.status}"]
    if node and result.status in ("pending", "running", "paused"):
        lines.append(f"node: {node}")
    lines += [f"steps: {result.step_count}", f"path: {' -> '.join(result.path) or '(none)'}"]
    origin = result.snapshot.forked_from if result.snapshot is not None else None
    if origin is not None:
        lines.append(f"forked from: run {origin.run_id} after step {origin.step}")
    schedule = result.snapshot.schedule if result.snapshot is not None else None
    if schedule is not None:
        how = "triggered" if schedule.trigger else "tick"
        lines.append(f"schedule: {schedule.id} ({how} {iso_time(schedule.tick * 1000)})")
    for name in ("created", "updated"):
        if f"{name}_at" in fields:
            lines.append(f"{name}: {iso_time(int(fields[f'{name}_at']))}")
    if result.errors_suppressed:
        lines.append(f"suppressed errors: {result.errors_suppressed}")
    lines += outcome_lines(result)
    return "\n".join(lines)


@click.command("wait")
@click.argument("run_id", metavar="RUN")
@timeout_option
@json_option
def wait(run_id: str, timeout: float | None, as_json: bool) -> None:
    """Block until a run finishes or pauses, then print its result (exit codes as `run`).

    Exits 0 when the run completed, 1 when it failed, was cancelled, paused (the result shows the
    pause node's message; `graphrunner resume RUN` goes on) or --timeout ran out.
    """
    with reported_errors(), cluster_client() as client:
        result = settle(client, run_id, timeout, lambda _: None)
    print_settled(result, as_json)


@click.command("watch")
@click.argument("run_id", metavar="RUN")
@timeout_option
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print JSON lines instead: one object per transcript record as it commits, "
    '{"event": "step", "step", "node", "status", ..., "updates": {key: new value}}, '
    'then {"event": "result", ...} with the fields of `status --json`.',
)
@traceback_option
def watch(run_id: str, timeout: float | None, as_json: bool, tracebacks: bool) -> None:
    """Stream a run's steps, past and new, as progress lines on stdout; then its final status.

    Exits 0 when the run completed, 1 when it failed, was cancelled, paused or --timeout ran out.
    """
    from graphrunner.streaming import RecordEvent, ResultEvent

    with reported_errors(), cluster_client() as client:
        handle = client.run(run_id)
        graph_id = handle.snapshot().graph_id
        with going_on(run_id), no_worker_warning(client, handle.id):
            for event in handle.stream("updates", timeout):
                if as_json:
                    click.echo(json_line(event.to_dict()))
                elif isinstance(event, RecordEvent):
                    click.echo(progress_line(graph_id, event.record, tracebacks))
    assert isinstance(event, ResultEvent)  # a stream's last event
    result = event.result
    if not as_json:
        click.echo(f"run {result.run_id} {result.status} ({plural(result.step_count, 'step')})")
    raise click.exceptions.Exit(0 if result.ok else 1)


@contextmanager
def going_on(run_id: str) -> Iterator[None]:
    """`WaitTimeout` says the run goes on, and how to wait for it again."""
    try:
        yield
    except WaitTimeout as exc:
        raise WaitTimeout(f"{exc}; it goes on without you: graphrunner wait {run_id}") from None


def settle(
    client: Client, run_id: str, timeout: float | None, each: Callable[[dict[str, Any]], None]
) -> RunResult:
    """Follow the run until it settles, calling `each` on every record; `WaitTimeout` names the run.

    A run no worker takes is pointed out on stderr after a few seconds (`no_worker_warning`).
    """
    handle = client.run(run_id)
    with going_on(handle.id), no_worker_warning(client, handle.id):
        for record in handle.follow(timeout):
            each(record)
    return handle.result()


@click.command("resume")
@click.argument("run_id", metavar="RUN")
@click.option(
    "--state",
    "patch",
    callback=json_object,
    metavar="JSON|@FILE",
    help="Merge these fields into the state first, e.g. --state '{\"approved\": true}' (or @path).",
)
@click.option(
    "--upgrade",
    is_flag=True,
    help="Re-pin the run to the current version of its graph (found by id on the graph path).",
)
@click.option(
    "--graph",
    "graph_ref",
    metavar="GRAPH",
    help="Re-pin the run to this version of its graph (a file or graph id); implies --upgrade.",
)
@click.option("--wait", "wait_for", is_flag=True, help="Wait for the run to settle and print its result.")
@timeout_option
@json_option
def resume(
    run_id: str,
    patch: dict[str, Any],
    upgrade: bool,
    graph_ref: str | None,
    wait_for: bool,
    timeout: float | None,
    as_json: bool,
) -> None:
    """Continue a failed, cancelled, paused or stalled run at its node, at its step count.

    The run stays pinned to the graph version it started with (editing the graph file
    changes nothing for it) unless --upgrade or --graph re-pins it; its current node
    must exist in the new version. A running run can be resumed only when it has made
    no progress for GRAPHRUNNER_STALL_AFTER seconds.

    --json prints {"run_id": RUN, "status": STATUS}; with --wait, the result object of `run --json`.
    """
    with reported_errors(), cluster_client() as client:
        target = graph_ref or (client.run(run_id).snapshot().graph_id if upgrade else None)
        handle = client.resume(run_id, patch or None, upgrade=target)
        if not wait_for:
            if as_json:
                print_json({"run_id": handle.id, "status": handle.status()})
            else:
                click.echo(f"run {handle.id} resumed")
            return
        result = settle(client, run_id, timeout, lambda _: None)
    print_settled(result, as_json)


@click.command("state")
@click.argument("run_id", metavar="RUN")
@click.option(
    "--at",
    "step",
    type=click.IntRange(min=0),
    metavar="STEP",
    help="The state after step STEP instead (0: the initial state), from the run's history.",
)
@click.option("--json", "as_json", is_flag=True, help="Accepted for every command: the state is JSON anyway.")
def state(run_id: str, step: int | None, as_json: bool) -> None:
    """Print a run's current state as JSON: one object, field to value (with or without --json).

    With --at STEP, the state after that step, as long as the run is retained and its history
    within GRAPHRUNNER_HISTORY_MAX_BYTES (exit 1 naming the step and why when it is not kept).
    """
    with reported_errors(), cluster_client() as client:
        data = client.run(run_id).state() if step is None else client.state_at(run_id, step)
    print_json(data)


@click.command("fork")
@click.argument("run_id", metavar="RUN")
@click.option(
    "--from",
    "step",
    type=click.IntRange(min=0),
    required=True,
    metavar="STEP",
    help="Fork after this step of RUN (see `graphrunner steps RUN`; 0: from its start).",
)
@click.option(
    "--patch",
    callback=json_object,
    metavar="JSON|@FILE",
    help="Merge these fields into that step's state first, e.g. --patch '{\"approved\": true}' (or @path).",
)
@click.option(
    "--upgrade",
    is_flag=True,
    help="Run the fork on the current version of RUN's graph (found by id on the graph path).",
)
@click.option(
    "--graph",
    "graph_ref",
    metavar="GRAPH",
    help="Run the fork on this version of RUN's graph (a file or graph id); implies --upgrade.",
)
@click.option(
    "--run-id", "new_id", metavar="ID", help="The new run's id (the same id again starts no new run)."
)
@click.option("--json", "as_json", is_flag=True, help='Print {"run_id": ...}, as `submit --json` does.')
def fork(
    run_id: str,
    step: int,
    patch: dict[str, Any],
    upgrade: bool,
    graph_ref: str | None,
    new_id: str | None,
    as_json: bool,
) -> None:
    """Start a new run after step STEP of RUN and print its run id, as `submit` does.

    The new run starts at the node that step led to, with the state after it plus --patch,
    on the graph version that step ran on (unless --upgrade or --graph); its record names RUN
    and STEP (`forked_from`). Nothing up to that step runs again. After a pause step it goes on
    past the pause (as a resume would), after a failed step it runs the failed node again; a
    step that ended the run cannot be forked from (exit 1).
    """
    with reported_errors(), cluster_client() as client:
        target = graph_ref or (client.run(run_id).snapshot().graph_id if upgrade else None)
        handle = client.fork(run_id, step, patch or None, upgrade=target, new_run_id=new_id)
    if as_json:
        print_json({"run_id": handle.id})
    else:
        click.echo(handle.id)


@click.command("steps")
@click.argument("run_id", metavar="RUN")
@json_option
@traceback_option
def steps(run_id: str, as_json: bool, tracebacks: bool) -> None:
    """Print a run's transcript: one progress line per step.

    --json prints the transcript records as a list, each {step, node, status, ...}; a failed
    step's `error` has a `traceback` when there is one (a Python tool's exception: the function's
    frames, at most the last 30 frames and 8192 characters), a paused step a `message`.
    """
    with reported_errors(), cluster_client() as client:
        handle = client.run(run_id)
        records, graph_id = handle.steps(), handle.snapshot().graph_id
    if as_json:
        print_json(records)
        return
    for record in records:
        click.echo(progress_line(graph_id, record, tracebacks))
