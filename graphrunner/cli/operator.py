"""Operator commands: `cancel` a run, `sweep` stalled runs now, look at the `queues`."""

from __future__ import annotations

from datetime import UTC, datetime

import click

from graphrunner.cli.common import print_json, set_up_telemetry
from graphrunner.cli.connect import cluster_client, reported_errors


@click.command("cancel")
@click.argument("run_id", metavar="RUN")
@click.option("--json", "as_json", is_flag=True, help='Print {"run_id": RUN, "status": STATUS}.')
def cancel(run_id: str, as_json: bool) -> None:
    """Cancel RUN (and its active child runs) at the next step boundary.

    A step in flight finishes but is not committed; queued foreach items are skipped.
    A cancelled run can be resumed with `graphrunner resume RUN`. Exit 1 when RUN is
    unknown or has already finished. Where OTEL_* asks for traces, the run's trace gets its
    end (its run span, and the span of the wait it was in).
    """
    from graphrunner.cluster.runs.ids import check_run_id

    set_up_telemetry("cli", required=False)
    with reported_errors():
        check_run_id(run_id)
        with cluster_client() as client:
            handle = client.cancel(run_id)
            status = handle.status()
    if as_json:
        print_json({"run_id": run_id, "status": status})
    else:
        click.echo(f"run {run_id} {status}")


@click.command("sweep")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print {checked, repaired: [{run_id, step, node, idle_s, action}], pruned, skipped}.",
)
def sweep(as_json: bool) -> None:
    """One pass of the sweeper now: send again the work of runs whose work was lost.

    The sweeper looks at running runs without a commit or heartbeat for GRAPHRUNNER_STALL_AFTER
    seconds (default 20) and sends again only what is missing (a lost step message, an outbox
    not published, lost foreach items, a parent's wake-up). Every worker sweeps every
    GRAPHRUNNER_SWEEP_INTERVAL seconds (default 5) on its own; this runs one pass now.
    """
    with reported_errors(), cluster_client() as client:
        report = client.sweep()
    if as_json:
        print_json(report.to_dict())
        return
    if report.skipped:
        click.echo("another sweep is running; nothing done")
        return
    for repair in report.repaired:
        click.echo(
            f"run {repair.run_id}: stalled {repair.idle_s:.0f}s after step {repair.step} "
            f"({repair.node}): {repair.action.replace('_', ' ')}"
        )
    click.echo(
        f"{report.checked} running run(s) checked, {len(report.repaired)} repaired, {report.pruned} expired"
    )


@click.command("queues")
@click.option(
    "-q", "--queue", "queues", multiple=True, metavar="QUEUE", help="Also show this queue (repeatable)."
)
@click.option(
    "--dead",
    type=click.IntRange(min=0, max=10_000),
    default=0,
    metavar="N",
    help="Show the newest N dead letters.",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print {queues: {QUEUE: waiting}, held_by_workers, timers, dead_letters, last_sweep_s, "
    "dead: [{reason, task, queue, at, body, headers}]}.",
)
def queues(queues: tuple[str, ...], dead: int, as_json: bool) -> None:
    """Messages waiting on each queue, held by workers, armed as timers; dead letters; the last sweep.

    A dead letter is a message a worker refused (not a task message graphrunner can read, an
    unknown task, malformed arguments): it was counted, logged and acknowledged, never run.
    """
    from graphrunner.cluster.transport.queues import report

    with reported_errors(), cluster_client() as client:
        found = report(client.cluster, queues, dead)
    if as_json:
        print_json(found.to_dict())
        return
    width = max(len("QUEUE"), *(len(q) for q in found.depths))
    click.echo(f"{'QUEUE':<{width}}  WAITING")
    for name, depth in found.depths.items():
        click.echo(f"{name:<{width}}  {depth}")
    held = "?" if found.held is None else str(found.held)
    sweep = "never" if found.last_sweep_s is None else f"{found.last_sweep_s:.0f}s ago"
    click.echo(f"held by workers: {held}   timers: {found.timers}   last sweep: {sweep}")
    click.echo(
        f"dead letters: {found.dead_total}" + ("" if dead else " (graphrunner queues --dead N shows them)")
    )
    for letter in found.dead:
        when = datetime.fromtimestamp(letter.at / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")
        click.echo(f"  {when}  queue={letter.queue}  task={letter.task}: {letter.reason}")
