"""`graphrunner list [--graph ID] [--status S] [--schedule ID] [--since T] [--until T] [--limit N]
[--cursor C] [--json]`.

Runs newest first, a page at a time; when there are more, the command that prints the next
page goes to stderr (`next page: graphrunner list ... --cursor C`).
"""

from __future__ import annotations

import re
import shlex
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import click

from graphrunner.cli.common import USAGE_ERROR, fail, iso_time, print_json
from graphrunner.cli.connect import cluster_client, reported_errors
from graphrunner.errors import InvalidRunQuery
from graphrunner.run_status import STATUSES

if TYPE_CHECKING:  # imported when used: redis-py is not needed for --help
    from graphrunner.store import RunPage, RunSummary

# A copy, checked by a unit test, of graphrunner.store.query.MAX_LIMIT: importing the store
# for the options of `list` would bring redis-py and the graph model into every command,
# `graphrunner --help` included.
MAX_LIMIT = 1000

COLUMNS = ("RUN_ID", "GRAPH", "STATUS", "STEPS", "CREATED")
AGO = re.compile(r"^(\d+)([smhdw])$")
UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
TIME_HELP = "ISO-8601 (2026-05-01, 2026-05-01T12:00:00Z; no zone means UTC) or a time ago (30m, 2h, 7d)"


class TimeParam(click.ParamType):  # type: ignore[type-arg]  # generic only in newer click
    """An ISO-8601 date or time (UTC unless it says otherwise), or a duration ago like `2h`."""

    name = "TIME"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> datetime:
        if isinstance(value, datetime):
            return value
        try:
            return parse_time(str(value))
        except ValueError:
            self.fail(f"{value!r} is not a time: use {TIME_HELP}", param, ctx)


def parse_time(text: str, now: datetime | None = None) -> datetime:
    """`2h` (before `now`) or an ISO-8601 date/time, as an aware datetime; raises ValueError."""
    text = text.strip()
    ago = AGO.match(text)
    if ago:
        return (now or datetime.now(UTC)) - timedelta(**{UNITS[ago[2]]: int(ago[1])})
    parsed = datetime.fromisoformat(text)
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


@click.command("list")
@click.option("--graph", "graph_id", metavar="ID", help="Only runs of this graph id.")
@click.option(
    "--status",
    type=click.Choice(STATUSES),
    help="Only runs with this status.",
)
@click.option(
    "--schedule", "schedule_id", metavar="ID", help="Only runs schedule ID (GRAPH_ID/NAME) started."
)
@click.option("--since", type=TimeParam(), help=f"Only runs created at or after this time: {TIME_HELP}.")
@click.option("--until", type=TimeParam(), help="Only runs created before this time (same forms).")
@click.option(
    "--limit",
    type=click.IntRange(1, MAX_LIMIT),
    default=50,
    show_default=True,
    help="At most N runs on the page.",
)
@click.option("--cursor", metavar="C", help="Start where a previous page ended (printed on stderr).")
@click.option("--offset", type=click.IntRange(min=0), default=0, help="Skip the N newest matching runs.")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print a JSON list of runs: [{run_id, graph_id, status, step_count, created_at, updated_at}].",
)
def list_runs(
    graph_id: str | None,
    status: str | None,
    schedule_id: str | None,
    since: datetime | None,
    until: datetime | None,
    limit: int,
    cursor: str | None,
    offset: int,
    as_json: bool,
) -> None:
    """List runs, newest first, a page at a time; the next page's command goes to stderr."""
    with reported_errors(), cluster_client() as client:
        try:
            page = client.list_page(
                graph_id, status, limit, offset, since=since, until=until, cursor=cursor, schedule=schedule_id
            )
        except InvalidRunQuery as exc:
            fail(str(exc), USAGE_ERROR)
    if as_json:
        print_json([r.to_dict(iso_time) for r in page.runs])
    elif page.runs:
        click.echo(table([COLUMNS, *(row(r) for r in page.runs)]))
    else:
        click.echo("no runs")
    if page.next_cursor:
        hint = next_page(page, graph_id=graph_id, status=status, since=since, limit=limit, as_json=as_json)
        hint += f" --schedule {shlex.quote(schedule_id)}" if schedule_id else ""
        click.echo(f"next page: {hint}", err=True)


def next_page(
    page: RunPage,
    *,
    graph_id: str | None,
    status: str | None,
    since: datetime | None,
    limit: int,
    as_json: bool,
) -> str:
    """The command line that lists the page after `page` (a relative `--since` made absolute)."""
    args = ["graphrunner", "list"]
    if graph_id:
        args += ["--graph", graph_id]
    if status:
        args += ["--status", status]
    if since:
        args += ["--since", since.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")]
    if limit != 50:
        args += ["--limit", str(limit)]
    args += ["--cursor", page.next_cursor or ""]
    if as_json:
        args.append("--json")
    return shlex.join(args)


def row(run: RunSummary) -> tuple[str, ...]:
    """The table cells of one run."""
    return (run.run_id, run.graph_id, run.status, str(run.step), iso_time(run.created_at))


def table(rows: list[tuple[str, ...]]) -> str:
    """Rows as left-aligned columns two spaces apart."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows)
