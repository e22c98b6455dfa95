"""Milliseconds per `list` page with 100,000 runs stored against the same queries with 1,000.

    python -m benchmarks.list_runs [--runs 100000] [--baseline-runs 1000] [--repeat 15] [--json]

Both sets of runs live in one private Redis (database 1: the big set, database 0: the
baseline), written through the real store (`create_run`, then `commit` for the runs that
change status, which re-indexes them): every run has the record, transcript, path, index
entries and expiry that a one-step run leaves. The queries alternate between the two sets,
so the ratio (big over baseline) shows how flat listing stays as runs pile up.
See benchmarks/README.md ("list_runs").
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from multiprocessing import get_context
from typing import Any

from benchmarks.processes import terminate_as_exit
from benchmarks.steps import check_quiet, environment, say
from graphrunner.client import Client
from graphrunner.embedded import EmbeddedRedis
from graphrunner.engine import RunSnapshot, RunStatus
from graphrunner.settings import Settings
from graphrunner.store import Fence, RedisStore, RunPage
from graphrunner.store.keys import KeySpace

GRAPHS = ("bench/orders", "bench/invoices", "bench/emails", "bench/reports")
# out of every 20 runs: how many end in each status (running runs have only been created)
MIX = (
    ("completed", 12),
    ("failed", 3),
    ("running", 2),
    ("completed_with_errors", 1),
    ("cancelled", 1),
    ("paused", 1),
)
STATUS_CYCLE = tuple(status for status, count in MIX for _ in range(count))
PAGE = 50
CHUNK = 5000  # runs one loader process writes per task


@dataclass(frozen=True)
class Query:
    """One timed `Client.list_page` call: its label and keyword arguments."""

    label: str
    kwargs: dict[str, Any]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Command-line options."""
    p = argparse.ArgumentParser(prog="python -m benchmarks.list_runs", description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=100_000, help="runs in the big set (default 100000)")
    p.add_argument("--baseline-runs", type=int, default=1000, help="runs in the baseline set (default 1000)")
    p.add_argument("--repeat", type=int, default=15, help="timed calls per query and set (default 15)")
    p.add_argument("--loaders", type=int, default=2, help="processes writing the runs (default 2)")
    p.add_argument("--json", action="store_true", help="also print every figure as one JSON line")
    return p.parse_args(argv)


def store_runs(url: str, start: int, stop: int) -> int:
    """Write runs `start..stop-1` through the store, as one-step runs in the `MIX` of statuses."""
    store = RedisStore.from_url(url)
    try:
        for i in range(start, stop):
            store_run(store, i)
    finally:
        store.redis.close()
    return stop - start


