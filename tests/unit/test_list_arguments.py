"""`list --since/--until` times and the GRAPHRUNNER_RETENTION setting (no Redis)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from graphrunner.cli.runs_list import parse_time
from graphrunner.errors import InvalidRunQuery
from graphrunner.settings import Settings
from graphrunner.store import Cursor, RunQuery


def test_relative_and_iso_times() -> None:
    now = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
    assert parse_time("2h", now) == now - timedelta(hours=2)
    assert parse_time("7d", now) == now - timedelta(days=7)
    assert parse_time("30m", now) == now - timedelta(minutes=30)
    assert parse_time("1w", now) == now - timedelta(weeks=1)
    assert parse_time("2026-05-01") == datetime(2026, 5, 1, tzinfo=UTC)
    assert parse_time("2026-05-01T10:00:00+02:00") == datetime(2026, 5, 1, 8, tzinfo=UTC)
    assert parse_time("2026-05-01T10:00:00Z") == datetime(2026, 5, 1, 10, tzinfo=UTC)
    assert parse_time("2026-05-01T10:00:00.250Z") == datetime(2026, 5, 1, 10, 0, 0, 250_000, tzinfo=UTC)
    for bad in ("soon", "2x", "-2h", ""):
        with pytest.raises(ValueError):
            parse_time(bad)


def test_cursor_round_trip_and_query_bounds() -> None:
    assert Cursor.decode(Cursor(1_767_225_600_123, 2).encode()) == Cursor(1_767_225_600_123, 2)
    query = RunQuery.build(since=1000, until=5000, cursor="4000-3")
    assert (query.since_ms, query.until_ms, query.start()) == (1000, 5000, (4000, 3))
    assert RunQuery.build(until=3000, cursor="4000-3").start() == (2999, 0)  # until is exclusive
    assert RunQuery.build(offset=7).start() == (None, 7)
    naive = RunQuery.build(since=datetime(2026, 1, 1))
    assert naive.since_ms == int(datetime(2026, 1, 1, tzinfo=UTC).timestamp() * 1000)
    with pytest.raises(InvalidRunQuery, match="limit must be a whole number, got True"):
        RunQuery.build(limit=True)


def test_retention_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GRAPHRUNNER_RETENTION", raising=False)
    assert Settings.from_env().retention == 7 * 24 * 3600
    monkeypatch.setenv("GRAPHRUNNER_RETENTION", "3600")
    assert Settings.from_env().retention == 3600
    for bad, message in (("0", "at least 1"), ("-5", "at least 1"), ("7d", "whole number")):
        monkeypatch.setenv("GRAPHRUNNER_RETENTION", bad)
        with pytest.raises(ValueError, match=f"GRAPHRUNNER_RETENTION must be .*{message}"):
            Settings.from_env()
