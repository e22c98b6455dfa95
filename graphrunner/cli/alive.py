"""`graphrunner alive`: a worker's liveness probe, from its liveness file alone (no network)."""

from __future__ import annotations

from pathlib import Path

import click

from graphrunner.cli.common import fail, load_settings, print_json

DEFAULT_MAX_AGE = 60.0  # seconds: the worker touches the file every 5 s


@click.command("alive")
@click.option(
    "--max-age",
    type=click.FloatRange(min=1, max=3600),
    default=DEFAULT_MAX_AGE,
    show_default=True,
    help="Seconds since the worker last touched its liveness file.",
)
@click.option(
    "--file",
    "path",
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="PATH",
    help="The liveness file (default: GRAPHRUNNER_LIVENESS_FILE, /tmp/graphrunner-worker.alive).",
)
@click.option("--json", "as_json", is_flag=True, help='Print {"alive": true, "file": PATH, "age_s": S}.')
def alive(max_age: float, path: Path | None, as_json: bool) -> None:
    """Exit 0 when the worker of this container touched its liveness file within --max-age seconds.

    The liveness probe of a worker container or pod: it reads a file's age and asks nobody over
    the network, so a broker or Redis outage does not fail it (`graphrunner ping --local`, which
    asks the worker over the broker, is the readiness probe). A worker touches the file from its
    consumer's event loop while its housekeeping thread keeps going, and from a thread while it
    reconnects to its broker; it removes the file when it stops (docs/operations.md, Liveness).
    """
    from graphrunner.cluster.worker.liveness import age

    path = path or load_settings().liveness_file
    seconds = age(path)
    if seconds is None:
        fail(f"no liveness file {path}: the worker has not started, or has stopped", 1)
    if seconds > max_age:
        fail(
            f"liveness file {path} was last touched {seconds:.0f}s ago (more than --max-age "
            f"{max_age:g}s): the worker's consumer loop or housekeeping thread is stuck",
            1,
        )
    if as_json:
        print_json({"alive": True, "file": str(path), "age_s": round(seconds, 1)})
    else:
        click.echo(f"alive: {path} touched {seconds:.1f}s ago")
