"""`graphrunner render` and `graphrunner.render`: graphs as Mermaid, DOT and SVG, runs painted on them.

DOT is parsed with pydot and laid out by Graphviz's `dot` (make test installs it), SVG checked with an XML parser.
"""

from __future__ import annotations

import importlib
import json
import re
import shutil
import subprocess
import sys
import warnings
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from graphrunner.cli import main
from graphrunner.errors import GraphrunnerError
from graphrunner.graph import Graph
from graphrunner.loading import load_graph, parse_graph, parse_spec
from graphrunner.model import GraphSpec
from graphrunner.render import (
    FORMATS,
    MAX_BRANCHES,
    MAX_NODES,
    Diagram,
    RunTrace,
    build_diagram,
    diagram,
    render,
    to_dot,
    to_mermaid,
    to_svg,
)
from graphrunner.render.labels import TIMES
from graphrunner.render.layout import layered
from graphrunner.render.svg import label_size, node_size

with warnings.catch_warnings():  # pydot builds its parser with names pyparsing 3.3 deprecates
    warnings.simplefilter("ignore")
    import pydot
    import pydot.dot_parser

render_cli = importlib.import_module("graphrunner.cli.render")  # the package binds `render` to the command
REPO = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((REPO / "graphs").glob("*.yaml"))
SVG = "{http://www.w3.org/2000/svg}"

EVERY_KIND = """
id: demo/every-kind
state:
  n: {type: integer, default: 0}
  items: {type: list, default: []}
  again: {type: boolean, default: false}
config:
  start: fetch
nodes:
  fetch:
    action: {tool: echo, params: {status: 200}}
    on_error: retry_later
    next:
      - {to: fan, when: "result.status == 200"}
      - {to: $end, when: {path: result.status, op: eq, value: 404}}
      - to: approve
  retry_later:
    type: gate
    assign: {n: "${state.n + 1}"}
    next:
      - {to: fetch, when: "state.n < 3"}
      - to: approve
  fan:
    type: foreach
    over: "${state.items}"
    as: url
    parallel: true
    action: {tool: echo, params: {url: "${url}"}}
    next: research
  research:
    type: parallel
    branches:
      wiki: {graph: research/wiki}
      web: {graph: research/web}
    next: summarize
  summarize:
    type: subgraph
    graph: team/summarize
    next: approve
  approve:
    type: pause
    next:
      - {to: approve, when: "state.again == true"}
      - to: route
  route:
    action: {tool: echo}
    next: {fn: "mypkg.routing:choose"}
  done:
    type: return
"""

PAUSING = """
id: demo/pausing
config: {start: a}
nodes:
  a: {action: {tool: echo}, next: wait_here}
  wait_here: {type: pause, next: b}
  b: {type: return}
"""

SAME_TARGET = """
id: demo/same-target
config: {start: try_it}
nodes:
  try_it:
    action: {tool: fail, params: {message: nope}}
    retry: {max_attempts: 1}
    on_error: after
    next: after
  after: {type: return}
"""


def spec_of(text: str) -> GraphSpec:
    """The graph model of YAML text, as written (no tool or subgraph checks)."""
    return parse_spec(text)


def svg_tree(text: str) -> ET.Element:
    """The parsed SVG document (our own output: the stdlib parser is enough)."""
    return ET.fromstring(text)


def groups(root: ET.Element, cls: str) -> dict[str, ET.Element]:
    """The `<g>` elements whose class list holds `cls`, by id."""
    return {g.get("id", ""): g for g in root.iter(f"{SVG}g") if cls in (g.get("class") or "").split()}


def classes(element: ET.Element) -> set[str]:
    return set((element.get("class") or "").split())


def assert_self_contained(text: str) -> None:
    """No URL, link, script, external font or image: only the SVG namespace names a URI."""
    body = text.replace('xmlns="http://www.w3.org/2000/svg"', "", 1)
    for needle in (
        "http",
        "href",
        "url(",
        "@import",
        "@font-face",
        "<script",
        "<image",
        "<foreignObject",
        "//",
    ):
        assert needle not in body, needle


