"""Static analysis warnings: no return node, state read but never written (and the reverse),
expressions certain to fail, values pasted unquoted into shell text, environment variables missing."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator

from graphrunner.model import (
    END,
    ActionNode,
    AnyNode,
    ForeachNode,
    GraphSpec,
    ParallelNode,
    ReturnNode,
    SubgraphNode,
)
from graphrunner.report import Issue
from graphrunner.rye.permissions import graph_name, permitted, rye_name
from graphrunner.validation.children import child_sites
from graphrunner.validation.constants import constant_failures
from graphrunner.validation.shell_text import shell_interpolations
from graphrunner.validation.sites import Site, condition_paths, expression_sites
from graphrunner.validation.structure import unreachable

FIELD_READ = re.compile(r"\bstate\s*(?:\.\s*([A-Za-z_]\w*)|\[\s*[\"']([^\"']+)[\"']\s*\])")
WHOLE_STATE = re.compile(r"\bstate\b(?!\s*[.\[])")


def analyse(spec: GraphSpec, check_env: bool = False) -> list[Issue]:
    """Every warning for `spec`. A Rye graph gets the walker's static analysis: an unreachable
    node is a warning there, and missing `env_requires` variables are always reported."""
    warnings = _no_return(spec) + _state_flow(spec) + constant_failures(spec) + shell_interpolations(spec)
    if spec.rye:
        warnings += unreachable(spec) + _unpermitted(spec)
    if check_env or spec.rye:
        warnings += _env_missing(spec)
    return warnings


def _no_return(spec: GraphSpec) -> list[Issue]:
    if any(isinstance(n, ReturnNode) for n in spec.nodes.values()):
        return []
    message = "the graph has no 'return' node; runs end where a node has no next"
    return [Issue("no_return_node", message, location="nodes")]


def _read_sites(spec: GraphSpec) -> Iterator[Site]:
    """Every text that may read state: expressions, condition paths, a child's inputs by name."""
    yield from expression_sites(spec)
    yield from condition_paths(spec)
    if spec.rye:  # a Rye child's inputs are values, not parent field names
        return
    for site in child_sites(spec):
        for key, value in (site.inputs or {}).items():
            if isinstance(value, str) and "${" not in value:
                yield Site(site.node, f"{site.where}.inputs.{key}", f"state.{value}")


def _writes(spec: GraphSpec) -> dict[str, Site]:
    """Every field a node writes, with the first place that writes it (`text`: the field)."""
    written: dict[str, Site] = {}
    for name, node in spec.nodes.items():
        for where, fields in _node_writes(spec, name, node):
            for fld in fields:
                written.setdefault(fld, Site(name, where, fld))
    return written


def _node_writes(spec: GraphSpec, name: str, node: AnyNode) -> Iterator[tuple[str, Iterable[str]]]:
    """(location, fields written there) for one node; a child without outputs writes any field."""
    base = f"nodes.{name}"
    yield from ((f"{base}.assign.{k}", [k]) for k in node.assign)
    for label in ("result_key", "collect", "errors_field"):
        target = getattr(node, label, None)
        if target:
            yield f"{base}.{label}", [target]
    if isinstance(node, SubgraphNode):
        outputs = node.outputs or {}
        yield from ((f"{base}.outputs.{k}", [k]) for k in outputs)
        if not outputs:
            yield base, spec.state
    if isinstance(node, ParallelNode):
        for branch, b in node.branches.items():
            where = f"{base}.branches.{branch}"
            if b.outputs is None:
                yield where, spec.state
            yield from ((f"{where}.outputs.{k}", [k]) for k in b.outputs or {})
    if getattr(node, "assign_result", False):  # the result's keys: any field may be written
        yield f"{base}.assign_result", spec.state


def _outputs_whole_state(spec: GraphSpec) -> bool:
    for node in spec.nodes.values():
        if isinstance(node, ReturnNode) and node.output is None:
            return True
        if isinstance(node, ReturnNode):
            continue
        if node.next is None or node.next.fn is not None or END in node.next.targets:
            return True
    return False


def _subject(site: Site) -> str:
    """`node 'a': action.params.v`, or the location of a hook's expression."""
    if site.node is None:
        return site.location
    return f"node '{site.node}': {site.location.removeprefix(f'nodes.{site.node}').removeprefix('.')}"


def _state_flow(spec: GraphSpec) -> list[Issue]:
    """`state_never_assigned` where a field is first read, `state_never_read` where it is
    declared (or, undeclared, first written)."""
    reads: dict[str, Site] = {}
    whole = _outputs_whole_state(spec)
    for site in _read_sites(spec):
        for a, b in FIELD_READ.findall(site.text):
            reads.setdefault(a or b, site)
        whole = whole or bool(WHOLE_STATE.search(FIELD_READ.sub("", site.text)))
    written = _writes(spec)
    issues = [
        Issue(
            "state_never_assigned",
            f"{_subject(site)}: state.{f} is read but no node writes it and it is not declared",
            node=site.node,
            location=site.location,
        )
        for f, site in sorted(reads.items())
        if f not in written and f not in spec.state and f not in _seeded(spec)
    ]
    if not whole:
        issues += [
            _never_read(spec, f, written.get(f))
            for f in sorted((set(written) | set(spec.state)) - set(reads))
        ]
    return issues


def _never_read(spec: GraphSpec, fld: str, write: Site | None) -> Issue:
    """`state_never_read` at the field's declaration, else where a node first writes it."""
    if fld in spec.state or write is None:
        verb = "written" if write is not None else "declared"
        return Issue("state_never_read", f"state.{fld} is {verb} but never read", location=f"state.{fld}")
    return Issue(
        "state_never_read",
        f"{_subject(write)}: state.{fld} is written but never read",
        node=write.node,
        location=write.location,
    )


def _unpermitted(spec: GraphSpec) -> list[Issue]:
    """`rye_permission_missing` for each dispatch a Rye file's own `permissions` will refuse."""
    if spec.permissions is None:
        return []
    sites: list[tuple[str, str, str, str | None]] = [
        (name, f"nodes.{name}.action.tool", rye_name(n.action.tool), n.action.tool)
        for name, n in spec.nodes.items()
        if isinstance(n, ActionNode | ForeachNode) and n.action is not None
    ]
    sites += [(c.node, f"{c.where}.graph", graph_name(c.graph), None) for c in child_sites(spec)]
    return [
        Issue(
            "rye_permission_missing",
            f"node '{node}' needs {needed!r}, which the file's permissions do not grant: the step will "
            "fail with permission_denied",
            node=node,
            location=where,
        )
        for node, where, needed, tool in sites
        if not permitted(spec.permissions, needed, tool)
    ]


def _seeded(spec: GraphSpec) -> set[str]:
    """Fields the runtime writes itself: `_last_error`, and a Rye run's `inputs`."""
    return {"_last_error", "inputs"} if spec.rye else {"_last_error"}


def _env_missing(spec: GraphSpec) -> list[Issue]:
    wanted: list[tuple[str, str, str | None]] = [
        (v, f"config.env_requires.{i}", None) for i, v in enumerate(spec.config.env_requires)
    ]
    for name, node in spec.nodes.items():
        needs = getattr(node, "env_requires", ())
        wanted += [(v, f"nodes.{name}.env_requires.{i}", name) for i, v in enumerate(needs)]
    return [
        Issue(
            "env_missing",
            f"environment variable {var} is not set ({where.rsplit('.', 1)[0]})",
            node=node,
            location=where,
        )
        for var, where, node in wanted
        if var not in os.environ
    ]


__all__ = ["analyse"]
