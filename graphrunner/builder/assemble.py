"""What a `GraphBuilder` recorded, written as a graph document and loaded like a graph file."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import yaml
from pydantic import BaseModel
from pydantic_core import to_jsonable_python

from graphrunner.builder.functions import hook_action, item_action, node_action, routing_next
from graphrunner.builder.state import state_section
from graphrunner.errors import GraphValidationError
from graphrunner.graph import Graph
from graphrunner.loading import parse_graph
from graphrunner.report import Issue


@dataclass(frozen=True)
class Foreach:
    """A foreach node's function, called once per item, or the graph each item runs as."""

    fn: Callable[..., Any] | Graph


@dataclass(frozen=True)
class Branches:
    """A parallel node's branch graphs, by branch name."""

    graphs: dict[str, Graph]


@dataclass(frozen=True)
class HookEntry:
    """A hook: call `fn` on `event` when the CEL condition `when` holds."""

    event: str
    fn: Callable[..., Any]
    when: str | None = None


NodeTarget = Callable[..., Any] | Graph | Foreach | Branches | None  # None: a pause or return node


@dataclass(frozen=True)
class Assembly:
    """Everything a builder recorded, at the moment `compile()` was called."""

    state: type[BaseModel]
    graph_id: str
    head: dict[str, Any]
    config: dict[str, Any]
    nodes: dict[str, tuple[NodeTarget, dict[str, Any]]]
    edges: dict[str, list[str]]
    routers: dict[str, list[Callable[..., Any]]]
    issues: list[Issue]
    hooks: list[HookEntry]


def assemble(a: Assembly) -> Graph:
    """The compiled graph; raises `GraphValidationError` with every issue found."""
    source = f"'{a.graph_id}' (GraphBuilder)"
    state, issues = state_section(a.state)
    nodes, node_issues = _nodes(a)
    nexts, edge_issues = _nexts(a)
    children, child_issues = _children(a)
    hooks, hook_issues = _hooks(a.hooks)
    issues = a.issues + issues + node_issues + edge_issues + child_issues + hook_issues
    if issues:
        raise GraphValidationError(issues, source)
    for name, nxt in nexts.items():
        nodes[name]["next"] = nxt
    config = {k: v for k, v in a.config.items() if v is not None}
    if hooks:
        config["hooks"] = hooks
    head = {k: v for k, v in a.head.items() if v is not None}
    document = {"id": a.graph_id, **head, "state": state, "config": config, "nodes": nodes}
    try:
        graph = parse_graph(graph_text(a.state, document), children={k: g.spec for k, g in children.items()})
    except GraphValidationError as exc:
        raise GraphValidationError([_unlined(i) for i in exc.issues], source) from None
    graph.report.warnings = [_unlined(w) for w in graph.report.warnings if w.code != "no_return_node"]
    paths = {k: g.file or f"<compiled graph {k}>" for k, g in children.items()}
    return replace(graph, child_paths=paths, _children=dict(children))


def graph_text(state: type[BaseModel], document: dict[str, Any]) -> str:
    """The graph document as YAML, as workers load it."""
    header = f"# built with graphrunner.GraphBuilder over {state.__module__}:{state.__qualname__}\n"
    body = yaml.safe_dump(
        to_jsonable_python(document), sort_keys=False, allow_unicode=True, width=100, default_flow_style=None
    )
    return header + body


def _nodes(a: Assembly) -> tuple[dict[str, dict[str, Any]], list[Issue]]:
    nodes: dict[str, dict[str, Any]] = {}
    issues: list[Issue] = []
    for name, (target, options) in a.nodes.items():
        if target is None or isinstance(target, Graph | Branches):
            nodes[name] = dict(options)
            continue
        if isinstance(target, Foreach):
            each = target.fn
            if isinstance(each, Graph):
                nodes[name] = {**options, "graph": each.id}
                continue
            action, problems = item_action(name, each)
            issues += problems
            nodes[name] = {**options, "action": action}
            continue
        action, problems = node_action(name, target)
        issues += problems
        nodes[name] = {"action": action, "assign_result": True, **options}
    if not nodes:
        issues.append(
            Issue("invalid_schema", "the graph has no nodes: add them with add_node", location="nodes")
        )
    return nodes, issues


