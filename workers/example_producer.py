"""An example producer: submit runs to the cluster, wait for them, report.

    python workers/example_producer.py --runs 20 [--graph examples/hello]

It reads GRAPHRUNNER_REDIS_URL (and GRAPHRUNNER_GRAPH_PATH for graph ids) like every
graphrunner client; `docker compose run --rm producer` runs it inside the compose network.
Exit 0 when every run completed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import sys
import time

from graphrunner import Client


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="how many runs to submit")
    parser.add_argument("--graph", default="examples/hello", help="graph id or YAML path")
    parser.add_argument("--timeout", type=float, default=120, help="seconds to wait for each run")
    args = parser.parse_args(argv)
    started = time.monotonic()
    with Client.from_env() as client:
        handles = [client.submit(args.graph, {"name": f"run {n}"}) for n in range(args.runs)]
        results = [handle.wait(timeout=args.timeout) for handle in handles]
    completed = sum(r.status == "completed" for r in results)
    elapsed = time.monotonic() - started
    print(f"{completed} of {len(results)} runs of {args.graph} completed in {elapsed:.1f}s")
    for r in results:
        if r.status != "completed":
            print(f"  run {r.run_id}: {r.status}: {r.error}", file=sys.stderr)
    return 0 if completed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
