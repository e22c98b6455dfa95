"""Is a document a Rye graph file? And the signature lines Rye puts before the YAML."""

from __future__ import annotations

import re
from typing import Any

# `# rye:signed:...` is a YAML comment already; `<!-- rye:... -->` is not YAML at all
SIGNATURE = re.compile(r"^\s*<!--\s*rye:.*-->\s*$")


def is_rye(data: Any) -> bool:
    """A Rye graph tool: `tool_type: graph`, or its graph under `config:` with no top-level `nodes`."""
    if not isinstance(data, dict):
        return False
    if data.get("tool_type") == "graph":
        return True
    config = data.get("config")
    return "nodes" not in data and isinstance(config, dict) and "nodes" in config


def blank_signatures(text: str) -> str:
    """`text` with `<!-- rye:... -->` lines blanked (not removed, so line numbers hold)."""
    if "<!--" not in text:
        return text
    return "".join("\n" if SIGNATURE.match(line) else line for line in text.splitlines(keepends=True))
