"""Schedules without Redis: the spec and its errors, tick times, jitter, run ids, the graph language."""

from __future__ import annotations

import textwrap
from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from graphrunner import parse_graph
from graphrunner.cli import schedules as schedules_cli
from graphrunner.cluster.runs.ids import RUN_ID
from graphrunner.cluster.schedules.admin import make_spec, schedule_id
from graphrunner.cluster.schedules.firing import plan, skip_ahead
from graphrunner.cluster.schedules.store import ScheduleRecord
from graphrunner.cluster.schedules.timing import (
    fires_at,
    jitter_of,
    next_fires,
    tick_run_id,
    ticks_between,
    trigger_run_id,
)
from graphrunner.errors import GraphValidationError, ScheduleError
from graphrunner.model.schedules import OVERLAPS, ScheduleSpec, check_schedule_id

T0 = int(datetime(2030, 1, 1, tzinfo=UTC).timestamp())


def test_durations_defaults_and_the_default_concurrency_key() -> None:
    spec = ScheduleSpec.model_validate({"every": "15m", "catchup_window": "1d", "jitter": 30})
    assert (spec.every, spec.catchup_window, spec.jitter) == (900, 86400, 30)
    assert (spec.timezone, spec.overlap, spec.paused, spec.inputs) == ("UTC", "skip", False, {})
    assert ScheduleSpec(cron="0 * * * *").catchup_window == 3600
    assert spec.key_for("g/n") == "schedule:g/n"
    assert ScheduleSpec(every=60, overlap="allow_all").key_for("g/n") is None
    assert ScheduleSpec(every=60, concurrency_key="shared").key_for("g/n") == "shared"


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"cron": "61 * * * *"}, ["cron", "61 * * * *"]),
        ({"cron": "* * *"}, ["cron"]),
        ({"every": 60, "timezone": "Mars/Olympus"}, ["timezone", "Mars/Olympus"]),
        ({"every": 60, "timezone": "../../etc/passwd"}, ["timezone"]),
        ({"every": 60, "jitter": -1}, ["jitter", "negative"]),
        ({"every": 60, "jitter": "-5m"}, ["-5m", "duration"]),
        ({"every": "soon"}, ["soon", "duration"]),
        ({"every": 0.5}, ["every", "whole"]),
        ({"cron": "* * * * *", "every": 60}, ["exactly one"]),
        ({}, ["exactly one"]),
        ({"every": 60, "overlap": "sometimes"}, ["overlap"]),
        ({"every": 60, "overlap": "allow_all", "concurrency_key": "k"}, ["concurrency_key"]),
        ({"every": 60, "colour": "red"}, ["colour"]),
        ({"every": 60, "jitter": "1m"}, ["jitter", "shorter"]),
        ({"every": 60, "concurrency_key": "a key; rm -rf"}, ["concurrency_key"]),
    ],
)
def test_a_bad_spec_names_the_schedule_and_the_field(fields: dict[str, object], words: list[str]) -> None:
    with pytest.raises(ScheduleError) as caught:
        make_spec("g/nightly", fields)
    message = str(caught.value)
    assert message.startswith("schedule g/nightly:")
    for word in words:
        assert word in message


@pytest.mark.parametrize("bad", ["", "a b", "$(rm -rf /)", "a;b", ".*", "x" * 200, "-lead", "a\nb", "é"])
def test_ids_with_shell_or_regex_syntax_are_refused(bad: str) -> None:
    with pytest.raises(ScheduleError, match="invalid schedule"):
        schedule_id("g", bad)
    with pytest.raises(ScheduleError, match="invalid schedule id"):
        check_schedule_id(bad)
    assert check_schedule_id("graph.v1/nightly-2") == "graph.v1/nightly-2"


def test_interval_ticks_are_anchored_at_the_epoch() -> None:
    spec = ScheduleSpec(every=3600)
    assert ticks_between(spec, T0 + 10, T0 + 3 * 3600, 10) == [T0 + 3600, T0 + 7200, T0 + 10800]
    assert ticks_between(spec, T0, T0 + 3600, 10) == [T0 + 3600]  # strictly after the start
    assert ticks_between(spec, T0, T0 + 10 * 3600, 2) == [T0 + 3600, T0 + 7200]


def test_cron_ticks_follow_the_time_zone_across_a_dst_change() -> None:
    spec = ScheduleSpec(cron="30 9 * * *", timezone="Europe/Paris")
    before = datetime(2030, 3, 29, tzinfo=UTC).timestamp()
    ticks = ticks_between(spec, before, before + 3 * 86400, 10)
    hours = [datetime.fromtimestamp(t, UTC).strftime("%d %H:%M") for t in ticks]
    assert hours == ["29 08:30", "30 08:30", "31 07:30"]  # 09:30 in Paris: CET, then CEST from the 31st


