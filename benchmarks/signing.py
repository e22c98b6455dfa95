"""What signing foreach item messages costs: sign (the worker that fans out) and verify (the
worker that runs the item) for N items, in CPU time per item, in this one process.

    .venv/bin/python -m benchmarks.signing --items 10000 --rounds 5

A bare chord item costs about 1.25 ms of wall time here (PITFALLS.md, 1,000 items in 1.25 s),
so the figure to read is the per-item sum against that.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from graphrunner.cluster.runs.items import call_payload
from graphrunner.cluster.transport.messages import ItemMessage
from graphrunner.cluster.transport.signing import Signer
from graphrunner.engine import ActionCall


def payloads(count: int) -> list[dict[str, Any]]:
    """Item payloads as `fanout.chunk` builds them: an echo call per item."""
    return [
        {
            "run_id": "bench-signing",
            "graph_id": "bench/foreach",
            "graph_hash": "0" * 64,
            "step": 1,
            "tag": "1.1.abcdef01",
            "index": i,
            "call": call_payload(ActionCall("fan", "echo", {"text": f"item {i}"}, item_index=i)),
        }
        for i in range(count)
    ]


def one_round(signer: Signer, items: list[dict[str, Any]]) -> tuple[float, float]:
    """Seconds of CPU to sign every item, and to verify every parsed item."""
    start = time.process_time()
    signed = [signer.sign(p) for p in items]
    middle = time.process_time()
    parsed = [ItemMessage.model_validate(s) for s in signed]  # the task parses it anyway
    before_verify = time.process_time()
    assert all(signer.verify(m) for m in parsed)
    end = time.process_time()
    return middle - start, end - before_verify


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    signer, items = Signer(b"k" * 64), payloads(args.items)
    rounds = [one_round(signer, items) for _ in range(args.rounds)]
    sign = statistics.median(r[0] for r in rounds) / args.items * 1e6
    verify = statistics.median(r[1] for r in rounds) / args.items * 1e6
    print(f"{args.items} items, median of {args.rounds} rounds (CPU time per item):")
    print(f"  sign {sign:.1f} us, verify {verify:.1f} us, both {sign + verify:.1f} us")


if __name__ == "__main__":
    main()
