"""What makes two runs the same run: the fingerprint stored with a run record."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from graphrunner.graph import Graph


def fingerprint(
    graph: Graph,
    inputs: Mapping[str, Any],
    capabilities: Sequence[str],
    concurrency_key: str | None = None,
    *,
    state: Mapping[str, Any] | None = None,
) -> str:
    """What makes two submits with one run id the same run: graph version, inputs, capabilities
    (and the concurrency key and the initial state, when given)."""
    parts: list[Any] = [graph.content_hash, inputs, list(capabilities)]
    if concurrency_key is not None:
        parts.append(concurrency_key)
    if state is not None:
        parts.append({"state": dict(state)})
    body = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(body.encode()).hexdigest()
