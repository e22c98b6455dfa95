"""Capabilities (DESIGN §2.8): fnmatch patterns over `tool:NAME`, checked fail-closed."""

from __future__ import annotations

from collections.abc import Sequence
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any

from graphrunner.engine.outcomes import ActionFailure
from graphrunner.errors import InvalidCapabilities

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
    return tuple(capabilities)


def required(call: ActionCall | None, graph_id: str | None = None) -> list[str]:
    """The capability names that would each allow a dispatch (python: the tool or that fn)."""
    if graph_id is not None:
        return [f"graph:{graph_id}"]
    assert call is not None
    names = [f"tool:{call.tool}"]
    fn = call.params.get("fn")
    if call.tool == "python" and isinstance(fn, str):
        names.append(f"tool:python:{fn.replace(':', '.')}")
    return names


def allows(capabilities: Sequence[str], name: str) -> bool:
    """True when some capability pattern matches `name`."""
    return any(fnmatchcase(name, pattern) for pattern in capabilities)


def denied(
    capabilities: Sequence[str], call: ActionCall | None, graph_id: str | None = None
) -> ActionFailure | None:
    """A `permission_denied` failure naming what is missing, or None when allowed."""
    names = required(call, graph_id)
    if any(allows(capabilities, n) for n in names):
        return None
    what = f"subgraph '{graph_id}'" if graph_id else f"tool '{call.tool if call else '?'}'"
    return ActionFailure(
        "permission_denied",
        f"{what} needs capability {' or '.join(repr(n) for n in names)}; the run has "
        f"{list(capabilities) or 'none'}",
        "PermissionDenied",
    )