def dot_graph(text: str) -> Any:
    """The DOT text parsed by pydot: exactly one graph."""
    graphs = pydot.graph_from_dot_data(text)
    assert graphs is not None and len(graphs) == 1, text
    return graphs[0]


def dot_nodes(graph: Any) -> dict[str, Any]:
    """The node statements of a parsed DOT graph by unquoted name (not the `graph`/`node`/`edge` defaults)."""
    return {
        dot_unquote(n.get_name()): n
        for n in graph.get_nodes()
        if n.get_name() not in ("graph", "node", "edge")
    }


def dot_unquote(value: str) -> str:
    assert value.startswith('"') and value.endswith('"'), value
    return value[1:-1].replace('\\"', '"').replace("\\\\", "\\")


# --- every node and edge, in every format -------------------------------------------------------------


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples_render_every_node_and_edge_in_every_format(path: Path) -> None:
    graph = load_graph(path)
    drawn = diagram(graph)
    names = set(graph.spec.nodes)
    assert names <= {n.name for n in drawn.nodes}
    mermaid = render(graph, "mermaid")
    assert all(name in mermaid for name in names)
    assert mermaid.count("-->") + mermaid.count("-.->") == len(drawn.edges)
    parsed = dot_graph(render(graph, "dot"))
    assert set(dot_nodes(parsed)) == {n.name for n in drawn.nodes}
    assert len(parsed.get_edges()) == len(drawn.edges)
    svg = render(graph, "svg")
    root = svg_tree(svg)
    assert {n.element_id for n in drawn.nodes} == set(groups(root, "node"))
    assert {e.element_id for e in drawn.edges} == set(groups(root, "edge"))
    assert_self_contained(svg)


def test_every_node_type_is_drawn_distinctly() -> None:
    drawn = build_diagram(spec_of(EVERY_KIND))
    kinds = {n.name: n.kind for n in drawn.nodes}
    assert kinds == {
        "$start": "start",
        "fetch": "action",
        "retry_later": "gate",
        "fan": "foreach",
        "research": "parallel",
        "summarize": "subgraph",
        "approve": "pause",
        "route": "action",
        "done": "return",
        "$end": "end",
    }
    mermaid = to_mermaid(drawn)
    shapes = {
        "retry_later": "{{",
        "fan": "[/",
        "research": "[/",
        "summarize": "[[",
        "approve": ">",
        "done": "([",
    }
    for name, opening in shapes.items():
        assert re.search(rf'n\d+{re.escape(opening)}"{name}<br/>', mermaid), name
    parsed = dot_graph(to_dot(drawn))
    dot_shapes = {name: n.get("shape") for name, n in dot_nodes(parsed).items()}
    assert dot_shapes["retry_later"] == '"hexagon"'
    assert len({dot_shapes[n] for n in ("retry_later", "fan", "research", "approve", "fetch")}) == 5
    root = svg_tree(to_svg(drawn))
    nodes = groups(root, "node")
    for name, kind in kinds.items():
        element = drawn.node(name).element_id
        assert kind in classes(nodes[element])
        assert nodes[element].get("data-kind") == kind


def test_node_labels_say_what_the_node_runs() -> None:
    drawn = build_diagram(spec_of(EVERY_KIND))
    assert drawn.node("fetch").lines == ("fetch", "tool: echo")
    assert drawn.node("fan").lines == ("fan", "foreach ∥ url · tool: echo")
    assert drawn.node("research").lines == ("research", "parallel · wiki, web")
    assert drawn.node("summarize").lines == ("summarize", "subgraph · team/summarize")
    assert drawn.node("route").lines == ("route", "tool: echo", "next: fn mypkg.routing:choose")


