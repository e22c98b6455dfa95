"""Graphs whose child runs pause (a subgraph's, a parallel branch, a foreach child, two levels
deep), shared by the in-process tests (tests/unit/test_pause_below.py) and the cluster tests
(tests/integration/test_pause_below_cluster.py)."""

from __future__ import annotations

import textwrap
from pathlib import Path

GRAPHS = {
    # pauses when asked to; on resume, `approved` picks the verdict
    "ask.yaml": """
        id: ask
        inputs: {doc: {type: string, default: x}}
        state: {approved: {type: boolean, default: false}, verdict: {type: string}}
        config: {start: check}
        nodes:
          check: {type: gate, next: [{to: ask, when: "inputs.doc == 'ask'"}, {to: good}]}
          ask: {type: pause, message: "approve ${inputs.doc}?", next: [{to: good, when: "state.approved"}, {to: bad}]}
          bad: {type: return, assign: {verdict: rejected}, output: rejected}
          good: {type: return, assign: {verdict: approved}, output: "${inputs.doc}"}
        """,
    "quick.yaml": """
        id: quick
        state: {other: {type: string}}
        config: {start: write}
        nodes:
          write: {type: gate, assign: {other: quick}}
        """,
    "sub.yaml": """
        id: sub
        state: {verdict: string, doc: {type: string, default: ask}}
        config: {start: inner}
        nodes:
          inner: {type: subgraph, graph: ask, inputs: {doc: doc}, outputs: {verdict: verdict}, next: done}
          done: {type: return, output: "${state.verdict}"}
        """,
    "branches.yaml": """
        id: branches
        state: {verdict: string, other: string, doc: {type: string, default: ask}}
        config: {start: fan}
        nodes:
          fan:
            type: parallel
            branches:
              quick: {graph: quick, outputs: {other: other}}
              asker: {graph: ask, inputs: {doc: doc}, outputs: {verdict: verdict}}
            next: done
          done: {type: return, output: {verdict: "${state.verdict}", other: "${state.other}"}}
        """,
    "items.yaml": """
        id: items
        state: {docs: {type: list, default: [a, ask, c]}, done: {type: list, default: []}}
        config: {start: each}
        nodes:
          each: {type: foreach, over: "${state.docs}", as: doc, graph: ask, inputs: {doc: "${doc}"}, collect: done}
        """,
    "deep.yaml": """
        id: deep
        state: {verdict: string}
        config: {start: outer}
        nodes:
          outer: {type: subgraph, graph: sub, outputs: {verdict: verdict}, next: done}
          done: {type: return, output: "${state.verdict}"}
        """,
}


def folder(tmp_path: Path) -> Path:
    """`tmp_path` with every graph above written into it."""
    for name, text in GRAPHS.items():
        (tmp_path / name).write_text(textwrap.dedent(text))
    return tmp_path
