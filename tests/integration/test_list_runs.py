"""Listing runs: filters by graph, status and creation time, pages without duplicates or gaps,
runs whose record has expired skipped, and clear errors for bad arguments."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from itertools import pairwise

import pytest
from click.testing import CliRunner
from support import settings_of

from graphrunner.cli import main
from graphrunner.client import Client
from graphrunner.embedded import EmbeddedRedis
from graphrunner.engine import RunSnapshot, RunStatus
from graphrunner.errors import GraphrunnerError, InvalidRunQuery
from graphrunner.store import Fence, RunSummary
from graphrunner.store.keys import KeySpace

KEYS = KeySpace()  # the layout on one Redis
SHARD = KEYS.shards[0]

GRAPHS = ("t/alpha", "t/beta", "t/gamma")
CYCLE = (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.RUNNING, RunStatus.COMPLETED, RunStatus.PAUSED)
COUNT = 90


@pytest.fixture(scope="module")
def private_redis() -> Iterator[EmbeddedRedis]:
    """A Redis of this module's own, so listings see only these runs."""
    with EmbeddedRedis() as server:
        yield server


@pytest.fixture(scope="module")
def client(private_redis: EmbeddedRedis) -> Iterator[Client]:
    """A client of the private Redis holding `COUNT` runs over three graphs and four statuses."""
    with Client(settings=settings_of(redis_url=private_redis.url)) as client:
        for i in range(COUNT):
            store_run(client, f"run-{i:03d}", GRAPHS[i % 3], CYCLE[i // 3 % len(CYCLE)])
        yield client


@pytest.fixture(scope="module")
def everything(client: Client) -> list[RunSummary]:
    """Every stored run, newest first, in one page."""
    runs = client.list_runs(limit=1000)
    assert len(runs) == COUNT
    return runs


def store_run(client: Client, run_id: str, graph_id: str, status: RunStatus) -> None:
    """Create a run and commit one step that leaves it in `status`."""
    snap = RunSnapshot(run_id=run_id, graph_id=graph_id, node="work")
    assert client.store.create_run(snap, "fp").created
    after = snap.model_copy(update={"step": 1, "status": status})
    record = json.dumps({"step": 1, "node": "work"})
    assert client.store.commit(Fence.of(snap), after, [record], ["work"]).committed


def ids(runs: list[RunSummary]) -> list[str]:
    return [r.run_id for r in runs]


def newest_first(runs: list[RunSummary]) -> bool:
    return all(a.created_at >= b.created_at for a, b in pairwise(runs))


def walk(client: Client, limit: int, **filters: object) -> list[RunSummary]:
    """Every page of a listing, following the cursors."""
    found, cursor = [], None
    for _ in range(1000):
        page = client.list_page(limit=limit, cursor=cursor, **filters)  # type: ignore[arg-type]
        found += page.runs
        cursor = page.next_cursor
        if cursor is None:
            return found
    raise AssertionError("paging did not end")


def test_filters_by_graph_status_and_both(client: Client, everything: list[RunSummary]) -> None:
    assert newest_first(everything)
    for graph_id in GRAPHS:
        listed = client.list_runs(graph_id=graph_id, limit=1000)
        assert ids(listed) == [r.run_id for r in everything if r.graph_id == graph_id]
    for status in ("completed", "failed", "running", "paused"):
        listed = client.list_runs(status=status, limit=1000)
        assert ids(listed) == [r.run_id for r in everything if r.status == status]
        assert listed
    for graph_id in GRAPHS:
        for status in ("completed", "failed", "paused"):
            listed = client.list_runs(graph_id=graph_id, status=status, limit=1000)
            assert ids(listed) == [
                r.run_id for r in everything if (r.graph_id, r.status) == (graph_id, status)
            ]
            assert listed
    assert client.list_runs(status="cancelled") == []
    assert client.list_runs(graph_id="t/none") == []


def test_graph_and_status_is_read_from_its_own_index(client: Client) -> None:
    key = SHARD.index_graph_status("t/beta", "failed")
    assert set(client.store.redis.zrange(key, 0, -1)) == {
        r.run_id for r in client.list_runs(graph_id="t/beta", status="failed", limit=1000)
    }


def test_time_window(client: Client, everything: list[RunSummary]) -> None:
    oldest_first = everything[::-1]
    since, until = oldest_first[20].created_at, oldest_first[60].created_at
    window = client.list_runs(since=since, until=until, limit=1000)
    assert ids(window) == [r.run_id for r in everything if since <= r.created_at < until]
    assert window and newest_first(window)
    as_datetimes = client.list_runs(
        since=datetime.fromtimestamp(since / 1000, tz=UTC),
        until=datetime.fromtimestamp(until / 1000, tz=UTC).replace(tzinfo=None),  # naive: UTC
        limit=1000,
    )
    assert ids(as_datetimes) == ids(window)
    mixed = client.list_runs(graph_id="t/alpha", status="completed", since=since, limit=1000)
    expected = [r for r in everything if r.created_at >= since]
    assert ids(mixed) == [r.run_id for r in expected if (r.graph_id, r.status) == ("t/alpha", "completed")]
    assert client.list_runs(until=everything[-1].created_at) == []


@pytest.mark.parametrize("limit", [1, 7, 30, 89, 90])
def test_cursor_pages_have_no_duplicates_or_gaps(
    client: Client, everything: list[RunSummary], limit: int
) -> None:
    pages = walk(client, limit)
    assert ids(pages) == ids(everything)


def test_cursor_pages_with_filters(client: Client, everything: list[RunSummary]) -> None:
    since = everything[-30].created_at
    pages = walk(client, 4, graph_id="t/gamma", status="completed", since=since)
    expected = [r for r in everything if (r.graph_id, r.status) == ("t/gamma", "completed")]
    assert ids(pages) == [r.run_id for r in expected if r.created_at >= since]
    assert pages


def test_offset_pages(client: Client, everything: list[RunSummary]) -> None:
    pages = [client.list_runs(limit=25, offset=o) for o in range(0, COUNT, 25)]
    assert [r for page in pages for r in ids(page)] == ids(everything)
    assert client.list_runs(offset=COUNT) == []
    page = client.list_page(limit=10, offset=30)
    assert ids(list(client.list_page(limit=10, cursor=page.next_cursor).runs)) == ids(everything[40:50])


def test_the_last_page_has_no_cursor(client: Client) -> None:
    assert client.list_page(limit=COUNT).next_cursor is None
    assert client.list_page(limit=COUNT - 1).next_cursor is not None
    assert client.list_page(graph_id="t/none").next_cursor is None


def test_pages_of_runs_created_in_one_millisecond(private_redis: EmbeddedRedis) -> None:
    with Client(settings=settings_of(redis_url=private_redis.url.replace("/0", "/3"))) as client:
        client.store.redis.flushdb()
        for i in range(23):
            store_run(client, f"tie-{i:02d}", "t/tie", RunStatus.COMPLETED)
        same = 1_700_000_000_000
        for i in range(23):  # as if all were created in the same millisecond
            client.store.index.change(f"tie-{i:02d}", "t/tie", None, "completed", same, same)
        everything = client.list_runs(limit=100)
        assert len(everything) == 23
        for limit in (1, 4, 5, 22):
            assert ids(walk(client, limit)) == ids(everything)
            assert ids(walk(client, limit, status="completed", graph_id="t/tie")) == ids(everything)
        first = client.list_page(limit=3, offset=5)  # an offset inside the tie, then a cursor
        assert ids(list(first.runs) + walk_from(client, first.next_cursor)) == ids(everything[5:])


def walk_from(client: Client, cursor: str | None) -> list[RunSummary]:
    found: list[RunSummary] = []
    while cursor is not None:
        page = client.list_page(limit=4, cursor=cursor)
        found, cursor = found + list(page.runs), page.next_cursor
    return found


def test_runs_added_between_pages_shift_nothing(private_redis: EmbeddedRedis) -> None:
    with Client(settings=settings_of(redis_url=private_redis.url.replace("/0", "/4"))) as client:
        client.store.redis.flushdb()
        for i in range(12):
            store_run(client, f"old-{i:02d}", "t/grow", RunStatus.COMPLETED)
        before = client.list_runs(limit=100)
        first = client.list_page(limit=5)
        for i in range(6):
            store_run(client, f"new-{i:02d}", "t/grow", RunStatus.COMPLETED)
        rest = walk_from(client, first.next_cursor)
        assert ids(list(first.runs) + rest) == ids(before)


def test_runs_whose_record_is_gone_are_skipped_and_the_page_still_fills(private_redis: EmbeddedRedis) -> None:
    with Client(settings=settings_of(redis_url=private_redis.url.replace("/0", "/5"))) as client:
        client.store.redis.flushdb()
        for i in range(30):
            store_run(client, f"run-{i:02d}", "t/gone", RunStatus.FAILED)
        everything = client.list_runs(limit=100)
        gone = {r.run_id for r in everything[2:14]}  # expired, not yet pruned
        client.store.redis.delete(*(KEYS.run(r) for r in gone))
        alive = [r for r in everything if r.run_id not in gone]
        assert ids(client.list_runs(limit=5)) == ids(alive[:5])
        assert ids(client.list_runs(limit=10, status="failed", graph_id="t/gone")) == ids(alive[:10])
        assert ids(walk(client, 3)) == ids(alive)
        assert ids(walk(client, 3, status="failed")) == ids(alive)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"status": "exploded"}, "unknown status 'exploded'; use one of pending, running"),
        ({"limit": -1}, "limit must be between 1 and 1000, got -1"),
        ({"limit": 0}, "limit must be between 1 and 1000, got 0"),
        ({"limit": 1001}, "limit must be between 1 and 1000, got 1001"),
        ({"offset": -5}, "offset must be at least 0, got -5"),
        ({"since": "yesterday"}, "since must be a datetime or epoch milliseconds (int), got str 'yesterday'"),
        ({"until": 1.5}, "until must be a datetime or epoch milliseconds (int), got float 1.5"),
        ({"since": -1}, "since must not be before 1970"),
        ({"since": 2000, "until": 1000}, "since (2000 ms) must be before until (1000 ms)"),
        ({"cursor": "page-2"}, "malformed cursor 'page-2'"),
        ({"cursor": "1-0", "offset": 3}, "pass either a cursor or an offset, not both"),
        ({"graph_id": ""}, "graph_id must be a non-empty string"),
    ],
)
def test_bad_arguments_are_clear_errors(client: Client, kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidRunQuery) as caught:
        client.list_runs(**kwargs)  # type: ignore[arg-type]
    assert message in str(caught.value)
    assert isinstance(caught.value, GraphrunnerError)


