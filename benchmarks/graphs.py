"""The graphs graphrunner runs in the benchmarks: loops of no-op steps, `inputs.limit` steps long
(benchmarks.steps), one parallel foreach fan-out over `inputs.items` (benchmarks.foreach) and a
3-node linear graph of no-op steps (benchmarks.latency)."""

from __future__ import annotations

from graphrunner.graph import Graph
from graphrunner.loading import parse_graph
from graphrunner.settings import Settings

MAX_STEPS = 1_000_000

GATE_LOOP = f"""
id: bench/gate-loop
version: "1"
description: A gate that counts and routes back to itself until n reaches the limit
inputs:
  limit: {{type: integer, required: true}}
state:
  n: {{type: integer, default: 0}}
config:
  start: tick
  max_steps: {MAX_STEPS}
nodes:
  tick:
    type: gate
    assign: {{n: "${{state.n + 1}}"}}
    next:
      - to: tick
        when: state.n < inputs.limit
      - to: $end
"""

ECHO_LOOP = f"""
id: bench/echo-loop
version: "1"
description: An echo action that counts and routes back to itself until n reaches the limit
inputs:
  limit: {{type: integer, required: true}}
state:
  n: {{type: integer, default: 0}}
config:
  start: tick
  max_steps: {MAX_STEPS}
nodes:
  tick:
    action: {{tool: echo, params: {{n: "${{state.n + 1}}"}}}}
    assign: {{n: "${{result.n}}"}}
    next:
      - to: tick
        when: state.n < inputs.limit
      - to: $end
"""

GRAPHS = {"gate": GATE_LOOP, "echo": ECHO_LOOP}

FOREACH_FANOUT = """
id: bench/foreach-fanout
version: "1"
description: One parallel foreach, an echo per item, the results collected into state.results
inputs:
  items: {type: list, required: true}
state:
  results: {type: list, default: [], reducer: last_write_wins}
config:
  start: fan_out
nodes:
  fan_out:
    type: foreach
    over: "${inputs.items}"
    parallel: true
    action: {tool: echo, params: {i: "${item}"}}
    collect: results
    next: $end
"""

THREE_NODES = """
id: bench/three-nodes
version: "1"
description: Three no-op steps in a line (a gate, an echo action, a return) for submit-to-result latency
inputs:
  x: {type: integer, default: 0}
state:
  n: {type: integer, default: 0}
config:
  start: gate
nodes:
  gate:
    type: gate
    assign: {n: "${inputs.x + 1}"}
    next: echo
  echo:
    action: {tool: echo, params: {n: "${state.n + 1}"}}
    assign: {n: "${result.n}"}
    next: done
  done:
    type: return
    output: {n: "${state.n}"}
"""
THREE_NODES_STEPS = 3
THREE_NODES_OUTPUT = {"n": 2}  # with the default input x = 0


def load(kind: str, settings: Settings) -> Graph:
    """The compiled loop graph of one kind (`gate` or `echo`)."""
    return parse_graph(GRAPHS[kind], file=f"<bench:{kind}>", settings=settings)


def load_foreach(settings: Settings) -> Graph:
    """The compiled foreach fan-out graph."""
    return parse_graph(FOREACH_FANOUT, file="<bench:foreach>", settings=settings)


def load_three_nodes(settings: Settings) -> Graph:
    """The compiled 3-node linear graph (gate, echo, return)."""
    return parse_graph(THREE_NODES, file="<bench:three-nodes>", settings=settings)