def test_conditions_are_edge_labels_and_on_error_is_dashed() -> None:
    drawn = build_diagram(spec_of(EVERY_KIND))
    fetch = [e for e in drawn.edges if e.source == "fetch"]
    assert [(e.target, e.kind, e.label) for e in fetch] == [
        ("fan", "next", "result.status == 200"),
        ("$end", "next", "result.status == 404"),
        ("approve", "next", "default"),
        ("retry_later", "on_error", "on_error"),
    ]
    assert [e.style for e in fetch] == ["solid", "solid", "solid", "dashed"]
    mermaid = to_mermaid(drawn)
    assert re.search(r'n1 -\.->\|"on_error"\| n2', mermaid)
    assert 'n2 -->|"state.n #lt; 3"| n1' in mermaid  # < written as an entity code
    edges = dot_graph(to_dot(drawn)).get_edges()
    on_error = [e for e in edges if e.get("label") == '"on_error"']
    assert len(on_error) == 1 and on_error[0].get("style") == '"dashed"'
    root = svg_tree(to_svg(drawn))
    assert "on_error" in classes(groups(root, "edge")["edge-fetch-3"])


def test_structured_conditions_read_as_expressions() -> None:
    spec = spec_of("""
id: demo/structured
config: {start: a}
nodes:
  a:
    type: gate
    next:
      - to: b
        when: {all: [{path: state.x, op: gte, value: 3}, {not: {path: state.tags, op: contains, value: "no"}}]}
      - {to: b, when: {any: [{path: state.y, op: exists}, {path: state.z, op: in, value: [1, 2]}]}}
      - to: $end
  b: {type: return}
""")
    labels = [e.label for e in build_diagram(spec).edges if e.source == "a"]
    assert labels == [
        '(state.x >= 3) && (!(state.tags contains "no"))',
        "(state.y exists) || (state.z in [1, 2])",
        "default",
    ]


def test_start_and_end_are_drawn_with_explicit_and_implicit_ends() -> None:
    spec = spec_of("""
id: demo/ends
config: {start: a}
nodes:
  a: {type: gate, next: [{to: $end, when: "state.stop == true"}, {to: b}]}
  b: {action: {tool: echo}}
""")
    drawn = build_diagram(spec)
    edges = [(e.source, e.target, e.kind) for e in drawn.edges]
    assert edges == [
        ("$start", "a", "start"),
        ("a", "$end", "next"),
        ("a", "b", "next"),
        ("b", "$end", "end"),
    ]
    assert [e.element_id for e in drawn.edges] == ["edge-start", "edge-a-0", "edge-a-1", "edge-b-0"]
    assert drawn.nodes[0].element_id == "graph-start" and drawn.nodes[-1].element_id == "graph-end"


def test_an_edge_to_a_node_that_does_not_exist_is_drawn_as_missing() -> None:
    spec = spec_of("""
id: demo/dangling
config: {start: a}
nodes:
  a: {type: gate, next: nowhere}
""")
    drawn = build_diagram(spec)
    missing = [n for n in drawn.nodes if n.kind == "missing"]
    assert [(n.element_id, n.lines) for n in missing] == [
        ("missing-nowhere", ("nowhere", "not in the graph"))
    ]
    assert "missing-nowhere" in groups(svg_tree(to_svg(drawn)), "missing")


def test_a_graph_without_start_has_no_start_marker() -> None:
    drawn = build_diagram(spec_of("id: demo/no-start\nnodes:\n  a: {type: return}\n"))
    assert [n.name for n in drawn.nodes] == ["a", "$end"]
    assert "graph-start" not in groups(svg_tree(to_svg(drawn)), "node")


# --- a run painted ---------------------------------------------------------------------------------


