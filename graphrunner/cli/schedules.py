"""`graphrunner schedule add|list|show|pause|resume|trigger|backfill|remove` (docs/schedules.md).

A schedule's id is `<graph id>/<name>`. Exit 0 on success, 1 for an unknown schedule or an
unreachable Redis, 2 for bad usage (a bad cron, time zone, duration, id or graph).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any

import click

from graphrunner.cli.common import USAGE_ERROR, fail, input_options, print_json
from graphrunner.cli.connect import cluster_client, reported_errors
from graphrunner.cli.runs_list import TIME_HELP, TimeParam, table
from graphrunner.errors import ScheduleError, ScheduleNotFound

if TYPE_CHECKING:  # imported when used: redis-py is not needed for --help
    from graphrunner.cluster.schedules.admin import ScheduleInfo
    from graphrunner.cluster.schedules.store import TickOutcome

# A copy of graphrunner.model.schedules.OVERLAPS: importing the spec module for `--help` would
# bring pydantic's models in (tests/unit/test_schedules_cli.py checks they agree).
OVERLAPS = ("skip", "buffer_one", "buffer_all", "cancel_other", "terminate_other", "allow_all")
OVERLAP_HELP = (
    "What a tick does while the schedule's previous run is active: skip (default) starts nothing; "
    "buffer_one starts it when the active run ends, unless one already waits; buffer_all queues every "
    "tick; cancel_other / terminate_other cancel the active run and start the new one; allow_all "
    "starts it at once, no concurrency key."
)
DURATION_HELP = "seconds, or a number with s, m, h or d (30s, 15m, 6h, 1d)"
COLUMNS = ("ID", "GRAPH", "WHEN", "TZ", "OVERLAP", "PAUSED", "NEXT FIRE", "LAST OUTCOME")
JSON_HELP = "Print JSON instead of text."


@contextmanager
def schedule_errors() -> Iterator[None]:
    """An unknown schedule exits 1; a bad schedule or id exits 2; other errors as every command's."""
    with reported_errors():
        try:
            yield
        except ScheduleNotFound as exc:
            fail(str(exc), 1)
        except ScheduleError as exc:
            fail(str(exc), USAGE_ERROR)


@click.group("schedule")
def schedule() -> None:
    """Periodic schedules: runs of a graph at cron times or intervals, each tick fired once.

    Workers and `graphrunner beat` fire them; a schedule's id is GRAPH_ID/NAME.
    """


@schedule.command("add")
@click.argument("graph")
@click.argument("name", required=False)
@click.option(
    "--cron", metavar="EXPR", help="Fire at these cron times (5 fields: minute hour day month weekday)."
)
@click.option(
    "--every",
    metavar="DURATION",
    help=f"Fire at multiples of this interval since the epoch: {DURATION_HELP}.",
)
@click.option(
    "--timezone", default="UTC", show_default=True, help="The IANA time zone cron times are read in."
)
@input_options
@click.option("--overlap", type=click.Choice(OVERLAPS), default="skip", show_default=True, help=OVERLAP_HELP)
@click.option(
    "--catchup-window",
    default="1h",
    show_default=True,
    metavar="DURATION",
    help=f"A tick missed while no beat ran fires late if at most this late, else is skipped: {DURATION_HELP}",
)
@click.option(
    "--jitter",
    default="0",
    show_default=True,
    metavar="DURATION",
    help=f"Fire each tick up to this much late, a delay fixed per tick: {DURATION_HELP}.",
)
@click.option(
    "--concurrency-key",
    metavar="KEY",
    help="Key deciding overlap (default schedule:GRAPH_ID/NAME): schedules sharing a key never overlap.",
)
@click.option("--paused", is_flag=True, help="Add it paused: nothing fires until `schedule resume`.")
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
def add(
    graph: str,
    name: str | None,
    cron: str | None,
    every: str | None,
    timezone: str,
    inputs_json: dict[str, Any],
    input_pairs: Mapping[str, str],
    overlap: str,
    catchup_window: str,
    jitter: str,
    concurrency_key: str | None,
    paused: bool,
    as_json: bool,
) -> None:
    """Add (or replace) schedule GRAPH_ID/NAME; without --cron or --every, register the schedules
    GRAPH declares in its `config.schedules` instead."""
    from graphrunner.cli.common import merge_inputs, open_graph

    with schedule_errors(), cluster_client() as client:
        loaded = open_graph(graph, client.settings)
        if cron is None and every is None:
            if name is not None:
                fail(
                    "give --cron or --every for a schedule NAME (without them, GRAPH's own are registered)",
                    USAGE_ERROR,
                )
            infos = client.schedules.register(loaded)
            if not infos:
                fail(
                    f"graph {loaded.id} declares no schedules: give a NAME and --cron or --every", USAGE_ERROR
                )
        else:
            if name is None:
                fail("missing the schedule NAME (its id will be GRAPH_ID/NAME)", USAGE_ERROR)
            inputs = merge_inputs(inputs_json, input_pairs, loaded)
            infos = [
                client.schedules.add(
                    loaded,
                    name,
                    cron=cron,
                    every=every,
                    timezone=timezone,
                    inputs=inputs,
                    overlap=overlap,
                    catchup_window=catchup_window,
                    jitter=jitter,
                    concurrency_key=concurrency_key,
                    paused=paused,
                )
            ]
    _print_infos(infos, as_json)