# --- the CLI -------------------------------------------------------------------------------------------


def cli(client: Client, *args: str) -> tuple[int, str, str]:
    env = {"GRAPHRUNNER_REDIS_URL": client.settings.redis_url, "GRAPHRUNNER_BROKER_URL": None}
    result = CliRunner().invoke(main, ["list", *args], env=env)
    return result.exit_code, result.stdout, result.stderr


def test_cli_pages_with_the_printed_cursor(client: Client, everything: list[RunSummary]) -> None:
    code, out, err = cli(client, "--limit", "40", "--json")
    assert code == 0
    seen, hints = [r["run_id"] for r in json.loads(out)], 0
    while err:
        assert err.startswith("next page: graphrunner list --limit 40 --cursor ") and err.endswith("--json\n")
        code, out, err = cli(client, *err.split()[4:])
        assert code == 0
        seen += [r["run_id"] for r in json.loads(out)]
        hints += 1
    assert seen == ids(everything) and hints == 2


def test_cli_next_page_makes_a_relative_since_absolute(client: Client, everything: list[RunSummary]) -> None:
    code, out, err = cli(client, "--since", "1h", "--status", "completed", "--limit", "20")
    assert code == 0 and "--since 1h" not in err
    args = err.split()[4:]
    since = args[args.index("--since") + 1]
    assert since.endswith("Z") and since[:4].isdigit()
    code, rest, err = cli(client, *args)
    listed = [line.split()[0] for line in out.splitlines()[1:] + rest.splitlines()[1:]]
    assert code == 0 and err == ""
    assert listed == [r.run_id for r in everything if r.status == "completed"]


