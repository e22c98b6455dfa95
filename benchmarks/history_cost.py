"""What a run's history costs in Redis: bytes kept per step for the example graphs (issue 28).

    python -m benchmarks.history_cost

Against a private Redis and a worker in a thread of this process, each example graph of
`graphs/` runs once (and a loop whose state holds a 5,000-character value that every step
changes, the case history costs most for). For each run it prints its steps, what its history
keeps besides the transcript (where the run starts and its initial state; the side records of
values too large for their step records: the JSON bytes of the run hash's fields `initial`,
`initial_at` and `h:*`), that per step, and the transcript's JSON per step for scale (the
transcript is kept anyway: its records carry the changed values history folds).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from graphrunner import load_graph, parse_graph
from graphrunner.client import Client
from graphrunner.cluster.worker.in_thread import local_worker
from graphrunner.cluster.worker.runtime import WorkerRuntime
from graphrunner.embedded import EmbeddedRedis
from graphrunner.settings import Settings

GRAPHS = Path(__file__).resolve().parent.parent / "graphs"
BIG_LOOP = """
id: bench/big-loop
state:
  n: {type: integer, default: 0}
  big: {type: string, default: "%s"}
config: {start: add}
nodes:
  add:
    action: {tool: echo, params: {n: "${state.n}"}}
    assign: {n: "${result.n + 1}", big: "${state.big + string(state.n)}"}
    next: [{to: done, when: "state.n >= 20"}, {to: add}]
  done: {type: return}
""" % ("z" * 5000)
RUNS: list[tuple[str, str | None, dict[str, Any]]] = [
    ("hello", "hello.yaml", {}),
    ("branching (publish)", "branching.yaml", {"score": 80}),
    ("branching (review)", "branching.yaml", {"score": 20}),
    ("foreach (3 words)", "foreach.yaml", {}),
    ("loop, a 5 KB value changed each step", None, {}),
]


def measure(client: Client, name: str, file: str | None, inputs: dict[str, Any]) -> list[str]:
    """One row: the run's steps, history bytes (in all, per step) and transcript bytes per step."""
    graph = load_graph(GRAPHS / file) if file else parse_graph(BIG_LOOP, file="big-loop.yaml")
    run = client.submit(graph, inputs, capabilities=["*"])
    run.wait(timeout=120)
    store = client.store
    fields = store.redis.hgetall(store.keys.run(run.id))  # type: ignore[attr-defined]
    records = run.steps()
    steps = sum(1 for r in records if r["status"] in ("ok", "error", "end", "paused"))
    start = len(fields.get("initial", "")) + len(fields.get("initial_at", ""))
    asides = sum(len(v) for k, v in fields.items() if k.startswith("h:"))
    transcript = sum(len(json.dumps(r)) for r in records)
    per_step = (start + asides) / steps
    return [name, str(steps), str(start), str(asides), f"{per_step:.0f}", f"{transcript / steps:.0f}"]


def main() -> None:
    """Run the graphs and print the table (Markdown)."""
    with EmbeddedRedis() as redis_server:
        settings = Settings.from_env().with_redis(redis_server.url)
        runtime = WorkerRuntime(settings)
        try:
            with Client(redis_server.url) as client, local_worker(runtime, concurrency=2):
                rows = [measure(client, *run) for run in RUNS]
        finally:
            runtime.close()
    head = ["graph", "steps", "start B", "side records B", "history B/step", "transcript B/step"]
    print("| " + " | ".join(head) + " |")
    print("|" + "|".join("---" for _ in head) + "|")
    for row in rows:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