@schedule.command("list")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print a JSON list of schedules (spec, next fires, recent outcomes).",
)
def list_schedules(as_json: bool) -> None:
    """List schedules: id, graph, cron or interval, time zone, overlap, paused, next fire, last outcome."""
    with schedule_errors(), cluster_client() as client:
        infos = client.schedules.list()
    _print_infos(infos, as_json)


@schedule.command("show")
@click.argument("schedule_id")
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
def show(schedule_id: str, as_json: bool) -> None:
    """Show one schedule: its spec, its next 5 fire times and its recent tick outcomes."""
    with schedule_errors(), cluster_client() as client:
        info = client.schedules.get(schedule_id)
    _print_one(info, as_json)
    if not as_json:
        click.echo("next fires: " + (", ".join(_when(t) for t in info.next_fires) or "none (paused)"))
        for outcome in info.recent:
            click.echo(f"  {describe(outcome)}")


@schedule.command("pause")
@click.argument("schedule_id")
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
def pause(schedule_id: str, as_json: bool) -> None:
    """Stop firing SCHEDULE_ID's ticks until it is resumed."""
    with schedule_errors(), cluster_client() as client:
        info = client.schedules.pause(schedule_id)
    _print_one(info, as_json)


@schedule.command("resume")
@click.argument("schedule_id")
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
def resume(schedule_id: str, as_json: bool) -> None:
    """Fire SCHEDULE_ID again from its next tick (ticks while it was paused never fire)."""
    with schedule_errors(), cluster_client() as client:
        info = client.schedules.resume(schedule_id)
    _print_one(info, as_json)


@schedule.command("trigger")
@click.argument("schedule_id")
@click.option(
    "--overlap", type=click.Choice(OVERLAPS), help="This run's overlap policy (default: the schedule's)."
)
@click.option("--json", "as_json", is_flag=True, help="Print {run_id}.")
def trigger(schedule_id: str, overlap: str | None, as_json: bool) -> None:
    """Start a run of SCHEDULE_ID now, outside its ticks, and print its run id."""
    with schedule_errors(), cluster_client() as client:
        handle = client.schedules.trigger(schedule_id, overlap)
    if as_json:
        print_json({"run_id": handle.id})
    else:
        click.echo(handle.id)


@schedule.command("backfill")
@click.argument("schedule_id")
@click.option(
    "--start", required=True, type=TimeParam(), help=f"The first tick at or after this time: {TIME_HELP}."
)
@click.option(
    "--end", required=True, type=TimeParam(), help="Up to the last tick before this time (same forms)."
)
@click.option(
    "--overlap",
    type=click.Choice(OVERLAPS),
    help="The backfilled runs' overlap policy (default: the schedule's).",
)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of tick outcomes.")
def backfill(schedule_id: str, start: datetime, end: datetime, overlap: str | None, as_json: bool) -> None:
    """Fire SCHEDULE_ID's ticks in [--start, --end), oldest first; a tick's run is never started twice."""
    with schedule_errors(), cluster_client() as client:
        outcomes = client.schedules.backfill(schedule_id, start, end, overlap)
    if as_json:
        print_json([o.model_dump(mode="json") for o in outcomes])
        return
    for outcome in outcomes:
        click.echo(describe(outcome))
    if not outcomes:
        click.echo("no ticks in that range")


@schedule.command("remove")
@click.argument("schedule_id")
@click.option("--json", "as_json", is_flag=True, help="Print {removed: ID}.")
def remove(schedule_id: str, as_json: bool) -> None:
    """Remove SCHEDULE_ID (the runs it started stay)."""
    with schedule_errors(), cluster_client() as client:
        client.schedules.remove(schedule_id)
    if as_json:
        print_json({"removed": schedule_id})
    else:
        click.echo(f"removed {schedule_id}")


def _print_one(info: ScheduleInfo, as_json: bool) -> None:
    if as_json:
        print_json(info.model_dump(mode="json"))
    else:
        click.echo(table([COLUMNS, row(info)]))


def _print_infos(infos: list[ScheduleInfo], as_json: bool) -> None:
    if as_json:
        print_json([i.model_dump(mode="json") for i in infos])
    elif infos:
        click.echo(table([COLUMNS, *(row(i) for i in infos)]))
    else:
        click.echo("no schedules")


def row(info: ScheduleInfo) -> tuple[str, ...]:
    """The table cells of one schedule."""
    spec = info.spec
    when = spec.cron if spec.cron is not None else f"every {spec.every:g}s"
    last = describe(info.recent[0]) if info.recent else "-"
    nxt = _when(info.next_fires[0]) if info.next_fires else "-"
    return (
        info.id,
        info.graph_id,
        when,
        spec.timezone,
        spec.overlap,
        "yes" if info.paused else "no",
        nxt,
        last,
    )


def describe(outcome: TickOutcome) -> str:
    """`2026-11-27T10:00:00Z fired s.hello-nightly...` and the like."""
    from graphrunner.cluster.schedules.timing import iso

    parts = [
        iso(outcome.tick),
        outcome.outcome,
        outcome.run_id or "",
        f"({outcome.reason})" if outcome.reason else "",
    ]
    return " ".join(p for p in parts if p)


def _when(at: datetime) -> str:
    return at.isoformat(timespec="seconds").replace("+00:00", "Z")
