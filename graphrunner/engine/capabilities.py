"""Capabilities (DESIGN §2.8): fnmatch patterns over `tool:NAME`, checked fail-closed.

A dispatch is also named in Rye's format (`rye.execute.tool.<dotted.id>`), so a run's
capabilities may be written either way; a Rye graph's own `permissions` are checked as well,
and can only narrow what the run may do (`graphrunner.rye.permissions`).
"""

from __future__ import annotations

from collections.abc import Sequence
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any

from graphrunner.engine.outcomes import ActionFailure
from graphrunner.errors import InvalidCapabilities
from graphrunner.rye.permissions import capability_problem, graph_name, permitted, rye_name

if TYPE_CHECKING:
    from graphrunner.engine.calls import ActionCall


def checked(capabilities: Any) -> tuple[str, ...]:
    """`capabilities` as a tuple when it is a list or tuple of non-empty strings; raises
    `InvalidCapabilities` naming the first bad entry otherwise."""
    if not isinstance(capabilities, list | tuple):
        hint = f" (write [{capabilities!r}])" if isinstance(capabilities, str) else ""
        raise InvalidCapabilities(
            f"capabilities must be a list of patterns such as ['tool:echo'], "
            f"got {type(capabilities).__name__} {capabilities!r:.80}{hint}"
        )
    for index, entry in enumerate(capabilities):
        if not isinstance(entry, str) or not entry.strip() or entry != entry.strip():
            raise InvalidCapabilities(
                f"capability {index} must be a non-empty pattern such as 'tool:echo' (a string, "
                f"no surrounding spaces), got {type(entry).__name__} {entry!r:.80}"
            )
        problem = capability_problem(entry) if entry.startswith("rye.") else None
        if problem is not None:
            raise InvalidCapabilities(f"capability {index}: {problem}")
    return tuple(capabilities)


def required(call: ActionCall | None, graph_id: str | None = None) -> list[str]:
    """The capability names that would each allow a dispatch (python: the tool or that fn)."""
    if graph_id is not None:
        return [f"graph:{graph_id}", graph_name(graph_id)]
    assert call is not None
    names = [f"tool:{call.tool}"]
    fn = call.params.get("fn")
    if call.tool == "python" and isinstance(fn, str):
        names.append(f"tool:python:{fn.replace(':', '.')}")
    return [*names, rye_name(call.tool)]


def allows(capabilities: Sequence[str], name: str) -> bool:
    """True when some capability pattern matches `name`."""
    return any(fnmatchcase(name, pattern) for pattern in capabilities)


def denied(
    capabilities: Sequence[str],
    call: ActionCall | None,
    graph_id: str | None = None,
    permissions: Sequence[str] | None = None,
) -> ActionFailure | None:
    """A `permission_denied` failure naming what is missing, or None when allowed.

    With `permissions` (a Rye graph's), the dispatch must also match one of them.
    """
    names = required(call, graph_id)
    what = f"subgraph '{graph_id}'" if graph_id else f"tool '{call.tool if call else '?'}'"
    if not any(allows(capabilities, n) for n in names):
        return _failure(
            f"{what} needs capability {' or '.join(repr(n) for n in names)}; the run has "
            f"{list(capabilities) or 'none'}"
        )
    if permissions is None or permitted(permissions, names[-1], call.tool if call else None):
        return None
    return _failure(
        f"{what} needs permission {names[-1]!r}, which the graph's permissions do not grant "
        f"(fail-closed); the graph has {list(permissions) or 'none'}"
    )


def _failure(message: str) -> ActionFailure:
    return ActionFailure("permission_denied", message, "PermissionDenied")