def test_a_run_paints_its_path_its_failed_step_and_its_edges(graph_of: Any) -> None:
    graph = load_graph(REPO / "graphs/branching.yaml")
    result = graph.invoke_sync({"score": 20})  # grade -> review (fails) -> recover -> done
    drawn = diagram(graph, run=result)
    assert drawn.run is not None and drawn.run.status == "completed"
    assert drawn.node("review").failed and drawn.node("review").visits == 1
    assert drawn.node("publish").visits == 0
    taken = {(e.source, e.target, e.kind) for e in drawn.edges if e.taken}
    assert taken == {
        ("$start", "grade", "start"),
        ("grade", "review", "next"),
        ("review", "recover", "on_error"),
        ("recover", "done", "next"),
        ("done", "$end", "end"),
    }
    root = svg_tree(render(graph, "svg", run=result))
    assert root.get("data-run-id") == result.run_id and root.get("data-run-status") == "completed"
    nodes, edges = groups(root, "node"), groups(root, "edge")
    assert classes(nodes["node-review"]) == {"node", "action", "visited", "failed"}
    assert classes(nodes["node-publish"]) == {"node", "action"}
    assert {"edge", "on_error", "taken"} == classes(edges["edge-review-1"])
    assert set(groups(root, "taken")) == {e.element_id for e in drawn.edges if e.taken}


def test_draw_mermaid_paints_a_run_as_langgraph_users_expect() -> None:
    graph = load_graph(REPO / "graphs/branching.yaml")
    assert graph.draw_mermaid().startswith('---\ntitle: "examples/branching"\n---\nflowchart TD\n')
    result = graph.invoke_sync({"score": 20})
    text = graph.draw_mermaid(result)
    ids = dict(re.findall(r'^    (n\d+)\S*?"(\w+)', text, re.M))
    assert f"class {next(i for i, n in ids.items() if n == 'review')} failed" in text
    assert re.search(r"^    linkStyle [\d,]+ stroke:#2563eb", text, re.M)


def test_a_paused_run_marks_its_current_node() -> None:
    graph = parse_graph(PAUSING)
    result = graph.invoke_sync()
    assert result.status == "paused"
    drawn = diagram(graph, run=result)
    assert drawn.node("wait_here").current and not drawn.node("b").visits
    root = svg_tree(to_svg(drawn))
    assert "current" in classes(groups(root, "node")["node-wait_here"])
    assert "class n2 current" in to_mermaid(drawn)
    parsed = dot_graph(to_dot(drawn))
    node = dot_nodes(parsed)["wait_here"]
    assert "current" in dot_unquote(node.get("class")).split()


def test_on_error_and_next_to_the_same_node_tell_which_was_taken() -> None:
    graph = parse_graph(SAME_TARGET)
    result = graph.invoke_sync()
    drawn = diagram(graph, run=result)
    taken = [(e.kind, e.taken) for e in drawn.edges if e.source == "try_it"]
    assert taken == [("next", False), ("on_error", True)]


def test_visits_of_a_loop_are_counted() -> None:
    trace = RunTrace.build(
        run_id="r1",
        status="running",
        node="fetch",
        path=["fetch", "retry_later", "fetch", "retry_later", "fetch"],
        records=[
            {"node": "fetch", "status": "error", "next_node": "retry_later"},
            {"node": "retry_later", "status": "ok", "next_node": "fetch"},
        ],
    )
    drawn = build_diagram(spec_of(EVERY_KIND), trace)
    assert drawn.node("fetch").visits == 3 and drawn.node("fetch").current and drawn.node("fetch").failed
    badge = [g for g in svg_tree(to_svg(drawn)).iter(f"{SVG}g") if g.get("class") == "visits"]
    assert [next(g.iter(f"{SVG}text")).text for g in badge] == [f"{TIMES}3", f"{TIMES}2"]


def test_a_routing_functions_choices_are_drawn_dotted_when_a_run_took_them() -> None:
    trace = RunTrace.build(
        run_id="r2",
        status="completed",
        node=None,
        path=["route", "done"],
        records=[{"node": "route", "status": "ok", "next_node": "done"}, {"node": "done", "status": "end"}],
    )
    drawn = build_diagram(spec_of(EVERY_KIND), trace)
    dynamic = [e for e in drawn.edges if e.kind == "dynamic"]
    assert [(e.source, e.target, e.style, e.taken) for e in dynamic] == [("route", "done", "dotted", True)]
    assert "route" not in {e.source for e in build_diagram(spec_of(EVERY_KIND)).edges}


