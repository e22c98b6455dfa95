"""The checks of what enters a run, on the cluster (issue 29, items 3 and 4): a tool's NaN fails
the step as `non_finite_number` with its path, a state nested past 64 levels fails it as
`limit_exceeded`, and a graph's `non_finite: "null"` reaches foreach items run by item tasks."""

from __future__ import annotations

import json
import textwrap

from support import uid

from graphrunner import parse_graph
from graphrunner.client import Client

NAN = '{"items": [1, {"score": NaN}]}'


def graph(body: str, config: str = "") -> str:
    return textwrap.dedent(f"""
        id: data/{uid()}
        state: {{x: {{type: any}}, r: {{type: any}}}}
        config: {{start: a{config}}}
        nodes:
    """) + textwrap.indent(textwrap.dedent(body), "  ")


def test_a_tool_result_with_nan_and_a_state_too_deep_fail_their_steps(cluster: Client) -> None:
    nan = graph(f"""
        a: {{action: {{tool: python, params: {{fn: 'json:loads', args: {{s: '{NAN}'}}}}}}, result_key: r}}
    """)
    deep = graph(
        """
        a: {type: gate, assign: {x: "${[state.x]}"}, next: a}
    """,
        ", max_steps: 100",
    )
    runs = [cluster.submit(parse_graph(text)) for text in (nan, deep)]
    first, second = (run.wait(timeout=60) for run in runs)
    assert first.status == "failed" and first.error is not None
    assert first.error.type == "non_finite_number" and first.error.node == "a"
    assert "result.items[1].score holds nan" in first.error.message
    assert second.status == "failed" and second.error is not None
    assert second.error.type == "limit_exceeded" and second.error.step == 65
    assert "state.x is nested more than 64 levels deep (the nesting limit)" in second.error.message
    for result in (first, second):
        json.dumps(result.to_dict(), allow_nan=False)


def test_non_finite_null_reaches_the_items_of_a_foreach(cluster: Client) -> None:
    text = graph(
        f"""
        a:
          type: foreach
          over: [1, 2]
          parallel: true
          action: {{tool: python, params: {{fn: 'json:loads', args: {{s: '{NAN}'}}}}}}
          collect: r
    """,
        ", non_finite: 'null'",
    )
    result = cluster.submit(parse_graph(text)).wait(timeout=60)
    assert result.status == "completed", result.error
    assert result.state["r"] == [{"items": [1, {"score": None}]}] * 2
