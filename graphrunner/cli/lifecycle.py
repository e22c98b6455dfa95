"""Operator commands on runs: `cancel`, and `sweep` (one pass of the stalled-run sweeper)."""

from __future__ import annotations

import click

from graphrunner.cli.common import print_json
from graphrunner.cli.connect import cluster_client, reported_errors

json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON.")


@click.command("cancel")
@click.argument("run_id", metavar="RUN")
@json_option
def cancel(run_id: str, as_json: bool) -> None:
    """Cancel RUN (and its active child runs) at the next step boundary.

    A step in flight finishes but is not committed; queued foreach items are skipped.
    A cancelled run can be resumed with `graphrunner resume RUN`. Exit 1 when RUN is
    unknown or has already finished.
    """
    from graphrunner.cluster.runs import check_run_id

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
@json_option
def sweep(as_json: bool) -> None:
    """One pass of the stalled-run sweeper: send the work of stalled runs again.

    A running run is stalled when neither a commit nor a heartbeat touched it for
    GRAPHRUNNER_STALL_AFTER seconds (default 300). Workers started with `-B` sweep every
    GRAPHRUNNER_SWEEP_INTERVAL seconds on their own; this runs one pass now.
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
