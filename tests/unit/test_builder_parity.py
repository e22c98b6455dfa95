"""`GraphBuilder` expresses what YAML can (issue 17, builder parity): foreach, pause, return
with output, hooks, and retries and timeouts on nodes, written as the same graph document."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from builder_targets import Docs, forgive, measure, noted, watch

from graphrunner import GraphValidationError
from graphrunner.builder import GraphBuilder


def foreach_graph(graph_id: str, parallel: bool = False) -> GraphBuilder[Docs]:
    return (
        GraphBuilder(Docs, id=graph_id)
        .add_foreach(
            "measure",
            measure,
            over="docs",
            collect="lengths",
            parallel=parallel,
            max_concurrency=2 if parallel else None,
        )
        .add_return("done", output={"lengths": "lengths", "count": "${size(state.lengths)}"})
        .add_edge("measure", "done")
        .set_entry("measure")
    )


@pytest.mark.parametrize("parallel", [False, True])
def test_foreach_collects_in_item_order_and_return_has_its_output(parallel: bool) -> None:
    graph = foreach_graph(f"parity/foreach-{parallel}", parallel).compile()
    result = graph.invoke_sync(state={"docs": ["a", "bbb", "cc"]})
    assert (result.status, result.path) == ("completed", ["measure", "done"])
    assert result.output == {"lengths": [10, 31, 22], "count": 3}
    node = yaml.safe_load(graph.text)["nodes"]["measure"]
    assert (node["type"], node["over"], node.get("parallel", False)) == ("foreach", "${state.docs}", parallel)
    assert node["action"]["params"]["args"] == {"item": "${item}", "index": "${index}"}


def test_a_foreach_error_is_handled_like_a_graph_files() -> None:
    graph = (
        GraphBuilder(Docs, id="parity/tolerated")
        .add_foreach("measure", measure, over="${state.docs}", collect="lengths", tolerated_failures=1)
        .set_entry("measure")
        .compile()
    )
    result = graph.invoke_sync(state={"docs": ["a", "boom"]})
    assert result.status == "completed"
    assert result.state["lengths"][0] == 10
    refused = graph.invoke_sync(state={"docs": ["boom", "boom"]})
    assert refused.status == "failed" and "item 0 is boom" in refused.error.message


def test_pause_parks_the_run_with_its_message() -> None:
    graph = (
        GraphBuilder(Docs, id="parity/pause")
        .add_pause("approve", message="approve the note?")
        .add_node("noted", noted)
        .add_edge("approve", "noted")
        .set_entry("approve")
        .compile()
    )
    result = graph.invoke_sync(state={"note": "n"})
    assert (result.status, result.path) == ("paused", ["approve"])
    assert yaml.safe_load(graph.text)["nodes"]["approve"] == {
        "type": "pause",
        "message": "approve the note?",
        "next": "noted",
    }


def test_hooks_observe_and_an_error_hook_answers() -> None:
    graph = (
        GraphBuilder(Docs, id="parity/hooks", error_mode="fail")
        .add_foreach("measure", measure, over="docs", collect="lengths")
        .add_return("done", output="lengths")
        .add_edge("measure", "done")
        .add_hook("after_step", watch, when="event.node == 'measure'")
        .add_hook("error", forgive)
        .set_entry("measure")
        .compile()
    )
    hooks = yaml.safe_load(graph.text)["config"]["hooks"]
    assert hooks[0]["when"] == "event.node == 'measure'"
    assert hooks[0]["action"]["params"]["args"] == {"event": "${event}", "state": "${state}"}
    assert hooks[1]["action"]["params"]["args"] == {"event": "${event}"}
    result = graph.invoke_sync(state={"docs": ["boom"]})
    assert (result.status, result.errors_suppressed) == ("completed_with_errors", 1)  # the hook's continue
    assert result.path == ["measure", "done"]


def test_retry_and_timeout_on_a_foreach_are_written_as_in_a_graph_file() -> None:
    graph = (
        GraphBuilder(Docs, id="parity/retry")
        .add_foreach(
            "measure", measure, over="docs", retry={"max_attempts": 2, "on": ["permanent"]}, timeout=5
        )
        .set_entry("measure")
        .compile()
    )
    node = graph.spec.nodes["measure"]
    assert node.timeout == 5 and node.retry is not None and node.retry[0].max_attempts == 2
    result = graph.invoke_sync(state={"docs": ["boom"]})
    assert result.status == "failed" and result.steps[-1]["attempts"] == 2


def not_importable_inner() -> GraphBuilder[Docs]:
    def inner(item: str) -> int:
        return 0

    return GraphBuilder(Docs, id="parity/bad").add_foreach("m", inner, over="docs").set_entry("m")


def test_bad_builder_input_is_reported_where_it_is() -> None:
    with pytest.raises(GraphValidationError) as caught:
        not_importable_inner().compile()
    assert "node 'm': the foreach function" in str(caught.value)
    with pytest.raises(GraphValidationError) as caught:
        foreach_graph("parity/edge").add_edge("done", "measure").compile()
    assert "dangling_edge" in caught.value.codes
    assert "a return node" in str(caught.value)
    with pytest.raises(GraphValidationError) as caught:
        GraphBuilder(Docs, id="parity/hook").add_return("r").add_hook("error", lambda e: None).set_entry(
            "r"
        ).compile()
    assert "config.hooks.0: the hook function" in str(caught.value)


def research_graph() -> Any:
    from builder_targets import Research, Shout, Source, search_web, search_wiki, shout

    from graphrunner.builder import branch

    wiki = GraphBuilder(Source, id="parity/wiki").add_node("s", search_wiki).set_entry("s").compile()
    web = GraphBuilder(Source, id="parity/web").add_node("s", search_web).set_entry("s").compile()
    loud = GraphBuilder(Shout, id="parity/shout").add_node("s", shout).add_return("r", output="loud")
    loud_graph = loud.add_edge("s", "r").set_entry("s").compile()
    return (
        GraphBuilder(Research, id="parity/research")
        .add_parallel(
            "research",
            {
                "wiki": branch(wiki, inputs={"query": "query"}, outputs={"wiki_hits": "hits", "log": "log"}),
                "web": branch(web, inputs={"query": "query"}, outputs={"web_hits": "hits", "log": "log"}),
            },
        )
        .add_foreach(
            "each", loud_graph, over="docs", inputs={"doc": "${item}"}, collect="shouted", parallel=True
        )
        .add_edge("research", "each")
        .set_entry("research")
        .compile()
    )


def test_parallel_branches_and_foreach_over_a_graph_from_the_builder() -> None:
    graph = research_graph()
    result = graph.invoke_sync(state={"query": "cats", "docs": ["a", "b"]})
    assert result.status == "completed", result.error
    assert result.state["log"] == ["wiki", "web"]
    assert (result.state["wiki_hits"], result.state["web_hits"]) == (["wiki:cats"], ["web:cats"])
    assert result.state["shouted"] == ["A", "B"]
    nodes = yaml.safe_load(graph.text)["nodes"]
    assert nodes["research"]["branches"]["wiki"] == {
        "graph": "parity/wiki",
        "inputs": {"query": "query"},
        "outputs": {"wiki_hits": "hits", "log": "log"},
    }
    assert (nodes["each"]["graph"], nodes["each"]["inputs"]) == ("parity/shout", {"doc": "${item}"})


def test_a_foreach_function_takes_no_inputs() -> None:
    with pytest.raises(TypeError, match="inputs= only with a graph"):
        GraphBuilder(Docs, id="parity/x").add_foreach("m", measure, over="docs", inputs={"a": "b"})