def test_a_trace_read_in_part_falls_back_on_the_path() -> None:
    records = [{"node": "a", "status": "ok", "next_node": "b"}] * 5
    trace = RunTrace.build(
        run_id="r", status="completed", node=None, path=["a", "b", "c"], records=records, max_records=3
    )
    assert not trace.complete and trace.records_read == 3
    assert trace.transitions == {("a", "b", "ok"), ("b", "c", None), ("c", "$end", None)}
    spec = spec_of("""
id: demo/abc
config: {start: a}
nodes:
  a: {type: gate, next: b}
  b: {type: gate, next: c}
  c: {type: return}
""")
    drawn = build_diagram(spec, trace)
    assert all(e.taken for e in drawn.edges)
    assert drawn.notes == ("only the first 3 transcript records were read",)


# --- big and hostile input -------------------------------------------------------------------------


def chain(count: int) -> str:
    """A graph of `count` gates in a row, each looping back to the first when a flag is set."""
    nodes = "\n".join(
        f"  g{i}: {{type: gate, next: [{{to: g0, when: 'state.again == true'}}, {{to: g{i + 1}}}]}}"
        for i in range(count - 1)
    )
    return f"id: demo/chain\nconfig: {{start: g0}}\nnodes:\n{nodes}\n  g{count - 1}: {{type: return}}\n"


def chain_spec(count: int) -> GraphSpec:
    """`chain(count)` as a model built directly (parsing 2,000 nodes of YAML takes seconds)."""
    nodes: dict[str, Any] = {
        f"g{i}": {"type": "gate", "next": [{"to": "g0", "when": "state.again == true"}, {"to": f"g{i + 1}"}]}
        for i in range(count - 1)
    }
    nodes[f"g{count - 1}"] = {"type": "return"}
    return GraphSpec.model_validate({"id": "demo/chain", "config": {"start": "g0"}, "nodes": nodes})


def test_a_huge_graph_is_capped_and_says_so() -> None:
    spec = chain_spec(2000)
    drawn = build_diagram(spec)
    graph_nodes = [n for n in drawn.nodes if n.kind == "gate"]
    assert len(graph_nodes) == MAX_NODES
    assert drawn.node("$more").element_id == "graph-more"
    assert drawn.notes == (f"{MAX_NODES} of 2000 nodes drawn; the others stand behind '… more'",)
    svg = to_svg(drawn)
    root = svg_tree(svg)
    assert len(groups(root, "node")) == MAX_NODES + 2  # and start and more: the end is behind more
    assert len(svg) < 2_000_000
    assert "n0" in to_mermaid(drawn)


def test_a_huge_run_keeps_the_nodes_it_visited() -> None:
    spec = chain_spec(500)
    path = [f"g{i}" for i in range(0, 500, 3)]  # every third node: 167 of them, far past the first 10
    trace = RunTrace.build(run_id="r", status="running", node="g498", path=path * 50)
    drawn = build_diagram(spec, trace, max_nodes=170)
    assert {n.name for n in drawn.nodes} >= set(path)
    assert drawn.node("g498").current and drawn.node("g3").visits == 50


def test_a_node_with_many_branches_draws_a_few_and_every_taken_one() -> None:
    branches = "\n".join(f"      - {{to: t{i}, when: 'state.k == {i}'}}" for i in range(60))
    targets = "\n".join(f"  t{i}: {{type: return}}" for i in range(60))
    spec = spec_of(
        f"id: demo/wide\nconfig: {{start: a}}\nnodes:\n  a:\n    type: gate\n    next:\n{branches}\n{targets}\n"
    )
    trace = RunTrace.build(
        run_id="r",
        status="completed",
        node=None,
        path=["a", "t42"],
        records=[{"node": "a", "next_node": "t42"}],
    )
    drawn = build_diagram(spec, trace)
    out_of_a = [e for e in drawn.edges if e.source == "a"]
    assert len(out_of_a) == MAX_BRANCHES + 1
    assert out_of_a[-1].target == "t42" and out_of_a[-1].taken
    assert out_of_a[-1].element_id == "edge-a-42"  # ids are given before branches are left out
    assert drawn.notes == (f"node 'a': {MAX_BRANCHES} of its 60 branches drawn",)


