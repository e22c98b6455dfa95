"""The walker's structured conditions in graphrunner's words, wherever a Rye file routes.

The walker's condition evaluator defaults `op` to `eq` and calls a regular expression match
`regex`; graphrunner requires `op` and calls it `matches`. Comparing text that reads as a
number is done at run time (`graphrunner.expressions.conditions.RYE_OPS`).
"""

from __future__ import annotations

from typing import Any

WALKER_OPS = {"regex": "matches"}  # the walker's op names that graphrunner spells otherwise


def walker_condition(cond: Any) -> Any:
    """The walker's structured condition in graphrunner's words: `op` defaults to `eq`, and
    `regex` is `matches`; `all`/`any`/`not` are walked."""
    if not isinstance(cond, dict):
        return cond
    out = dict(cond)
    if "path" in out:
        op = out.get("op", "eq")
        out["op"] = WALKER_OPS.get(op, op) if isinstance(op, str) else op
    for key in ("all", "any"):
        if isinstance(out.get(key), list):
            out[key] = [walker_condition(c) for c in out[key]]
    if "not" in out:
        out["not"] = walker_condition(out["not"])
    return out


def walker_next(value: Any) -> Any:
    """`next` with each branch's condition in graphrunner's words (every form of `next`)."""
    if isinstance(value, list):
        return [_branch(b) for b in value]
    if isinstance(value, dict) and isinstance(value.get("branches"), list):
        return {**value, "branches": [_branch(b) for b in value["branches"]]}
    return value


def _branch(branch: Any) -> Any:
    if isinstance(branch, dict) and "when" in branch:
        return {**branch, "when": walker_condition(branch["when"])}
    return branch