def _nexts(a: Assembly) -> tuple[dict[str, Any], list[Issue]]:
    nexts: dict[str, Any] = {}
    issues: list[Issue] = []
    for src in dict.fromkeys([*a.edges, *a.routers]):
        if src in a.nodes and a.nodes[src][1].get("type") == "return":
            issues.append(
                Issue(
                    "dangling_edge",
                    f"an edge leaves node '{src}', a return node, which ends the run",
                    node=src,
                    location=f"nodes.{src}.next",
                )
            )
            continue
        if src not in a.nodes:
            issues.append(
                Issue(
                    "dangling_edge",
                    f"an edge leaves node '{src}', which was never added",
                    node=src,
                    location=f"nodes.{src}.next",
                )
            )
            continue
        nxt, problems = _next(src, a.edges.get(src, []), a.routers.get(src, []))
        nexts[src], issues = nxt, issues + problems
    return nexts, issues


def _next(src: str, targets: list[str], routers: list[Callable[..., Any]]) -> tuple[Any, list[Issue]]:
    """`next` as the graph language writes it; two kinds of edge are reported by validation."""
    issues: list[Issue] = []
    if len(routers) > 1:
        issues.append(
            Issue(
                "multiple_outgoing_edges",
                f"node '{src}' has {len(routers)} conditional edges; a node routes by one function",
                node=src,
                location=f"nodes.{src}.next",
            )
        )
    if not routers:
        return (targets[0] if len(targets) == 1 else [{"to": t} for t in targets]), issues
    ref, problems = routing_next(src, routers[0])
    if not targets:
        return {"fn": ref}, issues + problems
    return {"branches": [{"to": t} for t in targets], "fn": ref}, issues + problems


def _hooks(entries: list[HookEntry]) -> tuple[list[dict[str, Any]], list[Issue]]:
    hooks: list[dict[str, Any]] = []
    issues: list[Issue] = []
    for index, entry in enumerate(entries):
        action, problems = hook_action(f"config.hooks.{index}", entry.fn)
        issues += problems
        hook = {"event": entry.event, "when": entry.when, "action": action}
        hooks.append({k: v for k, v in hook.items() if v is not None})
    return hooks, issues


def _children(a: Assembly) -> tuple[dict[str, Graph], list[Issue]]:
    children: dict[str, Graph] = {}
    issues: list[Issue] = []
    for name, graph in _child_graphs(a):
        known = children.get(graph.id)
        target = graph
        if target.id == a.graph_id or (known is not None and known.content_hash != target.content_hash):
            issues.append(
                Issue(
                    "invalid_schema",
                    f"node '{name}': subgraph id '{target.id}' is already the id of "
                    f"{'this graph' if target.id == a.graph_id else 'another subgraph'}; "
                    "give each GraphBuilder its own id=",
                    node=name,
                    location=f"nodes.{name}.graph",
                )
            )
            continue
        children[target.id] = target
    return children, issues


def _child_graphs(a: Assembly) -> list[tuple[str, Graph]]:
    """(node, graph) for every graph a node runs as a child: subgraph, foreach, branches."""
    found: list[tuple[str, Graph]] = []
    for name, (target, _) in a.nodes.items():
        if isinstance(target, Graph):
            found.append((name, target))
        elif isinstance(target, Foreach) and isinstance(target.fn, Graph):
            found.append((name, target.fn))
        elif isinstance(target, Branches):
            found += [(name, g) for g in target.graphs.values()]
    return found


def _unlined(issue: Issue) -> Issue:
    """An issue without the line of the generated text, which means nothing to a builder's author."""
    return Issue(issue.code, issue.message, issue.node, issue.location)
