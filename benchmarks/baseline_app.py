"""Worker entry for the baseline: `python -m celery -A benchmarks.baseline_app worker ...`.

Serves `bench.step` (benchmarks.steps) and the chord part and body (benchmarks.foreach).

Reads BENCH_REDIS_URL (required), BENCH_PREFETCH (default 1) and BENCH_EVENTS (`1` sends task events).
"""

from __future__ import annotations

import os

from benchmarks import baseline_chord
from benchmarks.baseline import create_app

if not os.environ.get("BENCH_REDIS_URL"):
    raise RuntimeError("BENCH_REDIS_URL is not set: the harness sets it to its own embedded Redis")

app = create_app(
    os.environ["BENCH_REDIS_URL"],
    prefetch=int(os.environ.get("BENCH_PREFETCH") or 1),
    events=os.environ.get("BENCH_EVENTS") == "1",
)
baseline_chord.register(app, os.environ["BENCH_REDIS_URL"])
