"""What identifies a run: its id, its concurrency key, and the fingerprint of a submit."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from graphrunner.compiled import CompiledGraph
from graphrunner.errors import InvalidRunId

RUN_ID_TEXT = r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}"  # `\Z`, never `$`: "abc\n" is not a run id
RUN_ID = re.compile(rf"^{RUN_ID_TEXT}\Z")
CONCURRENCY_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,199}\Z")


def check_run_id(run_id: Any) -> str:
    """`run_id` if it is well formed; raises `InvalidRunId` naming the rule otherwise."""
    if not isinstance(run_id, str) or not RUN_ID.match(run_id):
        raise InvalidRunId(
            f"invalid run id {run_id!r:.140}: use 1-128 letters, digits, '_', '.', ':' or '-', "
            "starting with a letter or digit"
        )
    return run_id


def check_concurrency_key(key: Any) -> str | None:
    """`key` (or None) if it is well formed; raises `InvalidRunId` naming the rule otherwise."""
    if key is None:
        return None
    if not isinstance(key, str) or not CONCURRENCY_KEY.match(key):
        raise InvalidRunId(
            f"invalid concurrency key {key!r:.220}: use 1-200 letters, digits, '_', '.', ':', '/' or '-', "
            "starting with a letter or digit"
        )
    return key


def fingerprint(
    graph: CompiledGraph,
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