def store_run(store: RedisStore, i: int) -> None:
    """Create run `i` (running), then commit its one step into its final status."""
    snap = RunSnapshot(run_id=f"bench-{i:07d}", graph_id=GRAPHS[i % len(GRAPHS)], node="work", state={"i": i})
    store.create_run(snap, f"fp-{i}")
    status = RunStatus(STATUS_CYCLE[(i // len(GRAPHS)) % len(STATUS_CYCLE)])
    if status is RunStatus.RUNNING:
        return
    record = {"step": 1, "node": "work", "status": "ok" if status.finished else "paused", "duration_ms": 1}
    node = snap.node if status is RunStatus.PAUSED else None
    after = snap.model_copy(update={"step": 1, "status": status, "node": node})
    store.commit(Fence.of(snap), after, [record], ["work"])


def populate(url: str, count: int, loaders: int) -> float:
    """Write `count` runs with `loaders` processes; the seconds it took."""
    started = time.perf_counter()
    chunks = [(url, s, min(count, s + CHUNK)) for s in range(0, count, CHUNK)]
    if loaders <= 1 or count <= CHUNK:
        for chunk in chunks:
            store_runs(*chunk)
    else:
        with ProcessPoolExecutor(loaders, mp_context=get_context("spawn")) as pool:
            done = 0
            for written in pool.map(store_runs, *zip(*chunks, strict=True)):
                done += written
                if done % 20_000 == 0:
                    say(f"  {done:,} runs stored")
    return time.perf_counter() - started


def queries(client: Client, total: int) -> list[Query]:
    """The timed queries for one set: filters, a window of 10% of the creation span, deep pages."""
    redis = client.store.redis
    oldest = int(redis.zrange(KeySpace().shards[0].index_all(), 0, 0, withscores=True)[0][1])
    newest = int(redis.zrange(KeySpace().shards[0].index_all(), -1, -1, withscores=True)[0][1])
    span = max(1, newest - oldest)
    since, until = oldest + span * 45 // 100, oldest + span * 55 // 100 + 1
    deep = total * 9 // 10
    return [
        Query("newest page", {}),
        Query("by graph", {"graph_id": GRAPHS[1]}),
        Query("by status (failed)", {"status": "failed"}),
        Query("by graph + status", {"graph_id": GRAPHS[1], "status": "completed"}),
        Query("time window (10%)", {"since": since, "until": until}),
        Query("window + graph + status", {"graph_id": GRAPHS[2], "status": "completed", "since": since}),
        Query("deep page: offset 90%", {"offset": deep}),
        Query("deep page: cursor at 90%", {"cursor": cursor_at(client, deep)}),
    ]


def cursor_at(client: Client, depth: int) -> str:
    """The cursor of the page that starts `depth` runs down, reached by paging (1,000 a page)."""
    cursor, seen = None, 0
    while seen < depth:
        page = client.list_page(limit=min(1000, depth - seen), cursor=cursor)
        seen, cursor = seen + len(page.runs), page.next_cursor
        if cursor is None:
            raise RuntimeError(f"only {seen} runs listed, wanted a cursor at {depth}")
    if cursor is None:
        raise RuntimeError(f"no cursor at depth {depth}")
    return cursor


def timed(client: Client, query: Query) -> tuple[float, RunPage]:
    """Milliseconds of one `list_page` call and its page."""
    started = time.perf_counter()
    page = client.list_page(limit=PAGE, **query.kwargs)
    return (time.perf_counter() - started) * 1000, page


def measure(sets: dict[str, Client], totals: dict[str, int], repeat: int) -> list[dict[str, Any]]:
    """Median ms per query and set, the sets alternating call by call."""
    plans = {name: queries(client, totals[name]) for name, client in sets.items()}
    rows = []
    for i, query in enumerate(plans["baseline"]):
        samples: dict[str, list[float]] = {name: [] for name in sets}
        for rep in range(repeat + 2):  # the first two calls of each are warm-up
            for name, client in sets.items():
                ms, page = timed(client, plans[name][i])
                if len(page.runs) != PAGE:
                    raise RuntimeError(f"{query.label} on {name}: {len(page.runs)} runs, expected {PAGE}")
                if rep >= 2:
                    samples[name].append(ms)
        medians = {name: statistics.median(v) for name, v in samples.items()}
        rows.append(
            {
                "query": query.label,
                "baseline_ms": round(medians["baseline"], 3),
                "big_ms": round(medians["big"], 3),
                "ratio": round(medians["big"] / medians["baseline"], 2),
                "samples_ms": {name: [round(x, 3) for x in v] for name, v in samples.items()},
            }
        )
        say(f"{query.label:26} {medians['baseline']:7.2f} ms  {medians['big']:7.2f} ms")
    return rows


def walk_all(client: Client, limit: int = 1000) -> float:
    """Seconds to page through every run with cursors, `limit` a page."""
    started, cursor, seen = time.perf_counter(), None, 0
    while True:
        page = client.list_page(limit=limit, cursor=cursor)
        seen, cursor = seen + len(page.runs), page.next_cursor
        if cursor is None:
            return time.perf_counter() - started


def table(rows: list[dict[str, Any]], totals: dict[str, int]) -> str:
    """The figures as aligned columns."""
    head = ("query", f"{totals['baseline']:,} runs (ms)", f"{totals['big']:,} runs (ms)", "ratio")
    cells = [head] + [
        (r["query"], f"{r['baseline_ms']:.2f}", f"{r['big_ms']:.2f}", f"{r['ratio']:.2f}x") for r in rows
    ]
    widths = [max(len(c[i]) for c in cells) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def used_mb(client: Client) -> float:
    """Redis memory in use (whole server), MB."""
    return round(float(client.store.redis.info("memory")["used_memory"]) / 1e6, 1)


def run(server: EmbeddedRedis, args: argparse.Namespace) -> dict[str, Any]:
    """Store both sets, time the queries, walk every page of the big set; the figures."""
    base_url = server.url
    big_url = base_url.rsplit("/", 1)[0] + "/1"
    totals = {"baseline": args.baseline_runs, "big": args.runs}
    say(f"storing {args.baseline_runs:,} baseline runs (db 0)")
    seconds = {"baseline": populate(base_url, args.baseline_runs, 1)}
    say(f"storing {args.runs:,} runs (db 1) with {args.loaders} loader processes")
    seconds["big"] = populate(big_url, args.runs, args.loaders)
    say(f"stored in {seconds['big']:.0f} s ({args.runs / seconds['big']:.0f} runs/s)")
    sets = {
        "baseline": Client(settings=Settings(redis_url=base_url)),
        "big": Client(settings=Settings(redis_url=big_url)),
    }
    try:
        rows = measure(sets, totals, args.repeat)
        walk = walk_all(sets["big"])
        say(f"paged through {args.runs:,} runs, 1,000 a page, in {walk:.2f} s")
        mb = used_mb(sets["big"])
    finally:
        for client in sets.values():
            client.close()
    return {
        "totals": totals,
        "store_seconds": seconds,
        "rows": rows,
        "walk_seconds": walk,
        "redis_mb": mb,
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; print the table (and the JSON line with --json)."""
    args = parse_args(argv)
    started = datetime.now(UTC).isoformat(timespec="seconds")
    load_before = check_quiet()
    with terminate_as_exit(), EmbeddedRedis() as server:
        say(f"private Redis at {server.url}")
        figures = run(server, args)
        env = environment(server.url)
    env["load_average"] = {"before": load_before, "after": [round(x, 2) for x in os.getloadavg()]}
    print(table(figures["rows"], figures["totals"]))
    print(
        f"\npaging through all {figures['totals']['big']:,} runs with cursors, 1,000 a page: "
        f"{figures['walk_seconds']:.2f} s; Redis memory with both sets: {figures['redis_mb']} MB"
    )
    if args.json:
        settings = {k: v for k, v in vars(args).items() if k != "json"}
        print(json.dumps({"date": started, "settings": settings, "environment": env, **figures}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
