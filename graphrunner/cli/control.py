"""Operator commands that talk to the workers and queues: `ping`, `purge`."""

from __future__ import annotations

import click

from graphrunner.cli.common import fail, print_json
from graphrunner.cli.connect import cluster_client, reported_errors


@click.command("ping")
@click.option("--local", is_flag=True, help="Ping the worker of this host (celery@HOSTNAME).")
@click.option(
    "-w", "--worker", "workers", multiple=True, metavar="NAME", help="Ping this worker (repeatable)."
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0.1, max=300),
    default=5.0,
    show_default=True,
    help="Seconds to wait.",
)
@click.option("--json", "as_json", is_flag=True, help="Print {answered: [WORKER...], missing: [WORKER...]}.")
def ping(local: bool, workers: tuple[str, ...], timeout: float, as_json: bool) -> None:
    """Ping workers over the broker; exit 0 when every worker asked answered (any, without names).

    `graphrunner ping --local` is the readiness probe of a worker pod: it asks the worker of this
    host (started without -n) and fails when it does not answer in time. Liveness is `graphrunner
    alive`, which needs no broker.
    """
    from graphrunner.cluster.transport.control import local_worker_name
    from graphrunner.cluster.transport.control import ping as ping_workers

    asked = [*workers, *([local_worker_name()] if local else [])]
    with reported_errors(), cluster_client() as client:
        answered = ping_workers(client.cluster.publisher.app, asked, timeout)
    missing = [w for w in asked if w not in answered]
    if as_json:
        print_json({"answered": answered, "missing": missing})
    else:
        for name in answered:
            click.echo(f"{name}: pong")
    if missing or not answered:
        fail(f"no answer within {timeout:g}s from {', '.join(missing) or 'any worker'}", 1)


@click.command("purge")
@click.option(
    "-q",
    "--queue",
    "queues",
    multiple=True,
    metavar="QUEUE",
    help="Purge this queue (repeatable; default: GRAPHRUNNER_QUEUE).",
)
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
@click.option("--json", "as_json", is_flag=True, help="Print {purged: {QUEUE: messages dropped}}.")
def purge(queues: tuple[str, ...], yes: bool, as_json: bool) -> None:
    """Drop the messages waiting on a queue (asks first; --yes does not).

    Runs lose nothing: a running run whose step message was dropped has it sent again by the
    sweeper after GRAPHRUNNER_STALL_AFTER seconds. To stop runs, cancel them. Messages held by
    workers, timers and dead letters are not touched. Without confirmation nothing is purged.
    """
    from graphrunner.cluster.transport.control import purge as purge_queues
    from graphrunner.cluster.transport.queues import report

    with reported_errors(), cluster_client() as client:
        names = list(queues) or [client.settings.queue]
        depths = report(client.cluster, names).depths
        waiting = sum(depths.get(n, 0) for n in names)
        question = f"Drop {waiting} message(s) waiting on {', '.join(names)}?"
        if not yes and not _confirmed(question):
            fail("nothing purged (confirm at the prompt, or give --yes)", 1)
        dropped = purge_queues(client.cluster.publisher.app, names)
    if as_json:
        print_json({"purged": dropped})
        return
    for name, count in dropped.items():
        click.echo(f"{name}: {count} message(s) dropped")


def _confirmed(question: str) -> bool:
    """The operator's answer; no answer (no terminal, end of input) is no."""
    try:
        return click.confirm(question, default=False, err=True)
    except click.Abort:
        return False