def test_jitter_is_fixed_per_tick_and_within_its_bound() -> None:
    values = [jitter_of("g/n", T0 + i * 60, 600) for i in range(200)]
    assert values == [jitter_of("g/n", T0 + i * 60, 600) for i in range(200)]  # every beat agrees
    assert all(0 <= v < 600 for v in values) and len(set(values)) > 150
    assert jitter_of("g/other", T0, 600) != jitter_of("g/n", T0, 600)
    assert jitter_of("g/n", T0, 0) == 0.0
    spec = ScheduleSpec(every=3600, jitter=600)
    assert next_fires("g/n", spec, T0, 2) == [
        fires_at("g/n", spec, T0 + 3600),
        fires_at("g/n", spec, T0 + 7200),
    ]


def test_run_ids_are_derived_from_schedule_and_tick_and_are_valid_run_ids() -> None:
    first = tick_run_id("graph.v1/nightly", T0)
    assert first == tick_run_id("graph.v1/nightly", T0) and first.endswith(".20300101T000000Z")
    assert first != tick_run_id("graph.v1/nightly", T0 + 60)
    assert tick_run_id("a/b", T0) != tick_run_id(
        "a-b", T0
    )  # '/' is not in run ids: the hash tells them apart
    for rid in (first, tick_run_id("x" * 60 + "/" + "y" * 59, T0), trigger_run_id("a/b", "0123456789ab")):
        assert RUN_ID.match(rid), rid


def record(spec: ScheduleSpec, claimed: int) -> ScheduleRecord:
    return ScheduleRecord("g/n", spec, "g", "h", "api", False, claimed, 0, 0)


def test_plan_splits_missed_from_due_ticks_by_the_catch_up_window() -> None:
    spec = ScheduleSpec(every=600, catchup_window=1800)
    missed, fire, upto, next_fire = plan(record(spec, T0), T0 + 7200)
    assert fire == [T0 + 5400, T0 + 6000, T0 + 6600, T0 + 7200]  # at most 30 minutes late, inclusive
    assert missed == [T0 + 600 * i for i in range(1, 9)]
    assert (upto, next_fire) == (T0 + 7200, T0 + 7800)
    assert plan(record(spec, T0 + 7200), T0 + 7201)[:3] == ([], [], T0 + 7200)  # nothing new


def test_a_long_outage_of_an_interval_schedule_is_skipped_without_looking_at_each_tick() -> None:
    spec = ScheduleSpec(every=1, catchup_window=60)
    now = T0 + 7 * 86400
    ahead, start = skip_ahead(record(spec, T0), now)
    assert (ahead, start) == (7 * 86400 - 60 - 1 - 100, now - 60 - 1 - 100)
    missed, fire, upto, _ = plan(record(spec, T0), now, start)
    assert missed == list(range(start + 1, now - 60)) and len(missed) == 100
    assert fire == list(range(now - 60, now + 1)) and upto == now
    assert skip_ahead(record(spec, now - 100), now) == (0, now - 100)  # little behind: one by one
    assert skip_ahead(record(ScheduleSpec(cron="* * * * *"), T0), now) == (0, T0)


def test_the_cli_knows_every_overlap_policy() -> None:
    assert schedules_cli.OVERLAPS == OVERLAPS


GRAPH = """
    id: t/scheduled
    inputs: {who: {type: string, default: world}}
    config:
      start: done
      schedules:
        hourly: {cron: "0 * * * *", timezone: Europe/Paris, inputs: {who: cron}, overlap: buffer_one}
        quick: {every: 30s, jitter: 5s}
    nodes:
      done: {type: return, output: {who: "${inputs.who}"}}
"""


def test_a_graph_declares_its_schedules() -> None:
    graph = parse_graph(textwrap.dedent(GRAPH))
    schedules = graph.spec.config.schedules
    assert schedules["hourly"].overlap == "buffer_one" and schedules["hourly"].inputs == {"who": "cron"}
    assert schedules["quick"].every == 30 and schedules["quick"].jitter == 5


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (('cron: "0 * * * *"', 'cron: "0 * * *"'), ["hourly", "cron"]),
        (("Europe/Paris", "Europe/Nowhere"), ["hourly", "timezone"]),
        (("jitter: 5s", "jitter: -5"), ["quick", "jitter"]),
        (("quick:", "bad name!:"), ["bad name!"]),
    ],
)
def test_a_bad_declared_schedule_is_a_graph_error_naming_it(
    change: tuple[str, str], words: list[str]
) -> None:
    with pytest.raises(GraphValidationError) as caught:
        parse_graph(textwrap.dedent(GRAPH).replace(*change))
    for word in words:
        assert word in str(caught.value)


def test_spec_round_trips_through_json() -> None:
    spec = ScheduleSpec(cron="*/5 * * * *", timezone="America/New_York", inputs={"a": [1]}, jitter="1m")
    assert ScheduleSpec.model_validate_json(spec.model_dump_json()) == spec
    with pytest.raises(ValidationError):
        ScheduleSpec.model_validate({"every": True})