def test_long_labels_are_cut() -> None:
    long_name = "n" + "x" * 300
    condition = " && ".join(f"state.field_{i} == {i}" for i in range(40))
    spec = spec_of(f"""
id: demo/long
config: {{start: {long_name}}}
nodes:
  {long_name}:
    type: gate
    next: [{{to: b, when: "{condition}"}}, {{to: b}}]
  b: {{type: return}}
""")
    drawn = build_diagram(spec)
    assert all(len(line) <= 48 for n in drawn.nodes for line in n.lines)
    assert all(e.label is None or len(e.label) <= 48 for e in drawn.edges)
    assert drawn.edges[1].label is not None and drawn.edges[1].label.endswith("…")
    assert node_size(drawn.nodes[1])[0] < 500


def test_hostile_text_is_escaped_in_every_format() -> None:
    nasty = 'a "quoted" <script>alert(1)</script> & \\back\\slash # `tick`'
    spec = spec_of(f"""
id: 'demo/"odd" <id> & \\\\'
description: x
config: {{start: a}}
nodes:
  a:
    type: gate
    description: {json.dumps(nasty)}
    next: [{{to: b, when: {json.dumps("state.s == '" + nasty.replace("'", "") + "'")}}}, {{to: b}}]
  b: {{type: return}}
""")
    drawn = build_diagram(spec)
    svg = to_svg(drawn)
    root = svg_tree(svg)  # parses: nothing leaked into markup
    assert "<script" not in svg and root.get("data-graph-id") == spec.id
    label = next(g for g in root.iter(f"{SVG}g") if g.get("class") == "label")
    assert "<script>" in "".join(label.itertext())  # as text, escaped
    assert_self_contained(svg)
    parsed = dot_graph(to_dot(drawn))
    assert dot_unquote(parsed.get_name()) == spec.id
    edge = next(e for e in parsed.get_edges() if e.get("label") not in (None, '"default"'))
    assert dot_unquote(edge.get("label")) == drawn.edges[1].label
    mermaid = to_mermaid(drawn)
    edge_line = next(line for line in mermaid.splitlines() if "-->|" in line and "default" not in line)
    inside = edge_line.split('|"', 1)[1].rsplit('"|', 1)[0]
    assert '"' not in inside and "<" not in inside and "`" not in inside


def test_svg_ids_are_unique_and_stable() -> None:
    spec = spec_of(EVERY_KIND)
    first, second = to_svg(build_diagram(spec)), to_svg(build_diagram(spec))
    assert first == second
    ids = [e.get("id") for e in svg_tree(first).iter() if e.get("id")]
    assert len(ids) == len(set(ids))


# --- the layout ------------------------------------------------------------------------------------


def overlaps(a: Any, b: Any) -> bool:
    return abs(a.x - b.x) < (a.width + b.width) / 2 and abs(a.y - b.y) < (a.height + b.height) / 2


@pytest.mark.parametrize("text", [EVERY_KIND, chain(40), PAUSING], ids=["every-kind", "chain", "pausing"])
def test_layout_boxes_never_overlap_and_edges_run_from_border_to_border(text: str) -> None:
    drawn = build_diagram(spec_of(text))
    sizes = {n.name: node_size(n) for n in drawn.nodes}
    labels = [label_size(e.label) if e.label else None for e in drawn.edges]
    layout = layered(sizes, [(e.source, e.target) for e in drawn.edges], labels, last=["$end"])
    boxes = list(layout.boxes.values())
    assert not any(overlaps(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])
    assert all(b.x - b.width / 2 >= 0 and b.x + b.width / 2 <= layout.width for b in boxes)
    assert layout.boxes["$end"].y == max(b.y for b in boxes)
    for edge, route in zip(drawn.edges, layout.routes, strict=True):
        source, target = layout.boxes[edge.source], layout.boxes[edge.target]
        assert abs(route.points[0][1] - source.y) <= source.height / 2 + 0.01
        assert abs(route.points[-1][1] - target.y) <= target.height / 2 + 0.01


