"""Graphs with parallel nodes and foreach over a graph, shared by the in-process tests
(tests/unit/test_parallel_and_foreach_graph.py) and the cluster tests
(tests/integration/test_parallel_cluster.py)."""

from __future__ import annotations

import textwrap
from pathlib import Path

CHILDREN = {
    # the branch listed first finishes last: it sleeps before it writes
    "slow.yaml": """
        id: slow
        inputs: {query: {type: string}}
        state: {hits: {type: list, default: []}, log: {type: list, default: [], reducer: append}, winner: {}}
        config: {start: wait}
        nodes:
          wait: {action: {tool: sleep, params: {seconds: 0.2}}, next: write}
          write: {type: gate, assign: {hits: ["slow:${inputs.query}"], log: [slow], winner: slow}}
        """,
    "fast.yaml": """
        id: fast
        inputs: {query: {type: string}}
        state: {hits: {type: list, default: []}, log: {type: list, default: [], reducer: append}, winner: {}}
        config: {start: write}
        nodes:
          write: {type: gate, assign: {hits: ["fast:${inputs.query}"], log: [fast], winner: fast}}
        """,
    "broken.yaml": """
        id: broken
        inputs: {query: {type: string}}
        config: {start: boom}
        nodes:
          boom: {action: {tool: fail, params: {message: the source is down}}}
        """,
    "forever.yaml": """
        id: forever
        inputs: {query: {type: string}}
        config: {start: nap}
        nodes:
          nap: {action: {tool: sleep, params: {seconds: 90}}}
        """,
    "summarise.yaml": """
        id: summarise
        inputs: {doc: {type: string}, position: {type: integer}}
        config: {start: check}
        nodes:
          check:
            type: gate
            next: [{to: bad, when: "inputs.doc == 'bad'"}, {to: done}]
          bad: {action: {tool: fail, params: {message: "cannot read ${inputs.doc}"}}}
          done: {type: return, output: "${string(inputs.position) + ':' + inputs.doc}"}
        """,
    "fanin.yaml": """
        id: fanin
        inputs: {doc: {type: string}}
        state: {log: {type: list, default: [], reducer: append}}
        config: {start: both}
        nodes:
          both:
            type: parallel
            branches:
              a: {graph: fast, inputs: {query: "${inputs.doc}"}, outputs: {log: log}}
              b: {graph: slow, inputs: {query: "${inputs.doc}"}, outputs: {log: log}}
            next: done
          done: {type: return, output: "${state.log}"}
        """,
}

PARENT = """
id: research
state:
  query: {type: string, default: cats}
  slow_hits: {type: list, default: []}
  fast_hits: {type: list, default: []}
  log: {type: list, default: [], reducer: append}
  winner: {type: string}
  problems: {type: list, default: []}
config: {start: research}
nodes:
  research:
    type: parallel
    branches:
      slow: {graph: slow, inputs: {query: query}, outputs: {slow_hits: hits, log: log, winner: winner}}
      fast: {graph: fast, inputs: {query: query}, outputs: {fast_hits: hits, log: log, winner: winner}}
    next: done
  done: {type: return}
"""


def folder(tmp_path: Path) -> Path:
    for name, text in CHILDREN.items():
        (tmp_path / name).write_text(textwrap.dedent(text))
    return tmp_path


FOREACH = """
id: per-doc
state: {docs: {type: list}, summaries: {type: list, default: []}}
config: {start: each}
nodes:
  each:
    type: foreach
    over: "${state.docs}"
    as: doc
    parallel: PARALLEL
    graph: summarise
    inputs: {doc: "${doc}", position: "${index}"}
    collect: summaries
    tolerated_failures: 1
  """

# an empty fan-out: the gate refuses an empty list (`size(...) < 0` never does)
EMPTY_GUARDED = """
id: guarded
state: {docs: {type: list}, summaries: {type: list, default: []}, seen: {}}
config: {start: any_left}
nodes:
  any_left: {type: gate, next: [{to: none_left, when: "size(state.docs) == 0"}, {to: each}]}
  none_left: {type: return, output: nothing to do}
  each:
    type: foreach
    over: "${state.docs}"
    as: doc
    graph: summarise
    inputs: {doc: "${doc}", position: "${index}"}
    collect: summaries
    result_key: seen
    next: done
  done: {type: return, output: "${state.seen}"}
"""
