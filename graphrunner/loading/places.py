"""Where the file wrote a location of the graph model, for the line of an issue.

The model normalises `next` into a tuple of branches (`nodes.a.next.0.when`); the file may
write them under `branches:` of a conditional mapping, as its `default:`, or as one mapping
with `to:`. Other locations are written as the model names them.
"""

from __future__ import annotations

from typing import Any

Path = tuple[str | int, ...]


def written_path(data: Any, path: Path) -> Path:
    """`path` of the graph model as the document `data` writes it."""
    out: list[str | int] = []
    value = data
    index = 0
    while index < len(path):
        part = path[index]
        out.append(part)
        value = _member(value, part)
        branch = path[index + 1] if index + 1 < len(path) else None
        if _is_next(out) and isinstance(value, dict) and isinstance(branch, int):
            index += 2
            branches = value.get("branches")
            if not isinstance(branches, list):  # `{to: b}`, `{type: unconditional, to: b}`: the branch
                continue
            if branch < len(branches):
                out += ["branches", branch]
                value = branches[branch]
                continue
            return (*out, "default")  # the branch a conditional's `default:` adds after the others
        index += 1
    return tuple(out)


def _is_next(path: list[str | int]) -> bool:
    """True for `nodes.NAME.next` (under `config.` in a Rye file)."""
    return len(path) >= 3 and path[-1] == "next" and path[-3] == "nodes"


def _member(value: Any, part: str | int) -> Any:
    if isinstance(value, dict):
        return value.get(part)
    if isinstance(value, list) and isinstance(part, int) and 0 <= part < len(value):
        return value[part]
    return None