def test_layout_of_a_tree_has_no_crossings_and_flows_down() -> None:
    sizes = {n: (60.0, 30.0) for n in ("root", "a", "b", "a1", "a2", "b1", "b2")}
    edges = [("root", "a"), ("root", "b"), ("a", "a1"), ("a", "a2"), ("b", "b1"), ("b", "b2")]
    layout = layered(sizes, edges)
    box = layout.boxes
    assert box["root"].y < box["a"].y == box["b"].y < box["a1"].y
    xs = [box[n].x for n in ("a1", "a2", "b1", "b2")]
    assert xs == sorted(xs) or xs == sorted(xs, reverse=True)
    assert all(r.points[0][1] < r.points[-1][1] for r in layout.routes)


def test_layout_draws_a_loop_back_up_and_a_self_loop_beside_its_node() -> None:
    sizes = {n: (60.0, 30.0) for n in ("a", "b", "c")}
    layout = layered(sizes, [("a", "b"), ("b", "c"), ("c", "a"), ("b", "b")])
    back, loop = layout.routes[2], layout.routes[3]
    assert back.points[0][1] < layout.boxes["c"].y and back.points[-1][1] > layout.boxes["a"].y
    assert loop.loop and min(x for x, _ in loop.points) >= layout.boxes["b"].x + 30


# --- the API and the command -----------------------------------------------------------------------


def test_render_refuses_an_unknown_format_and_a_bad_cap() -> None:
    graph = load_graph(REPO / "graphs/hello.yaml")
    with pytest.raises(GraphrunnerError, match="unknown render format 'png'; use one of mermaid, dot, svg"):
        render(graph, "png")  # type: ignore[arg-type]
    with pytest.raises(GraphrunnerError, match="max_nodes must be at least 1"):
        render(graph, max_nodes=0)


def test_the_command_knows_the_formats_and_cap_of_the_package() -> None:
    assert render_cli.FORMATS == FORMATS
    assert render_cli.MAX_NODES == MAX_NODES


def cli(*args: str, env: dict[str, str | None] | None = None) -> Any:
    env = {"GRAPHRUNNER_REDIS_URL": None, **(env or {})}
    return CliRunner().invoke(main, list(args), env=env)


@pytest.mark.parametrize("fmt", FORMATS)
def test_render_command_writes_each_format(fmt: str, tmp_path: Path) -> None:
    out = cli("render", "graphs/branching.yaml", "--format", fmt)
    assert out.exit_code == 0, out.stderr
    assert out.stdout == render(load_graph(REPO / "graphs/branching.yaml"), fmt)  # type: ignore[arg-type]
    target = tmp_path / f"drawing.{fmt}"
    written = cli("render", "graphs/branching.yaml", "--format", fmt, "-o", str(target))
    assert written.exit_code == 0 and written.stdout == ""
    assert target.read_text(encoding="utf-8") == out.stdout


def test_render_command_json_is_the_diagram() -> None:
    out = cli("render", "graphs/hello.yaml", "--json")
    data = json.loads(out.stdout)
    expected: Diagram = diagram(load_graph(REPO / "graphs/hello.yaml"))
    assert data == expected.to_dict()
    assert {"name", "id", "kind", "label", "classes"} <= set(data["nodes"][0])


def test_render_command_without_graph_or_run_is_a_usage_error() -> None:
    out = cli("render")
    assert out.exit_code == 2
    assert out.stderr == "error: give GRAPH, --run RUN, or both (graphrunner render --help)\n"


