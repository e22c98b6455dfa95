"""pydantic's errors on a graph document, as issues that say what is wrong and where."""

from __future__ import annotations

from difflib import get_close_matches
from typing import Any

from pydantic import BaseModel, ValidationError

from graphrunner.expressions.failures import describe
from graphrunner.model import (
    Action,
    Branch,
    GraphConfig,
    GraphSpec,
    Hook,
    InputField,
    RetryPolicy,
    StateField,
    StructuredCondition,
)
from graphrunner.model.nodes import NODE_TYPES
from graphrunner.report import Issue

SUBMODELS: dict[str, type[BaseModel]] = {
    "config": GraphConfig,
    "action": Action,
    "retry": RetryPolicy,
    "hooks": Hook,
    "when": StructuredCondition,
    "all": StructuredCondition,
    "any": StructuredCondition,
    "not": StructuredCondition,
    "branches": Branch,
    "next": Branch,
}
UNION_MEMBERS = {"str", "StructuredCondition", "list[...]", "dict[str,any]"}


def schema_issues(exc: ValidationError, data: Any) -> list[Issue]:
    """One issue per distinct problem, with node, location and a suggestion for typos."""
    issues: dict[str, Issue] = {}
    for err in exc.errors():
        loc = _relocate(err, _clean(err["loc"], data), data)
        issue = _issue(err, loc, data)
        key = f"{issue.location}|{issue.message}"
        if err["type"] == "string_type" and any(k.startswith(f"{issue.location}|") for k in issues):
            continue
        issues.setdefault(key, issue)
    return _drop_union_noise(list(issues.values()))


def _relocate(err: Any, loc: tuple[str | int, ...], data: Any) -> tuple[str | int, ...]:
    """Point at what the author wrote: a bad node name at its key; a lone retry policy unindexed."""
    if err["type"] == "bad_node_name":
        return ("nodes", err["ctx"]["name"])
    if len(loc) >= 5 and loc[0] == "nodes" and loc[2] == "retry" and loc[3] == 0:
        node = data.get("nodes", {}).get(loc[1]) if isinstance(data, dict) else None
        if isinstance(node, dict) and isinstance(node.get("retry"), dict):
            return (*loc[:3], *loc[4:])
    return loc


def _drop_union_noise(issues: list[Issue]) -> list[Issue]:
    """Where a union member wanted a string but another member explains more, keep the latter."""
    located = {i.location for i in issues if "valid string" not in i.message}
    return [
        i
        for i in issues
        if "valid string" not in i.message
        or not any(loc != i.location and loc and loc.startswith(f"{i.location}.") for loc in located)
    ]


def _clean(loc: tuple[Any, ...], data: Any) -> tuple[str | int, ...]:
    """Drop the union tags pydantic puts into locations; a key the author wrote is never one."""
    out: list[str | int] = []
    current = data
    for i, part in enumerate(loc):
        if i == 2 and loc[0] == "nodes" and part in NODE_TYPES:
            continue  # the node-type tag of the discriminated union
        if _has_key(current, part):
            out.append(part)
            current = current[part]
            continue
        if _is_tag(part):
            continue
        out.append(part)
        current = None
    return tuple(out)


def _has_key(container: Any, part: Any) -> bool:
    if isinstance(container, dict):
        return part in container
    return isinstance(container, list) and isinstance(part, int) and 0 <= part < len(container)


def _is_tag(part: Any) -> bool:
    return isinstance(part, str) and (part in UNION_MEMBERS or "[" in part or part.startswith("function-"))


def _issue(err: Any, loc: tuple[str | int, ...], data: Any) -> Issue:
    node = str(loc[1]) if len(loc) >= 2 and loc[0] == "nodes" else None
    where = ".".join(str(p) for p in loc)
    subject = f"node '{node}'" if node else (where or "graph")
    inner = ".".join(str(p) for p in loc[2:]) if node else ""
    if err["type"] == "extra_forbidden" and loc:
        key = str(loc[-1])
        parent = _parent_model(loc[:-1], data)
        hint = _suggest(key, parent)
        place = f"{subject}{' ' + '.'.join(str(p) for p in loc[2:-1]) if node and len(loc) > 3 else ''}"
        if not node:
            place = ".".join(str(p) for p in loc[:-1]) or "graph"
        return Issue("invalid_schema", f"{place}: unknown key '{key}'{hint}", node=node, location=where)
    detail = f"{inner}: " if inner else ""
    if not node:
        detail = ""
    message = err["msg"]
    if err["type"] not in ("missing",) and "input" in err and not isinstance(err["input"], dict | list):
        message += f" (got {describe(err['input'])})"
    return Issue("invalid_schema", f"{subject}: {detail}{message}", node=node, location=where)


def _suggest(key: str, model: type[BaseModel] | None) -> str:
    if model is None:
        return ""
    names = set()
    for name, info in model.model_fields.items():
        names.add(info.alias or name)
    close = get_close_matches(key, sorted(names), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


FIELD_MODELS: dict[str, type[BaseModel]] = {"state": StateField, "inputs": InputField}


def _parent_model(loc: tuple[str | int, ...], data: Any) -> type[BaseModel] | None:
    """The model class that owns the mapping at `loc` (for "did you mean" hints)."""
    model: type[BaseModel] | None = GraphSpec
    parts = [p for p in loc if not isinstance(p, int)]
    i = 0
    while i < len(parts):
        part = str(parts[i])
        if model is GraphSpec and part in ("state", "inputs", "nodes") and i + 1 < len(parts):
            section = data.get(part) if isinstance(data, dict) else None
            raw = section.get(parts[i + 1]) if isinstance(section, dict) else None
            model = _node_class(raw) if part == "nodes" else FIELD_MODELS[part]
            i += 2
            continue
        model = SUBMODELS.get(part)
        i += 1
    return model


def _node_class(raw: Any) -> type[BaseModel] | None:
    from graphrunner.model import nodes

    classes: dict[str, type[BaseModel]] = {
        "action": nodes.ActionNode,
        "gate": nodes.GateNode,
        "foreach": nodes.ForeachNode,
        "subgraph": nodes.SubgraphNode,
        "pause": nodes.PauseNode,
        "return": nodes.ReturnNode,
    }
    return classes.get(nodes.node_tag(raw if isinstance(raw, dict) else {}))
