"""What a login's runs may do: the capabilities a submitted run carries, checked before it exists.

A run submitted through the explorer carries its login's capabilities (`Login.granted`), never
the deployment's GRAPHRUNNER_DEFAULT_CAPABILITIES, which is for producers using the Python
client. A body's `capabilities` may only narrow them: each entry is one of the login's patterns
as written, or a name without glob characters that one of them allows. Then every dispatch the
graph can make (its children's and hooks' included) is checked against them
(`graphrunner.validation.grants`): a run that would meet `permission_denied` is not created. The
worker's own check at each dispatch stays the enforcement.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from graphrunner.engine.capabilities import allows, checked
from graphrunner.errors import GraphNotFound, GraphrunnerError
from graphrunner.validation.grants import MissingGrant, missing_grants

if TYPE_CHECKING:
    from graphrunner.client import Client
    from graphrunner.compiled import CompiledGraph
    from graphrunner.model import GraphSpec

GLOB = frozenset("*?[")


class SubmitRefused(GraphrunnerError):
    """The login may not do this: answered 403 `permission_denied` with what is missing."""

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.details = {"code": "permission_denied", **details}


def run_capabilities(granted: Sequence[str], requested: Any, user: str | None) -> tuple[str, ...]:
    """The capabilities of a run: `granted`, or `requested` (a body's list) when it only narrows
    them; raises `InvalidCapabilities` for a malformed list and `SubmitRefused` for a wider one."""
    if requested is None:
        return tuple(granted)
    wider = beyond(granted, checked(requested))
    if wider is not None:
        raise SubmitRefused(
            f"capability {wider!r} is not granted to {_who(user)}: a run may carry only the login's "
            f"capabilities {list(granted)} or names they allow (no glob patterns beyond them)",
            capability=wider,
            granted=list(granted),
        )
    return tuple(requested)


def check_resume(
    granted: Sequence[str], run_id: str, carried: Sequence[str], user: str | None, doing: str = "resume"
) -> None:
    """Raise `SubmitRefused` unless the login could have submitted a run carrying `carried`: resuming
    or forking (with a state patch) steers what a run does with its capabilities, so it needs them
    all; `doing` names the action in the message."""
    check_carried(granted, f"run {run_id} carries", carried, user, doing)


def check_carried(
    granted: Sequence[str], subject: str, carried: Sequence[str], user: str | None, doing: str
) -> None:
    """Raise `SubmitRefused` unless the login is granted every capability of `carried`, which
    `subject` ("run X carries") names, to do `doing` with it."""
    wider = beyond(granted, carried)
    if wider is not None:
        raise SubmitRefused(
            f"{subject} capability {wider!r}, which {_who(user)} is not granted: only a login "
            f"granted all of {list(carried)} may {doing} it",
            capability=wider,
            granted=list(granted),
        )


def beyond(granted: Sequence[str], entries: Sequence[str]) -> str | None:
    """The first of `entries` that is neither one of the `granted` patterns as written nor a name
    without glob characters that one of them allows; None when they all only narrow `granted`."""
    for entry in entries:
        if entry not in granted and (GLOB & set(entry) or not allows(granted, entry)):
            return entry
    return None


def check_grants(client: Client, graph: CompiledGraph, capabilities: Sequence[str], user: str | None) -> None:
    """Raise `SubmitRefused` naming the first dispatch of `graph` (or of a child graph it can start,
    or a hook) that `capabilities` do not allow, with every such dispatch listed."""
    missing = missing_grants(graph.spec, capabilities, _children(client, graph))
    if not missing:
        return
    first = missing[0]
    raise SubmitRefused(
        f"permission denied for {_who(user)}: {first.message()}; the run would carry "
        f"{list(capabilities) or 'no capabilities'} (the login's, or those the body narrowed them "
        "to), so no run was created",
        graph=first.graph,
        node=first.node,
        tool=first.tool,
        capability=first.capability,
        missing=[_view(m) for m in missing],
    )


def _children(client: Client, root: CompiledGraph) -> Any:
    """Finds a child graph's spec as a run would: loaded with its parent, else as stored with it."""
    graphs: dict[str, CompiledGraph] = {root.id: root}

    def child(parent: GraphSpec, graph_id: str) -> GraphSpec:
        compiled = graphs[parent.id]
        try:
            found = compiled.subgraph(graph_id)
        except GraphNotFound:
            found = client.cluster.graphs.child(compiled, graph_id)
        graphs.setdefault(found.id, found)
        return found.spec

    return child


def _view(missing: MissingGrant) -> dict[str, Any]:
    return {
        "graph": missing.graph,
        "node": missing.node,
        "tool": missing.tool,
        "child_graph": missing.child,
        "capability": missing.capability,
        "needs_one_of": list(missing.needs),
    }


def _who(user: str | None) -> str:
    return f"login {user!r}" if user is not None else "the explorer without auth (--no-auth)"
