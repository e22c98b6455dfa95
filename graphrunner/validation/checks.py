"""graphrunner's own checks: reducers, tools, foreach, subgraphs, update conflicts."""

from __future__ import annotations

from collections.abc import Collection

from graphrunner.importing import ImportFailed, check_reference
from graphrunner.model import Action, ActionNode, ForeachNode, GraphSpec
from graphrunner.reducers import ReducerConfigError, build_reducer
from graphrunner.report import Issue

RESERVED_ITEM_NAMES = frozenset({"state", "inputs", "result", "run", "index", "_now", "_timestamp"})


def check_reducers(spec: GraphSpec) -> list[Issue]:
    """`conflicting_reducers` and `reducer_configuration_invalid` for every state field."""
    issues = []
    for name, fld in spec.state.items():
        where = f"state.{name}.reducer"
        if fld.reducer.conflicting:
            issues.append(
                Issue(
                    "conflicting_reducers",
                    f"state field '{name}' declares several reducers ({', '.join(fld.reducer.conflicting)}); "
                    "a field has exactly one",
                    location=where,
                )
            )
            continue
        try:
            build_reducer(fld.reducer)
        except ReducerConfigError as exc:
            issues.append(
                Issue(
                    "reducer_configuration_invalid",
                    f"state field '{name}': reducer '{fld.reducer.name}': {exc}",
                    location=where,
                )
            )
    return issues


def check_tools(spec: GraphSpec, tools: Collection[str]) -> list[Issue]:
    """`unknown_tool` for actions and hooks; `invalid_schema` for a malformed python `fn`."""
    issues = []
    sites: list[tuple[str | None, str, Action]] = [
        (name, f"nodes.{name}.action", n.action)
        for name, n in spec.nodes.items()
        if isinstance(n, ActionNode | ForeachNode) and n.action is not None
    ]
    sites += [(None, f"config.hooks.{i}.action", h.action) for i, h in enumerate(spec.config.hooks)]
    for node, where, action in sites:
        subject = f"node '{node}'" if node else where
        if action.tool not in tools:
            issues.append(
                Issue("unknown_tool", _unknown(subject, action.tool, tools, spec.rye), node, f"{where}.tool")
            )
        elif action.tool == "python":
            issues += _python_fn(action.params.get("fn"), subject, node, where)
    return issues


def _unknown(subject: str, tool: str, tools: Collection[str], rye: bool) -> str:
    known = f"registered tools: {', '.join(sorted(tools))}"
    if not rye:
        return f"{subject}: unknown tool '{tool}'; {known}"
    return (
        f"{subject}: Rye id '{tool}' names no tool of this deployment; map it to one with "
        f"GRAPHRUNNER_RYE_TOOLS='{tool}=TOOL', register_rye_alias('{tool}', TOOL) in the worker "
        f"configuration, or a tool plugin declaring rye_ids = ['{tool}'] "
        f"(docs/running-rye-graphs.md); {known}"
    )


def _python_fn(fn: object, subject: str, node: str | None, where: str) -> list[Issue]:
    if isinstance(fn, str) and "${" in fn:
        return []
    try:
        check_reference(fn if isinstance(fn, str) else repr(fn))
    except ImportFailed as exc:
        return [
            Issue(
                "invalid_schema",
                f"{subject}: params.fn: {exc}",
                node=node,
                location=f"{where}.params.fn",
            )
        ]
    return []


def check_foreach(spec: GraphSpec) -> list[Issue]:
    """`bad_foreach`: `over` that cannot be a list, an `as` name that hides a namespace."""
    issues = []
    for name, node in spec.nodes.items():
        if not isinstance(node, ForeachNode):
            continue
        where = f"nodes.{name}"
        over = node.over
        if not isinstance(over, list) and not (isinstance(over, str) and "${" in over):
            issues.append(
                Issue(
                    "bad_foreach",
                    f"node '{name}': over must be a list or a ${{...}} expression, got {over!r}",
                    node=name,
                    location=f"{where}.over",
                )
            )
        if node.as_ in RESERVED_ITEM_NAMES:
            issues.append(
                Issue(
                    "bad_foreach",
                    f"node '{name}': as '{node.as_}' would hide the '{node.as_}' namespace",
                    node=name,
                    location=f"{where}.as",
                )
            )
        for option in ("max_concurrency", "batch_size"):
            if getattr(node, option) is not None and not node.parallel:
                issues.append(
                    Issue(
                        "bad_foreach",
                        f"node '{name}': {option} needs parallel: true",
                        node=name,
                        location=f"{where}.{option}",
                    )
                )
    return issues


def check_updates(spec: GraphSpec) -> list[Issue]:
    """`invalid_schema` when one node writes the same field twice in one update."""
    issues = []
    for name, node in spec.nodes.items():
        writers: dict[str, list[str]] = {}
        for key in node.assign:
            writers.setdefault(key, []).append("assign")
        for label in ("result_key", "collect", "errors_field"):
            target = getattr(node, label, None)
            if target:
                writers.setdefault(target, []).append(label)
        for fld, sources in writers.items():
            if len(sources) > 1:
                issues.append(
                    Issue(
                        "invalid_schema",
                        f"node '{name}' writes field '{fld}' twice in one update ({' and '.join(sources)})",
                        node=name,
                        location=f"nodes.{name}",
                    )
                )
    return issues
