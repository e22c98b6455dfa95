"""What a child run may do: its parent's capabilities and nesting depth, or less.

A subgraph node may ask for less (`capabilities`, `depth`: a Rye graph-tool call's execution
parameters). Narrowing is checked, never trusted: each pattern asked for must be one the parent
holds, a name one of the parent's patterns matches, or a pattern under a parent's `prefix*`; a
child asking for more is `permission_denied`. `depth` is how many levels of children the child
may start below itself; the bound is kept on the child's snapshot, and inherited by its own
children, so no descendant nests past it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase

from graphrunner.compiled import CompiledGraph
from graphrunner.engine.capabilities import checked
from graphrunner.engine.failures import RunFailure
from graphrunner.engine.snapshot import RunSnapshot
from graphrunner.engine.start import too_deep
from graphrunner.errors import InvalidCapabilities

WILDCARDS = "*?["


@dataclass(frozen=True)
class ChildGrants:
    """The capabilities and the deepest depth (None: the graphs' own limits) of a child run."""

    capabilities: tuple[str, ...]
    max_depth: int | None


def child_grants(graph: CompiledGraph, snap: RunSnapshot) -> ChildGrants | RunFailure:
    """What the children of the node `snap` is at may do; a `limit_exceeded` failure when they
    would nest too deep, a `permission_denied` one when the node asks for more than the run holds."""
    deep = too_deep(graph, snap)
    if deep is not None:
        return deep
    if snap.max_depth is not None and snap.depth + 1 > snap.max_depth:
        return RunFailure(
            type="limit_exceeded",
            message=f"subgraph nesting deeper than its caller's depth allows (child runs down to depth "
            f"{snap.max_depth}; this run is at depth {snap.depth})",
        )
    node = graph.spec.nodes.get(snap.node or "")
    asked = getattr(node, "capabilities", None)
    depth = getattr(node, "depth", None)
    capabilities = snap.capabilities
    if asked is not None:
        try:
            capabilities = checked(asked)
        except InvalidCapabilities as exc:
            return RunFailure(type="permission_denied", message=f"node '{snap.node}': {exc}")
        wider = [p for p in capabilities if not covered(p, snap.capabilities)]
        if wider:
            return RunFailure(
                type="permission_denied",
                message=f"node '{snap.node}' asks its child run for capabilities {wider}, which this run "
                f"does not hold (it has {list(snap.capabilities) or 'none'}): a child may only narrow them",
            )
    bound = snap.max_depth
    if depth is not None:
        own = snap.depth + 1 + depth
        bound = own if bound is None else min(bound, own)
    return ChildGrants(capabilities, bound)


def covered(pattern: str, held: Sequence[str]) -> bool:
    """True when every name `pattern` matches is matched by one of the `held` patterns (decided
    conservatively: the same pattern, a name one of them matches, or under a `prefix*` of them)."""
    if pattern in held:
        return True
    cut = min((pattern.index(c) for c in WILDCARDS if c in pattern), default=None)
    if cut is None:
        return any(fnmatchcase(pattern, q) for q in held)
    prefix = pattern[:cut]
    return any((head := _prefix_of(q)) is not None and prefix.startswith(head) for q in held)


def narrows(child: Sequence[str], parent: Sequence[str]) -> bool:
    """True when the child's capabilities are all covered by its parent's."""
    return all(covered(p, parent) for p in child)


def _prefix_of(pattern: str) -> str | None:
    """`abc` for `abc*` (no other wildcard), else None."""
    if not pattern.endswith("*"):
        return None
    head = pattern[:-1]
    return None if any(c in head for c in WILDCARDS) else head
