"""Conformance fixtures (OpenArmature's format) read and translated to graphrunner YAML graphs.

A fixture file holds one graph with its expectations, or `cases:`, a list of them. Each
graph and each of its `subgraphs` becomes one graph file in a folder, so that a subgraph
node finds its child "next to" its parent, in-process and when submitted to a cluster. A
`fan_out` that collects a child field also gets a variant of its child that returns that
field (graphrunner collects a child's output).
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
COLLECT_NODE = "_collect"  # the return node of a fan_out child's collecting variant
BRANCH_KEYS = {"subgraph", "inputs", "outputs"}
PARALLEL_KEYS = {"branches", "error_policy", "errors_field"}
FAN_OUT_KEYS = {
    "subgraph",
    "items_field",
    "item_field",
    "collect_field",
    "target_field",
    "inputs",
    "concurrency",
    "error_policy",
    "tolerated_failures",
    "parallel",
}


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
    """Write the case's graph, its subgraphs and their collecting variants to `folder`; return
    the main graph's file."""
    subgraphs = dict(case.graph.get("subgraphs") or {})
    if "subgraph" in case.graph:
        single = dict(case.graph["subgraph"])
        subgraphs[single.pop("name")] = single
    ids = {name: f"{prefix}-{name}" for name in subgraphs}
    for name, body in subgraphs.items():
        _write(folder, ids[name], translate(body, ids[name], ids))
    for name, field_name in _collected([case.graph, *subgraphs.values()]):
        variant = collect_id(ids[name], field_name)
        _write(folder, variant, translate(subgraphs[name], variant, ids, collect=field_name))
    main_id = f"{prefix}-main"
    return _write(folder, main_id, translate(case.graph, main_id, ids, case.initial_state))


def collect_id(child_id: str, field_name: str) -> str:
    """The id of the variant of graph `child_id` whose output is its field `field_name`."""
    return f"{child_id}-collect-{field_name}"


def _collected(bodies: list[dict[str, Any]]) -> set[tuple[str, str]]:
    """(child, field) of every `fan_out` node that collects a child field."""
    found = set()
    for body in bodies:
        for spec in (body.get("nodes") or {}).values():
            fan_out = (spec or {}).get("fan_out") or {}
            if "collect_field" in fan_out:
                found.add((fan_out["subgraph"], fan_out["collect_field"]))
    return found


def _write(folder: Path, graph_id: str, text: str) -> Path:
    path = folder / f"{graph_id}.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def translate(
    body: dict[str, Any],
    graph_id: str,
    subgraph_ids: dict[str, str],
    initial_state: dict[str, Any] | None = None,
    collect: str | None = None,
) -> str:
    """The graphrunner YAML text of one fixture graph.

    `initial_state` becomes the fields' defaults: a cluster run starts from the declared
    defaults and its inputs, there is no way to hand it a whole initial state. With
    `collect`, every way to END goes through a `return` node whose output is that field.
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
    if collect is not None:
        graph["nodes"] = _collecting(graph["nodes"], collect)
    return yaml.safe_dump(graph, sort_keys=False, allow_unicode=True)


def _collecting(nodes: dict[str, dict[str, Any]], field_name: str) -> dict[str, dict[str, Any]]:
    """`nodes` with every edge to END, and every node without `next`, going to a return node
    whose output is `field_name` (a routing function that returns END is left as it is)."""
    out = {}
    for name, node in nodes.items():
        node = dict(node)
        target = node.get("next", "$end")
        if target == "$end":
            node["next"] = COLLECT_NODE
        elif isinstance(target, list):
            node["next"] = [{**b, "to": COLLECT_NODE} if b.get("to") == "$end" else b for b in target]
        out[name] = node
    out[COLLECT_NODE] = {"type": "return", "output": f"${{state.{field_name}}}"}
    return out


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
    """`update` is a gate assigning literals, `raises` the `fail` tool, `sleep` the `sleep`
    tool (then `update`), `subgraph` a child run, `parallel_branches` a `parallel` node,
    `fan_out` a `foreach` over a graph."""
    if "subgraph" in spec:
        node: dict[str, Any] = {"type": "subgraph", "graph": subgraph_ids[spec["subgraph"]]}
        node.update({k: spec[k] for k in ("inputs", "outputs") if k in spec})
    elif "parallel_branches" in spec:
        node = _parallel(spec["parallel_branches"], subgraph_ids)
    elif "fan_out" in spec:
        node = _fan_out(spec["fan_out"], subgraph_ids)
    elif "raises" in spec:
        raises = spec["raises"]
        params = {"message": raises} if isinstance(raises, str) else dict(raises)
        node = {"action": {"tool": "fail", "params": params}}
    elif "sleep" in spec:
        node = {"action": {"tool": "sleep", "params": {"seconds": spec["sleep"]}}}
    else:
        node = {"type": "gate"}
    if "update" in spec:
        node["assign"] = _literal(spec["update"])
    if branches:
        node["next"] = _next(branches)
    return node


def _known(form: str, spec: dict[str, Any], keys: set[str]) -> None:
    """Refuse a key the translation does not know (rather than dropping it silently)."""
    unknown = sorted(set(spec) - keys)
    if unknown:
        raise ValueError(f"{form}: no graphrunner translation for {', '.join(unknown)}")


def _parallel(spec: dict[str, Any], subgraph_ids: dict[str, str]) -> dict[str, Any]:
    """OpenArmature's parallel branches: a `parallel` node, branches in the same order."""
    _known("parallel_branches", spec, PARALLEL_KEYS)
    branches = {}
    for name, branch in spec["branches"].items():
        _known(f"parallel_branches branch {name}", branch, BRANCH_KEYS)
        branches[name] = {"graph": subgraph_ids[branch["subgraph"]]}
        branches[name].update({k: branch[k] for k in ("inputs", "outputs") if k in branch})
    node: dict[str, Any] = {"type": "parallel", "branches": branches}
    node.update({k: spec[k] for k in ("error_policy", "errors_field") if k in spec})
    return node


def _fan_out(spec: dict[str, Any], subgraph_ids: dict[str, str]) -> dict[str, Any]:
    """OpenArmature's fan-out: a `foreach` over a graph, one child run per item of
    `items_field`, the item in the child's `item_field`; the child's `collect_field` (its
    collecting variant's output) lands in `target_field`, in item order."""
    _known("fan_out", spec, FAN_OUT_KEYS)
    child = subgraph_ids[spec["subgraph"]]
    if "collect_field" in spec:
        child = collect_id(child, spec["collect_field"])
    node: dict[str, Any] = {
        "type": "foreach",
        "over": f"${{state.{spec['items_field']}}}",
        "parallel": spec.get("parallel", True),
        "graph": child,
        "inputs": {spec["item_field"]: "${item}", **(spec.get("inputs") or {})},
    }
    if "concurrency" in spec:
        node["max_concurrency"] = spec["concurrency"]
    if "target_field" in spec:
        node["collect"] = spec["target_field"]
    policy = spec.get("error_policy", "fail_fast")
    if policy not in ("fail_fast", "collect") or (policy == "collect" and "tolerated_failures" in spec):
        raise ValueError(f"fan_out: error_policy {policy!r} (collect tolerates every failure)")
    tolerated = "100%" if policy == "collect" else spec.get("tolerated_failures", 0)
    if tolerated:
        node["tolerated_failures"] = tolerated
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
