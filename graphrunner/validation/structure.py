"""Graph structure: entry, dangling edges, reachability, outgoing edges (OpenArmature)."""

from __future__ import annotations

from collections import deque

from graphrunner.model import END, GraphSpec, ReturnNode
from graphrunner.report import Issue


def check_structure(spec: GraphSpec) -> list[Issue]:
    """`no_declared_entry`, `dangling_edge`, `unreachable_node`, `multiple_outgoing_edges`."""
    issues = _entry(spec) + _dangling(spec) + _multiple_defaults(spec)
    if not spec.rye:  # the walker only warns (`analyse`)
        issues += unreachable(spec)
    return issues


def _entry(spec: GraphSpec) -> list[Issue]:
    start = spec.config.start
    if start is None:
        return [
            Issue(
                "no_declared_entry",
                "config.start is missing: the entry node is never implicit",
                location="config",
            )
        ]
    if start not in spec.nodes:
        return [
            Issue(
                "dangling_edge",
                f"config.start names unknown node '{start}'{_hint(start, spec)}",
                location="config.start",
            )
        ]
    return []


def _hint(name: str, spec: GraphSpec) -> str:
    from difflib import get_close_matches

    close = get_close_matches(name, list(spec.nodes), n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""


def _dangling(spec: GraphSpec) -> list[Issue]:
    issues = []
    for name, node in spec.nodes.items():
        if isinstance(node, ReturnNode):
            continue
        if node.next is not None:
            for i, target in enumerate(node.next.targets):
                if target != END and target not in spec.nodes:
                    issues.append(
                        Issue(
                            "dangling_edge",
                            f"node '{name}': next names unknown node '{target}'{_hint(target, spec)}",
                            node=name,
                            location=f"nodes.{name}.next.{i}.to",
                        )
                    )
        on_error = getattr(node, "on_error", None)
        if on_error is not None and on_error not in spec.nodes:
            issues.append(
                Issue(
                    "dangling_edge",
                    f"node '{name}': on_error names unknown node '{on_error}'{_hint(on_error, spec)}",
                    node=name,
                    location=f"nodes.{name}.on_error",
                )
            )
    return issues


def _multiple_defaults(spec: GraphSpec) -> list[Issue]:
    issues = []
    for name, node in spec.nodes.items():
        if isinstance(node, ReturnNode) or node.next is None:
            continue
        unconditional = [b.to for b in node.next.branches if b.when is None]
        if node.next.fn is not None and node.next.branches:
            issues.append(
                Issue(
                    "multiple_outgoing_edges",
                    f"node '{name}' has a routing function ({node.next.fn}) and edges to "
                    f"{', '.join(node.next.targets)}; a node routes by one or the other",
                    node=name,
                    location=f"nodes.{name}.next",
                )
            )
        elif len(unconditional) > 1:
            issues.append(
                Issue(
                    "multiple_outgoing_edges",
                    f"node '{name}' has {len(unconditional)} unconditional edges "
                    f"({', '.join(unconditional)}); branch with 'when' instead",
                    node=name,
                    location=f"nodes.{name}.next",
                )
            )
    return issues


def successors(spec: GraphSpec, name: str) -> list[str]:
    """Nodes `name` can route to statically (next targets and on_error)."""
    node = spec.nodes[name]
    if isinstance(node, ReturnNode):
        return []
    out = list(node.next.targets) if node.next is not None else []
    on_error = getattr(node, "on_error", None)
    if on_error:
        out.append(on_error)
    return [t for t in out if t in spec.nodes]


def unreachable(spec: GraphSpec) -> list[Issue]:
    """`unreachable_node` for every node a run from `start` can never reach."""
    if spec.config.start not in spec.nodes:
        return []
    assert spec.config.start is not None
    seen = {spec.config.start}
    queue = deque([spec.config.start])
    while queue:
        name = queue.popleft()
        node = spec.nodes[name]
        if not isinstance(node, ReturnNode) and node.next is not None and node.next.fn is not None:
            return []  # a routing function may reach any node
        for nxt in successors(spec, name):
            if nxt not in seen:
                seen.add(nxt)
                queue.append(nxt)
    return [
        Issue(
            "unreachable_node",
            f"node '{name}' cannot be reached from '{spec.config.start}'",
            node=name,
            location=f"nodes.{name}",
        )
        for name in spec.nodes
        if name not in seen
    ]