def test_cli_filters_and_times(client: Client, everything: list[RunSummary]) -> None:
    code, out, err = cli(client, "--graph", "t/beta", "--status", "failed", "--limit", "2")
    expected = [r for r in everything if (r.graph_id, r.status) == ("t/beta", "failed")]
    lines = out.splitlines()
    assert code == 0 and lines[0].split() == ["RUN_ID", "GRAPH", "STATUS", "STEPS", "CREATED"]
    assert [line.split()[0] for line in lines[1:]] == ids(expected[:2])
    assert err.startswith("next page: graphrunner list --graph t/beta --status failed --limit 2 --cursor ")
    code, out, err = cli(client, "--since", "1h", "--until", "2999-01-01T00:00:00Z", "--limit", "1000")
    assert code == 0 and len(out.splitlines()) == COUNT + 1 and err == ""
    code, out, _ = cli(client, "--until", "2000-01-01")
    assert (code, out) == (0, "no runs\n")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--since", "2x"], "'2x' is not a time: use ISO-8601"),
        (["--until", "tomorrow"], "'tomorrow' is not a time"),
        (["--limit", "-1"], "--limit"),
        (["--limit", "5000"], "--limit"),
        (["--offset", "-2"], "--offset"),
        (["--status", "exploded"], "exploded"),
        (["--cursor", "nope"], "error: malformed cursor 'nope'"),
        (["--cursor", "1-0", "--offset", "2"], "error: pass either a cursor or an offset, not both"),
        (["--since", "2026-01-02", "--until", "2026-01-01"], "error: since ("),
    ],
)
def test_cli_bad_values_exit_2(client: Client, args: list[str], message: str) -> None:
    code, out, err = cli(client, *args)
    assert code == 2 and out == ""
    assert message in err
