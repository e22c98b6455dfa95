"""The words drawn on a diagram: node details and edge conditions, clipped to a readable length."""

from __future__ import annotations

import json
import re
from typing import Any

from graphrunner.model import (
    ActionNode,
    AnyNode,
    Condition,
    ForeachNode,
    ParallelNode,
    StructuredCondition,
    SubgraphNode,
)

MAX_LABEL = 48  # characters on one line of a node or edge label
MAX_TITLE = 400  # characters of a tooltip
TIMES = "\u00d7"  # the multiplication sign of visit counts (3 times)
OPS = {
    "eq": "==",
    "ne": "!=",
    "gt": ">",
    "gte": ">=",
    "lt": "<",
    "lte": "<=",
    "in": "in",
    "not_in": "not in",
    "contains": "contains",
    "matches": "matches",
}
_SPACE = re.compile(r"\s+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


def clip(text: str, limit: int = MAX_LABEL) -> str:
    """`text` on one line, without control characters, cut to `limit` characters with an ellipsis."""
    flat = _SPACE.sub(" ", _CONTROL.sub(" ", text)).strip()
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def node_detail(node: AnyNode) -> str:
    """The second line of a node's label: its type and what it runs."""
    if isinstance(node, ForeachNode):
        mode = "foreach ∥" if node.parallel else "foreach"
        what = f"graph {node.graph}" if node.graph is not None else _tool(node)
        return clip(f"{mode} {node.as_} · {what}")
    if isinstance(node, ActionNode):
        return clip(f"tool: {node.action.tool}")
    if isinstance(node, SubgraphNode):
        return clip(f"subgraph · {node.graph}")
    if isinstance(node, ParallelNode):
        return clip(f"parallel · {', '.join(node.branches)}")
    return node.type


def _tool(node: ForeachNode) -> str:
    return f"tool: {node.action.tool}" if node.action is not None else "?"


def condition_text(cond: Condition, depth: int = 0) -> str:
    """A condition as one line of text: CEL as written, the structured form as an expression."""
    if isinstance(cond, str):
        text = cond.strip()
        if text.startswith("${") and text.endswith("}"):
            text = text[2:-1].strip()
        return text
    if depth > 3:
        return "…"
    return _structured(cond, depth)


def _structured(cond: StructuredCondition, depth: int) -> str:
    if cond.all is not None:
        return " && ".join(_part(c, depth) for c in cond.all)
    if cond.any is not None:
        return " || ".join(_part(c, depth) for c in cond.any)
    if cond.not_ is not None:
        return f"!({condition_text(cond.not_, depth + 1)})"
    if cond.op in ("exists", "truthy"):
        return f"{cond.path} {cond.op}"
    return f"{cond.path} {OPS.get(cond.op or '', cond.op)} {_value(cond.value)}"


def _part(cond: Condition, depth: int) -> str:
    text = condition_text(cond, depth + 1)
    return f"({text})" if " " in text else text


def _value(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except ValueError:  # a circular value cannot come from YAML, but a builder may write anything
        return repr(value)