def test_render_command_bad_graphs(tmp_path: Path) -> None:
    missing = cli("render", str(tmp_path / "missing.yaml"))
    assert missing.exit_code == 2 and "missing.yaml" in missing.stderr and "Traceback" not in missing.output
    broken = tmp_path / "broken.yaml"
    broken.write_text("id: x\nnodes: [unclosed\n", encoding="utf-8")
    out = cli("render", str(broken))
    assert out.exit_code == 2 and out.stdout == ""
    assert "invalid_yaml" in out.stderr and f"graph {str(broken)!r} is invalid (1 error)" in out.stderr


def test_render_command_draws_a_graph_that_fails_validation_as_written(tmp_path: Path) -> None:
    dangling = tmp_path / "dangling.yaml"
    dangling.write_text("config: {start: a}\nnodes:\n  a: {type: gate, next: nowhere}\n", encoding="utf-8")
    out = cli("render", str(dangling), "--format", "svg")
    assert out.exit_code == 0
    assert (
        out.stderr
        == f"warning: graph {str(dangling)!r} has 1 error (graphrunner validate): drawn as written\n"
    )
    assert "missing-nowhere" in groups(svg_tree(out.stdout), "node")


def test_render_command_caps_nodes_and_notes_it(tmp_path: Path) -> None:
    path = tmp_path / "chain.yaml"
    path.write_text(chain(300), encoding="utf-8")
    out = cli("render", str(path), "--max-nodes", "25")
    assert out.exit_code == 0
    assert out.stderr == "note: 25 of 300 nodes drawn; the others stand behind '… more'\n"
    assert cli("render", str(path), "--max-nodes", "0").exit_code == 2


def test_render_command_with_a_run_needs_the_store() -> None:
    out = cli("render", "--run", "some-run")
    assert out.exit_code == 2 and out.stderr.startswith("error: GRAPHRUNNER_REDIS_URL is not set")


def test_render_command_loads_no_cluster_module() -> None:
    code = (
        "import sys\nfrom graphrunner.cli import main\n"
        "sys.argv = ['graphrunner', 'render', 'graphs/hello.yaml', '--format', 'svg']\n"
        "try:\n    main()\nexcept SystemExit as exc:\n    assert exc.code in (0, None)\n"
        "print(sorted(m for m in ('celery', 'kombu', 'redis', 'graphrunner.client') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.rstrip().endswith("[]")


def test_graph_draw_mermaid_is_typed_on_graph() -> None:
    assert Graph.draw_mermaid.__annotations__["return"] == "str"


# --- Graphviz itself takes the DOT -------------------------------------------------------------------

HOSTILE = """
id: 'demo/"odd" <id> & \\\\'
config: {start: a}
nodes:
  a:
    type: gate
    description: 'a "quoted" <script> & \\\\back\\\\slash # `tick` ; } {'
    next: [{to: b, when: "state.s == 'x \\\\\\" y'"}, {to: b}]
  b: {type: return}
"""


def graphviz() -> str:
    """Graphviz's `dot` (`make test` installs Debian's graphviz when it is missing)."""
    found = shutil.which("dot")
    assert found, "Graphviz's dot is missing: apt-get install graphviz (make test does it as root)"
    return found


@pytest.mark.parametrize(
    "source",
    [*EXAMPLES, EVERY_KIND, HOSTILE],
    ids=[*(p.name for p in EXAMPLES), "every-kind", "hostile"],
)
def test_graphviz_lays_out_the_dot_without_a_complaint(source: Path | str) -> None:
    drawn = diagram(load_graph(source)) if isinstance(source, Path) else build_diagram(spec_of(source))
    done = subprocess.run(
        [graphviz(), "-Tsvg"], input=to_dot(drawn), capture_output=True, text=True, timeout=60, check=False
    )
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    # Graphviz titles the graph, then every node and every edge it laid out
    assert done.stdout.count("<title>") == 1 + len(drawn.nodes) + len(drawn.edges)
