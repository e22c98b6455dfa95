"""Static analysis warnings: no return node, state read but never written (and the reverse),
expressions certain to fail, environment variables missing."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from typing import Any

from graphrunner.errors import ExpressionError
from graphrunner.expressions.scanner import split_template
from graphrunner.model import END, ActionNode, ForeachNode, GraphSpec, ParallelNode, ReturnNode, SubgraphNode
from graphrunner.model.conditions import StructuredCondition
from graphrunner.report import Issue
from graphrunner.rye.permissions import graph_name, permitted, rye_name
from graphrunner.validation.children import child_sites
from graphrunner.validation.constants import constant_failures
from graphrunner.validation.structure import unreachable

FIELD_READ = re.compile(r"\bstate\s*(?:\.\s*([A-Za-z_]\w*)|\[\s*[\"']([^\"']+)[\"']\s*\])")
WHOLE_STATE = re.compile(r"\bstate\b(?!\s*[.\[])")


def analyse(spec: GraphSpec, check_env: bool = False) -> list[Issue]:
    """Every warning for `spec`. A Rye graph gets the walker's static analysis: an unreachable
    node is a warning there, and missing `env_requires` variables are always reported."""
    warnings = _no_return(spec) + _state_flow(spec) + constant_failures(spec)
    if spec.rye:
        warnings += unreachable(spec) + _unpermitted(spec)
    if check_env or spec.rye:
        warnings += _env_missing(spec)
    return warnings


def _no_return(spec: GraphSpec) -> list[Issue]:
    if any(isinstance(n, ReturnNode) for n in spec.nodes.values()):
        return []
    return [Issue("no_return_node", "the graph has no 'return' node; runs end where a node has no next")]


def _expressions(value: Any) -> Iterator[str]:
    """Every expression body inside a value (strings are scanned for `${...}`)."""
    if isinstance(value, str):
        try:
            yield from (text for is_expr, text in split_template(value) if is_expr)
        except ExpressionError:  # reported as bad_expression by compilation
            return
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from _expressions(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _expressions(v)


def _conditions(cond: Any) -> Iterator[str]:
    if isinstance(cond, str):
        yield cond
    elif isinstance(cond, StructuredCondition):
        if cond.path is not None:
            yield cond.path
            yield from _expressions(cond.value)
        for part in (*(cond.all or ()), *(cond.any or ()), *((cond.not_,) if cond.not_ else ())):
            yield from _conditions(part)


def _read_sites(spec: GraphSpec) -> Iterator[str]:
    for node in spec.nodes.values():
        dumped = node.model_dump(exclude={"next"}, by_alias=True)
        yield from _expressions(dumped)
        nxt = getattr(node, "next", None)
        for branch in nxt.branches if nxt is not None else ():
            yield from _conditions(branch.when)
        if not spec.rye:  # a child's inputs written as bare names read parent fields (Rye: values)
            for site in child_sites(spec):
                yield from (f"state.{v}" for v in (site.inputs or {}).values() if isinstance(v, str))
    for hook in spec.config.hooks:
        yield from _expressions(hook.action.params)
        yield from _conditions(hook.when)


def _writes(spec: GraphSpec) -> set[str]:
    written = set()
    for node in spec.nodes.values():
        written |= set(node.assign)
        labels = ("result_key", "collect", "errors_field")
        written |= {t for t in (getattr(node, label, None) for label in labels) if t}
        if isinstance(node, SubgraphNode):
            written |= set(node.outputs or {}) or set(spec.state)
        if isinstance(node, ParallelNode):
            for branch in node.branches.values():
                written |= set(branch.outputs or {}) if branch.outputs is not None else set(spec.state)
        if getattr(node, "assign_result", False):  # the result's keys: any field may be written
            written |= set(spec.state)
    return written


def _outputs_whole_state(spec: GraphSpec) -> bool:
    for node in spec.nodes.values():
        if isinstance(node, ReturnNode) and node.output is None:
            return True
        if isinstance(node, ReturnNode):
            continue
        if node.next is None or node.next.fn is not None or END in node.next.targets:
            return True
    return False


def _state_flow(spec: GraphSpec) -> list[Issue]:
    reads: set[str] = set()
    whole = _outputs_whole_state(spec)
    for text in _read_sites(spec):
        reads |= {a or b for a, b in FIELD_READ.findall(text)}
        whole = whole or bool(WHOLE_STATE.search(FIELD_READ.sub("", text)))
    written = _writes(spec)
    declared = set(spec.state)
    issues = [
        Issue(
            "state_never_assigned",
            f"state.{f} is read but no node writes it and it is not declared",
            location=f"state.{f}",
        )
        for f in sorted(reads - written - declared - _seeded(spec))
    ]
    if not whole:
        issues += [
            Issue("state_never_read", f"state.{f} is written but never read", location=f"state.{f}")
            for f in sorted((written | declared) - reads)
        ]
    return issues


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
        (v, "config.env_requires", None) for v in spec.config.env_requires
    ]
    for name, node in spec.nodes.items():
        wanted += [(v, f"nodes.{name}.env_requires", name) for v in getattr(node, "env_requires", ())]
    return [
        Issue(
            "env_missing",
            f"environment variable {var} is not set ({where})",
            node=node,
            location=where,
        )
        for var, where, node in wanted
        if var not in os.environ
    ]


__all__ = ["analyse"]
