"""`graphrunner list [--graph ID] [--status S] [--limit N] [--offset N] [--json]`: runs, newest first."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import click

from graphrunner.cli.common import print_json
from graphrunner.cli.connect import cluster_client, reported_errors
from graphrunner.engine import RunStatus
from graphrunner.store import RunSummary

COLUMNS = ("RUN_ID", "GRAPH", "STATUS", "STEPS", "CREATED")


@click.command("list")
@click.option("--graph", "graph_id", metavar="ID", help="Only runs of this graph id.")
@click.option(
    "--status",
    type=click.Choice([s.value for s in RunStatus]),
    help="Only runs with this status.",
)
@click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True, help="At most N runs.")
@click.option("--offset", type=click.IntRange(min=0), default=0, help="Skip the N newest runs first.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of runs.")
def list_runs(graph_id: str | None, status: str | None, limit: int, offset: int, as_json: bool) -> None:
    """List runs, newest first."""
    with reported_errors(), cluster_client() as client:
        runs = client.list_runs(graph_id=graph_id, status=status, limit=limit, offset=offset)
    if as_json:
        print_json([summary_dict(r) for r in runs])
    elif runs:
        click.echo(table([COLUMNS, *(row(r) for r in runs)]))
    else:
        click.echo("no runs")


def summary_dict(run: RunSummary) -> dict[str, Any]:
    """One run of `list --json`: ids, status, step count and ISO times."""
    return {
        "run_id": run.run_id,
        "graph_id": run.graph_id,
        "status": run.status,
        "step_count": run.step,
        "created_at": iso_time(run.created_at),
        "updated_at": iso_time(run.updated_at),
    }


def row(run: RunSummary) -> tuple[str, ...]:
    """The table cells of one run."""
    return (run.run_id, run.graph_id, run.status, str(run.step), iso_time(run.created_at))


def table(rows: list[tuple[str, ...]]) -> str:
    """Rows as left-aligned columns two spaces apart."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows)


def iso_time(ms: int) -> str:
    """Epoch milliseconds as ISO 8601 UTC, to the second: `2024-05-01T12:00:00Z`."""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
