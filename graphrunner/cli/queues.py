"""`graphrunner queues [-q QUEUE ...] [--dead N] [--json]`: what waits, is held, was refused."""

from __future__ import annotations

from datetime import UTC, datetime

import click

from graphrunner.cli.common import print_json
from graphrunner.cli.connect import cluster_client, reported_errors


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
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def queues(queues: tuple[str, ...], dead: int, as_json: bool) -> None:
    """Messages waiting on each queue, held by workers, armed as timers; dead letters; the last sweep.

    A dead letter is a message a worker refused (not a task message graphrunner can read, an
    unknown task, malformed arguments): it was counted, logged and acknowledged, never run.
    """
    from graphrunner.cluster.queues import report

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
