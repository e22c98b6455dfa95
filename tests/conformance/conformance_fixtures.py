"""Conformance fixtures (OpenArmature's format) read and translated to graphrunner YAML graphs.

A fixture file holds one graph with its expectations, or `cases:`, a list of them. Each
graph and each of its `subgraphs` becomes one graph file in a folder, so that a subgraph
node finds its child "next to" its parent, in-process and when submitted to a cluster.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

FIXTURES = Path(__file__).resolve().parent / "fixtures"
END = "END"  # OpenArmature's sentinel; graphrunner writes it `$end`
GRAPH_KEYS = ("state", "entry", "nodes", "edges", "subgraphs", "subgraph")


@dataclass(frozen=True)
class Case:
    """One graph of a fixture file and what running (or loading) it must give."""

    id: str
    graph: dict[str, Any]
    initial_state: dict[str, Any] = field(default_factory=dict)
    expected: dict[str, Any] | None = None
    expected_error: dict[str, Any] | None = None
    expected_compile_error: str | None = None
    run_count: int = 1


def load_cases() -> list[Case]:
    """Every case of every fixture file, in file order."""
    cases = []
    for path in sorted(FIXTURES.glob("*.yaml")):
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        if "cases" not in doc:
            cases.append(_case(path.stem, doc))
            continue
        for entry in doc["cases"]:
            cases.append(_case(f"{path.stem}[{entry['name']}]", {**doc, **entry}))
    return cases


def _case(case_id: str, doc: dict[str, Any]) -> Case:
    graph = doc.get("graph") or {k: doc[k] for k in GRAPH_KEYS if k in doc}
    return Case(
        id=case_id,
        graph=graph,
        initial_state=doc.get("initial_state") or {},
        expected=doc.get("expected"),
        expected_error=doc.get("expected_error"),
        expected_compile_error=doc.get("expected_compile_error"),
        run_count=doc.get("run_count", 1),
    )


def write_graphs(case: Case, folder: Path, prefix: str) -> Path:
    """Write the case's graph and its subgraphs to `folder`; return the main graph's file."""
    subgraphs = dict(case.graph.get("subgraphs") or {})
    if "subgraph" in case.graph:
        single = dict(case.graph["subgraph"])
        subgraphs[single.pop("name")] = single
    ids = {name: f"{prefix}-{name}" for name in subgraphs}
    for name, body in subgraphs.items():
        _write(folder, ids[name], translate(body, ids[name], ids))
    main_id = f"{prefix}-main"
    return _write(folder, main_id, translate(case.graph, main_id, ids, case.initial_state))


def _write(folder: Path, graph_id: str, text: str) -> Path:
    path = folder / f"{graph_id}.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def translate(
    body: dict[str, Any],
    graph_id: str,
    subgraph_ids: dict[str, str],
    initial_state: dict[str, Any] | None = None,
) -> str:
    """The graphrunner YAML text of one fixture graph.

    `initial_state` becomes the fields' defaults: a cluster run starts from the declared
    defaults and its inputs, there is no way to hand it a whole initial state.
    """
    state = {name: _field(spec) for name, spec in (body.get("state") or {}).get("fields", {}).items()}
    for name, value in (initial_state or {}).items():
        state.setdefault(name, {"type": "any"})["default"] = value
    edges: dict[str, list[dict[str, Any]]] = {}
    for edge in body.get("edges") or []:
        edges.setdefault(edge["from"], []).extend(_branches(edge))
    graph: dict[str, Any] = {"id": graph_id, "state": state}
    if "entry" in body:
        graph["config"] = {"start": body["entry"]}
    graph["nodes"] = {
        name: _node(spec or {}, edges.get(name, []), subgraph_ids) for name, spec in body["nodes"].items()
    }
    return yaml.safe_dump(graph, sort_keys=False, allow_unicode=True)


def _field(spec: dict[str, Any]) -> dict[str, Any]:
    """A state field: `list<string>` is `list`, `{bounded_append: {max_len: 3}}` is
    `{name: bounded_append, max_len: 3}`, anything else passes as it is."""
    out = dict(spec)
    if "type" in out:
        out["type"] = re.sub(r"<.*>$", "", out["type"])
    reducer = out.get("reducer")
    if isinstance(reducer, dict) and "name" not in reducer and len(reducer) == 1:
        ((name, params),) = reducer.items()
        out["reducer"] = {"name": name, **(params or {})}
    return out


def _target(name: str) -> str:
    return "$end" if name == END else name


def _branches(edge: dict[str, Any]) -> list[dict[str, Any]]:
    """The `next` branches of one fixture edge, in order."""
    if "fn" in edge:
        return [{"fn": edge["fn"]}]
    if "condition" in edge:  # OpenArmature's {if_field, equals, then, else}
        cond = edge["condition"]
        when = f"state.{cond['if_field']} == {json.dumps(cond['equals'])}"
        return [{"to": _target(cond["then"]), "when": when}, {"to": _target(cond["else"])}]
    branch = {"to": _target(edge["to"])}
    if "when" in edge:
        branch["when"] = edge["when"]
    return [branch]


def _next(branches: list[dict[str, Any]]) -> Any:
    if len(branches) == 1 and "fn" in branches[0]:
        return {"fn": branches[0]["fn"]}
    if len(branches) == 1 and "when" not in branches[0]:
        return branches[0]["to"]
    return branches


def _node(
    spec: dict[str, Any], branches: list[dict[str, Any]], subgraph_ids: dict[str, str]
) -> dict[str, Any]:
    """`update` is a gate assigning literals, `raises` the `fail` tool, `subgraph` a child run."""
    if "subgraph" in spec:
        node: dict[str, Any] = {"type": "subgraph", "graph": subgraph_ids[spec["subgraph"]]}
        node.update({k: spec[k] for k in ("inputs", "outputs") if k in spec})
    elif "raises" in spec:
        raises = spec["raises"]
        params = {"message": raises} if isinstance(raises, str) else dict(raises)
        node = {"action": {"tool": "fail", "params": params}}
    else:
        node = {"type": "gate"}
        if "update" in spec:
            node["assign"] = _literal(spec["update"])
    if branches:
        node["next"] = _next(branches)
    return node


def _literal(value: Any) -> Any:
    """`value` with every `${` escaped, so interpolation writes it unchanged."""
    if isinstance(value, str):
        return value.replace("${", "$${")
    if isinstance(value, list):
        return [_literal(v) for v in value]
    if isinstance(value, dict):
        return {k: _literal(v) for k, v in value.items()}
    return value
