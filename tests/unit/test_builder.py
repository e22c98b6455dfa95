"""GraphBuilder: typed state with reducers, nodes, edges, subgraphs; compile errors; runs in-process."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import textwrap
import types
from typing import Annotated, Any

import builder_targets as t
import pytest
from pydantic import BaseModel

import graphrunner
from graphrunner import END, Graph, GraphBuilder, GraphValidationError, parse_graph
from graphrunner.builder import append, bounded_append, custom, merge, merge_by_key


def flow(**kwargs: Any) -> GraphBuilder[t.Flow]:
    return GraphBuilder(t.Flow, id="test/flow", **kwargs)


def compile_error(builder: GraphBuilder[Any]) -> GraphValidationError:
    with pytest.raises(GraphValidationError) as info:
        builder.compile()
    return info.value


def logged() -> GraphBuilder[t.Logged]:
    return GraphBuilder(t.Logged, id="test/logged")


# --- running -------------------------------------------------------------------------------


def test_a_compiled_graph_is_a_graph_run_by_invoke() -> None:
    graph = flow().add_node("first", t.first).add_node("second", t.second)
    graph = graph.add_edge("first", "second").add_edge("second", END).set_entry("first").compile()
    assert isinstance(graph, Graph)
    result = graph.invoke_sync(state={"topic": "cats"})
    assert result.status == "completed"
    assert result.path == ["first", "second"]
    assert result.state["log"] == ["seed", "first:cats", "second"]
    assert result.state["meta"] == {"first": True, "second": True}
    assert result.state["count"] == 1
    assert result.output == result.state


def test_invoke_is_awaitable() -> None:
    graph = flow().add_node("first", t.first).set_entry("first").compile()
    result = asyncio.run(graph.invoke(state={"topic": "dogs"}))
    assert result.state["log"] == ["seed", "first:dogs"]


def test_reducers_come_from_annotated_metadata() -> None:
    graph = flow().add_node("first", t.first).add_node("second", t.second).set_entry("first")
    graph = graph.add_edge("first", "second").add_conditional_edge("second", t.until_three).compile()
    fields = graph.spec.state
    assert fields["log"].reducer.name == "append"
    assert fields["meta"].reducer.name == "merge"
    assert (fields["recent"].reducer.name, fields["recent"].reducer.params) == (
        "bounded_append",
        {"max_len": 2},
    )
    assert fields["topic"].reducer.name == "last_write_wins"
    assert (fields["count"].type, fields["log"].type, fields["meta"].type) == ("integer", "list", "object")
    result = graph.invoke_sync()
    assert result.path == ["first", "second", "first", "second", "first", "second"]
    assert result.state["recent"] == [2, 3]  # bounded to two, oldest dropped


def test_a_node_annotated_with_the_model_gets_an_instance_else_a_dict() -> None:
    graph = flow().add_node("plain", t.plain).set_entry("plain").compile()
    assert graph.invoke_sync().state["log"] == ["seed", "plain:dict"]


def test_conditional_edges_see_the_state_after_the_update() -> None:
    graph = flow().add_node("first", t.first).add_node("second", t.second)
    graph = graph.add_conditional_edge("first", t.after_first).set_entry("first").compile()
    result = graph.invoke_sync()
    assert result.path == ["first"]
    assert result.state["count"] == 1


def test_the_same_graph_runs_the_same_twice() -> None:
    graph = flow().add_node("first", t.first).add_node("second", t.second).set_entry("first")
    graph = graph.add_edge("first", "second").add_conditional_edge("second", t.until_three).compile()
    one, two = graph.invoke_sync(state={"topic": "x"}), graph.invoke_sync(state={"topic": "x"})
    assert (one.state, one.path) == (two.state, two.path)


def test_node_options_reach_the_graph() -> None:
    graph = logged().add_node("a", t.log_a, timeout=5, queue="cpu", retry={"max_attempts": 1})
    graph = graph.add_node("b", t.log_c, description="the end").add_edge("a", "b").set_entry("a").compile()
    node = graph.spec.nodes["a"]
    assert (node.timeout, node.queue, node.retry[0].max_attempts) == (5, "cpu", 1)  # type: ignore[union-attr,index]
    assert graph.spec.nodes["b"].description == "the end"


# --- one model: the graph is a graph document ------------------------------------------------


def test_the_compiled_graph_is_its_yaml_text_loaded() -> None:
    graph = flow().add_node("first", t.first).add_conditional_edge("first", t.after_first)
    graph = graph.add_node("second", t.second).set_entry("first").compile()
    again = parse_graph(graph.text)  # what a worker does with the stored definition
    assert again.content_hash == graph.content_hash
    assert again.spec == graph.spec
    assert again.invoke_sync().state == graph.invoke_sync().state
    assert "fn: builder_targets:first" in graph.text
    assert graph.validate().valid and graph.validate().warnings == []


def test_compiling_twice_gives_the_same_version() -> None:
    builder = flow().add_node("first", t.first).set_entry("first")
    assert builder.compile().content_hash == builder.compile().content_hash


def test_a_field_without_default_must_be_given() -> None:
    graph = GraphBuilder(t.Needs, id="test/needs").add_node("greet", t.greet).set_entry("greet").compile()
    assert graph.invoke_sync(state={"name": "Ada"}).state["log"] == ["hello Ada"]
    result = graph.invoke_sync()
    assert result.status == "failed"
    assert "argument 'state' does not fit Needs: name: Input should be a valid string" in result.error.message


# --- immutability ----------------------------------------------------------------------------


def test_the_compiled_graph_is_immutable() -> None:
    builder = flow().add_node("first", t.first).set_entry("first")
    graph = builder.compile()
    with pytest.raises(dataclasses.FrozenInstanceError):
        graph.spec = graph.spec  # type: ignore[misc]
    with pytest.raises(ValueError, match="frozen"):
        graph.spec.config.start = "second"  # type: ignore[misc]
    builder.add_node("second", t.second).add_edge("first", "second")
    assert list(graph.spec.nodes) == ["first"]
    assert graph.invoke_sync().path == ["first"]
    assert builder.compile().invoke_sync().path == ["first", "second"]


# --- compile errors: the OpenArmature categories ---------------------------------------------


def test_no_declared_entry() -> None:
    error = compile_error(flow().add_node("first", t.first))
    assert error.codes == ["no_declared_entry"]
    assert "config.start is missing: the entry node is never implicit" in str(error)


def test_unreachable_node() -> None:
    error = compile_error(flow().add_node("first", t.first).add_node("second", t.second).set_entry("first"))
    assert error.codes == ["unreachable_node"]
    assert error.issues[0].node == "second"
    assert "node 'second' cannot be reached from 'first'" in str(error)


@pytest.mark.parametrize(
    ("wire", "message"),
    [
        (
            lambda b: b.add_edge("first", "secnd"),
            "node 'first': next names unknown node 'secnd' (did you mean 'second'?)",
        ),
        (lambda b: b.add_edge("third", "second"), "an edge leaves node 'third', which was never added"),
        (lambda b: b.set_entry("frist"), "config.start names unknown node 'frist' (did you mean 'first'?)"),
    ],
)
def test_dangling_edge(wire: Any, message: str) -> None:
    builder = flow().add_node("first", t.first).add_node("second", t.second).set_entry("first")
    builder.add_conditional_edge("second", t.until_three)
    error = compile_error(wire(builder))
    assert "dangling_edge" in error.codes
    assert message in str(error)


def test_multiple_outgoing_edges() -> None:
    builder = flow().add_node("first", t.first).add_node("second", t.second).set_entry("first")
    error = compile_error(builder.add_edge("first", "second").add_edge("first", END))
    assert error.codes == ["multiple_outgoing_edges"]
    assert "node 'first' has 2 unconditional edges (second, $end)" in str(error)


def test_an_edge_and_a_conditional_edge_are_two_outgoing_edges() -> None:
    builder = flow().add_node("first", t.first).add_node("second", t.second).set_entry("first")
    error = compile_error(builder.add_edge("first", "second").add_conditional_edge("first", t.until_three))
    assert error.codes == ["multiple_outgoing_edges"]
    assert "has a routing function (builder_targets:until_three) and edges to second" in str(error)


def test_two_conditional_edges_are_two_outgoing_edges() -> None:
    builder = flow().add_node("first", t.first).add_node("second", t.second).set_entry("first")
    builder.add_conditional_edge("first", t.until_three).add_conditional_edge("first", t.after_first)
    assert compile_error(builder).codes == ["multiple_outgoing_edges"]


class TwoReducers(BaseModel):
    log: Annotated[list[str], append, merge] = []


class BadBound(BaseModel):
    recent: Annotated[list[int], bounded_append(0)] = []
    records: Annotated[list[dict[str, Any]], merge_by_key("")] = []


async def node_of_two(state: TwoReducers) -> dict[str, Any]:
    return {}


async def node_of_bad(state: BadBound) -> dict[str, Any]:
    return {}


def test_conflicting_reducers_same_message_as_a_graph_file() -> None:
    error = compile_error(GraphBuilder(TwoReducers, id="two").add_node("a", node_of_two).set_entry("a"))
    assert error.codes == ["conflicting_reducers"]
    yaml_graph, report = yaml_report(
        """
        id: two
        state: {log: {type: list, default: [], reducer: [append, merge]}}
        config: {start: a}
        nodes: {a: {type: gate}}
        """
    )
    assert yaml_graph is None
    assert [(i.code, i.message) for i in error.issues] == [(i.code, i.message) for i in report.errors]
    assert "state field 'log' declares several reducers (append, merge)" in str(error)


def test_reducer_configuration_invalid() -> None:
    error = compile_error(GraphBuilder(BadBound, id="bad").add_node("a", node_of_bad).set_entry("a"))
    assert error.codes == ["reducer_configuration_invalid", "reducer_configuration_invalid"]
    assert (
        "state field 'recent': reducer 'bounded_append': 'max_len' must be a whole number of at least 1"
        in str(error)
    )
    assert "state field 'records': reducer 'merge_by_key': 'key' must be a non-empty path string" in str(
        error
    )


def yaml_report(text: str) -> tuple[Any, Any]:
    from graphrunner.loading.loader import _build
    from graphrunner.settings import Settings
    from graphrunner.tools import default_registry

    return _build(textwrap.dedent(text), None, default_registry(), Settings.from_env(), False)


# --- functions must be importable by name ------------------------------------------------------


def test_a_lambda_is_refused() -> None:
    error = compile_error(flow().add_node("first", lambda state: {}).set_entry("first"))
    assert error.codes == ["invalid_schema"]
    assert "node 'first': the node function is a lambda" in str(error)
    assert "workers import functions by 'module:qualname'" in str(error)


def test_a_closure_is_refused() -> None:
    def inner(state: t.Flow) -> dict[str, Any]:
        return {}

    error = compile_error(flow().add_node("first", inner).set_entry("first"))
    assert "is defined inside test_a_closure_is_refused() (a closure or nested function)" in str(error)
    assert "define it at module level" in str(error)


def copy_of(fn: Any, **attributes: Any) -> Any:
    copy = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__)
    for name, value in attributes.items():
        setattr(copy, name, value)
    return copy


@pytest.mark.parametrize(
    ("fn", "message"),
    [
        (functools.partial(t.first), "is a functools.partial"),
        (t.Holder().node, "is a method bound to an object"),
        (t.two_args, "must take the state as its only required argument"),
        ("builder_targets:first", "must be a function, got str"),
        (copy_of(t.first, __module__="__main__"), "is defined in __main__ (the script being run)"),
        (copy_of(t.first), "builder_targets:first is not the object that name imports"),
    ],
)
def test_other_functions_workers_cannot_call_are_refused(fn: Any, message: str) -> None:
    error = compile_error(flow().add_node("first", fn).set_entry("first"))
    assert message in str(error)


def test_a_lambda_conditional_edge_and_an_async_one_are_refused() -> None:
    builder = flow().add_node("first", t.first).add_node("second", t.second).set_entry("first")
    builder.add_edge("first", "second").add_conditional_edge("second", lambda state: END)
    assert "node 'second': the conditional edge function is a lambda" in str(compile_error(builder))
    builder = (
        flow().add_node("first", t.first).add_conditional_edge("first", t.route_async).set_entry("first")
    )
    assert "builder_targets:route_async is async" in str(compile_error(builder))


def test_a_custom_reducer_must_be_importable() -> None:
    class Custom(BaseModel):
        total: Annotated[int, custom(lambda prior, update: (prior or 0) + update)] = 0

    error = compile_error(GraphBuilder(Custom, id="custom").add_node("a", node_of_two).set_entry("a"))
    assert error.codes == ["reducer_configuration_invalid"]
    assert "the custom reducer of state field 'total' is a lambda" in str(error)


def test_every_problem_is_listed_at_once() -> None:
    builder = flow().add_node("first", t.first).add_node("first", lambda s: {}).add_edge("nowhere", "first")
    assert sorted(compile_error(builder).codes) == ["dangling_edge", "invalid_schema", "invalid_schema"]


# --- subgraphs -------------------------------------------------------------------------------


def child_graph(graph_id: str = "test/child") -> Graph:
    child = GraphBuilder(t.Child, id=graph_id).add_node("x", t.child_x).add_node("y", t.child_y)
    return child.add_edge("x", "y").set_entry("x").compile()


def parent(**projection: Any) -> GraphBuilder[t.Parent]:
    builder = GraphBuilder(t.Parent, id="test/parent").add_node("outer_a", t.outer_a)
    builder.add_subgraph("outer_sub", child_graph(), **projection).add_node("outer_b", t.outer_b)
    builder.add_edge("outer_a", "outer_sub").add_edge("outer_sub", "outer_b").set_entry("outer_a")
    return builder


def test_subgraph_default_projection_is_openarmature_fixture_6() -> None:
    result = parent().compile().invoke_sync()
    assert result.path == ["outer_a", "outer_sub", "outer_b"]
    assert result.state["message"] == "from-y"
    assert result.state["trace"] == ["outer-start", "outer_a", "x", "y", "outer_b"]
    assert "scratch" not in result.state  # child fields the parent does not declare are dropped


def test_subgraph_inputs_and_outputs_maps() -> None:
    graph = parent(inputs={"question": "query"}, outputs={"answer": "reply"}).compile()
    result = graph.invoke_sync(state={"query": "why?"})
    assert result.state["answer"] == "re: why?"
    assert result.state["message"] == ""  # outputs replace name matching
    assert result.state["trace"] == ["outer-start", "outer_a", "outer_b"]


def test_subgraph_declared_same_name_sets() -> None:
    graph = parent(projects_in=["message"], projects_out=["trace"]).compile()
    result = graph.invoke_sync(state={"message": "hi"})
    assert result.state["trace"] == ["outer-start", "outer_a", "x", "y", "outer_b"]
    assert result.state["message"] == "hi"


def test_declared_sets_without_an_out_set_project_nothing_out() -> None:
    result = parent(projects_in=[]).compile().invoke_sync()
    assert result.state["trace"] == ["outer-start", "outer_a", "outer_b"]


def test_mapping_references_undeclared_field() -> None:
    error = compile_error(parent(inputs={"question": "nope"}, outputs={"missing": "reply"}))
    assert error.codes == ["mapping_references_undeclared_field"] * 2
    assert "node 'outer_sub': inputs.question names parent field 'nope', which is not declared" in str(error)
    assert "outputs.missing names parent field 'missing'" in str(error)
    error = compile_error(parent(projects_out=["scratch"]))
    assert "outputs.scratch names parent field 'scratch', which is not declared" in str(error)


def test_conflicting_projection_forms() -> None:
    error = compile_error(parent(projects_in=["message"], outputs={"answer": "reply"}))
    assert error.codes == ["conflicting_projection_forms"]
    assert (
        "node 'outer_sub' declares both the same-name sets (projects_in/projects_out) and the inputs/outputs maps"
        in str(error)
    )


def test_a_subgraph_may_be_a_yaml_graph() -> None:
    child = parse_graph(
        textwrap.dedent(
            """
            id: test/yaml-child
            state: {trace: {type: list, default: [], reducer: append}}
            config: {start: only}
            nodes: {only: {type: gate, assign: {trace: [yaml]}}}
            """
        )
    )
    builder = (
        GraphBuilder(t.Parent, id="test/mixed").add_node("outer_a", t.outer_a).add_subgraph("sub", child)
    )
    graph = builder.add_edge("outer_a", "sub").set_entry("outer_a").compile()
    assert graph.invoke_sync().state["trace"] == ["outer-start", "outer_a", "yaml"]


def test_two_subgraphs_with_one_id_are_refused() -> None:
    builder = GraphBuilder(t.Parent, id="test/dupe").add_subgraph("one", child_graph("same"))
    other = GraphBuilder(t.Child, id="same").add_node("y", t.child_y).set_entry("y").compile()
    builder.add_subgraph("two", other).add_edge("one", "two").set_entry("one")
    assert "subgraph id 'same' is already the id of another subgraph" in str(compile_error(builder))


# --- runtime errors, state recoverable -------------------------------------------------------


def test_node_exception_keeps_the_state_before_the_node() -> None:
    builder = logged().add_node("a", t.log_a).add_node("b", t.boom).add_node("c", t.log_c)
    graph = builder.add_edge("a", "b").add_edge("b", "c").set_entry("a").compile()
    result = graph.invoke_sync()
    assert (result.status, result.path) == ("failed", ["a", "b"])
    assert result.error is not None and result.error.type == "node_exception"
    with pytest.raises(graphrunner.NodeError, match="RuntimeError: boom") as info:
        result.raise_for_error()
    assert info.value.node == "b"
    assert info.value.state is not None and info.value.state["log"] == ["a"]


def test_routing_error_keeps_the_state() -> None:
    graph = logged().add_node("a", t.log_a).add_conditional_edge("a", t.to_ghost).set_entry("a").compile()
    result = graph.invoke_sync()
    assert result.error is not None and result.error.type == "routing_error"
    with pytest.raises(graphrunner.RoutingError, match="'ghost', which is neither a node nor") as info:
        result.raise_for_error()
    assert info.value.state is not None and info.value.state["v"] == "a"


def test_reducer_error_names_field_reducer_and_node() -> None:
    graph = (
        logged()
        .add_node("a", t.log_a)
        .add_node("b", t.not_a_list)
        .add_edge("a", "b")
        .set_entry("a")
        .compile()
    )
    with pytest.raises(graphrunner.ReducerError) as info:
        graph.invoke_sync().raise_for_error()
    error = info.value
    assert (error.field, error.reducer, error.node) == ("log", "append", "b")
    assert error.state is not None and error.state["log"] == ["a"]
    assert isinstance(error.__cause__, ValueError)


def test_a_node_must_return_a_mapping() -> None:
    graph = logged().add_node("a", t.not_a_mapping).set_entry("a").compile()
    with pytest.raises(graphrunner.NodeError, match="assign_result needs the action to return a mapping"):
        graph.invoke_sync().raise_for_error()


def test_a_wrong_initial_state_is_a_state_validation_error() -> None:
    graph = logged().add_node("a", t.log_a).set_entry("a").compile()
    with pytest.raises(graphrunner.StateValidationError, match="'log' must be list"):
        graph.invoke_sync(state={"log": "x"})
