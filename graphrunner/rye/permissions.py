"""Rye capabilities: `rye.<primary>.<item_type>.<dotted.item.id>` fnmatch patterns, fail-closed.

A dispatch of the Rye tool `rye/bash/bash` needs `rye.execute.tool.rye.bash.bash`; a directive
`rye.execute.directive.<id>`; a graph run as a tool (`tool:graphs/<id>`) `rye.execute.tool.graphs.<id>`.
The walker's internal thread tools (`rye/agent/threads/internal/*`) are always allowed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from fnmatch import fnmatchcase
from typing import Any

from graphrunner.model.actions import DIRECTIVE

PRIMARIES = ("execute", "fetch", "load", "search", "sign")
ITEM_TYPES = ("tool", "directive", "knowledge")
ALWAYS_ALLOWED = "rye/agent/threads/internal/*"
SEGMENT = re.compile(r"^[A-Za-z0-9_*?\[\]!-]+$")  # one dotted part, fnmatch wildcards allowed
WILD = re.compile(r"[*?\[]")


def capability_problem(entry: Any) -> str | None:
    """Why `entry` is not a Rye capability string, or None when it is one."""
    if not isinstance(entry, str) or not entry.startswith("rye."):
        return f"{entry!r:.80} is not a Rye capability: write rye.<primary>.<item_type>.<dotted.item.id>"
    parts = entry.split(".")
    bad = next((p for p in parts[1:] if not SEGMENT.match(p)), None)
    if bad is not None:
        return f"{entry!r:.80} has an empty or malformed part {bad!r} (dotted names, wildcards allowed)"
    for index, (what, known) in enumerate((("primary", PRIMARIES), ("item_type", ITEM_TYPES)), start=1):
        if len(parts) > index and not WILD.search(parts[index]) and parts[index] not in known:
            return f"{entry!r:.80}: unknown {what} {parts[index]!r}; Rye's are {', '.join(known)}"
    if len(parts) < 4 and not WILD.search(parts[-1]):
        return f"{entry!r:.80} names no item: write rye.<primary>.<item_type>.<dotted.id>, or end it with *"
    return None


def rye_name(tool: str) -> str:
    """The capability a dispatch of the tool (or directive) `tool` needs."""
    if tool.startswith(DIRECTIVE):
        return "rye.execute.directive." + tool[len(DIRECTIVE) :].replace("/", ".")
    return "rye.execute.tool." + tool.replace("/", ".")


def graph_name(graph_id: str) -> str:
    """The capability running the graph `graph_id` as a tool (`tool:graphs/<id>`) needs."""
    return rye_name(f"graphs/{graph_id}")


def permitted(permissions: Sequence[str], name: str, tool: str | None = None) -> bool:
    """True when a permission pattern matches the capability `name` (internal tools always are)."""
    if tool is not None and fnmatchcase(tool, ALWAYS_ALLOWED):
        return True
    return any(fnmatchcase(name, pattern) for pattern in permissions)
