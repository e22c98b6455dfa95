"""A graph compiled once at load: `CompiledGraph`, the value the pure engine runs.

`compile_nodes` walks the spec and records a `bad_expression` issue for every site that
does not compile, so one load reports every bad expression with where it is.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from graphrunner import namespaces as ns
from graphrunner.errors import ExpressionError, GraphNotFound
from graphrunner.expressions import (
    CompiledCondition,
    Constant,
    Template,
    compile_condition,
    compile_template,
)
from graphrunner.expressions.template import Structure
from graphrunner.importing import ImportFailed, import_callable
from graphrunner.model import (
    ActionNode,
    AnyNode,
    ForeachNode,
    GraphSpec,
    Hook,
    Next,
    ParallelNode,
    PauseNode,
    ReturnNode,
    SubgraphNode,
)
from graphrunner.reducers import Reducers
from graphrunner.report import Issue


@dataclass(frozen=True)
class CompiledNext:
    """Branches as (target, condition or None), or a routing function."""

    branches: tuple[tuple[str, CompiledCondition | None], ...] = ()
    fn: Callable[..., Any] | None = None
    fn_ref: str | None = None
    unmatched_ends: bool = False  # a Rye graph: no branch matching ends the run, as the walker does


@dataclass(frozen=True)
class CompiledNode:
    """Every expression of one node, ready to render."""

    name: str
    spec: AnyNode
    params: Template = field(default_factory=lambda: Constant({}))
    assign: dict[str, Template] = field(default_factory=dict)
    next: CompiledNext | None = None
    over: Template | None = None
    output: Template | None = None
    message: Template | None = None  # a pause node's message
    child_inputs: dict[str, Template] = field(default_factory=dict)  # subgraph, foreach over a graph
    branch_inputs: dict[str, dict[str, Template]] = field(default_factory=dict)  # parallel, by branch
    rye: bool = False  # of a Rye graph file: the walker's result envelope and comparisons apply
    permissions: tuple[str, ...] | None = None  # a Rye file's permissions, checked beside capabilities
    non_finite: str = "fail"  # the graph's `config.non_finite`, for the node's dispatches


@dataclass(frozen=True)
class CompiledHook:
    """A hook's condition and action params."""

    spec: Hook
    when: CompiledCondition | None
    params: Template


class _Collector:
    """Compiles sites and turns failures into issues with a location."""

    def __init__(self, rye: bool = False) -> None:
        self.issues: list[Issue] = []
        self.rye = rye

    def template(self, value: Any, names: frozenset[str], node: str | None, where: str) -> Template:
        try:
            return compile_template(value, names)
        except ExpressionError as exc:
            self._bad(exc, node, where)
            return Constant(None)

    def params(self, params: dict[str, Any], names: frozenset[str], node: str | None, where: str) -> Template:
        """Action params compiled key by key, so each bad one is reported where it is."""
        members = {k: self.template(v, names, node, f"{where}.{k}") for k, v in params.items()}
        if all(isinstance(m, Constant) for m in members.values()):
            return Constant(dict(params))
        return Structure(members)

    def condition(
        self, cond: Any, names: frozenset[str], node: str | None, where: str
    ) -> CompiledCondition | None:
        try:
            return compile_condition(cond, names, rye=self.rye)
        except ExpressionError as exc:
            self._bad(exc, node, where)
            return None

    def _bad(self, exc: ExpressionError, node: str | None, where: str) -> None:
        subject = f"node '{node}': " if node else ""
        where_in_node = where.removeprefix(f"nodes.{node}.") if node else where
        self.issues.append(
            Issue("bad_expression", f"{subject}{where_in_node}: {exc}", node=node, location=where)
        )


def compile_nodes(spec: GraphSpec) -> tuple[dict[str, CompiledNode], list[Issue]]:
    """Compile every node; returns the compiled nodes and the issues found."""
    collector = _Collector(spec.rye)
    nodes = {
        name: replace(
            _compile_node(name, node, collector),
            rye=spec.rye,
            permissions=spec.permissions,
            non_finite=spec.config.non_finite,
        )
        for name, node in spec.nodes.items()
    }
    return nodes, collector.issues


def compile_hooks(hooks: tuple[Hook, ...], rye: bool = False) -> tuple[tuple[CompiledHook, ...], list[Issue]]:
    """Compile the graph's hooks; a Rye graph's hooks read the event's data at the top level."""
    c = _Collector(rye)
    names = ns.RYE_HOOK if rye else ns.HOOK
    out = []
    for i, hook in enumerate(hooks):
        where = f"config.hooks.{i}"
        when = c.condition(hook.when, names, None, f"{where}.when") if hook.when is not None else None
        out.append(
            CompiledHook(hook, when, c.params(hook.action.params, names, None, f"{where}.action.params"))
        )
    return tuple(out), c.issues


def _compile_node(name: str, node: AnyNode, c: _Collector) -> CompiledNode:
    base = f"nodes.{name}"
    assign = {k: c.template(v, ns.WITH_RESULT, name, f"{base}.assign.{k}") for k, v in node.assign.items()}
    if isinstance(node, ReturnNode):
        output = (
            c.template(node.output, ns.WITH_RESULT, name, f"{base}.output")
            if node.output is not None
            else None
        )
        return CompiledNode(name, node, assign=assign, output=output)
    compiled_next = _compile_next(node.next, name, c) if node.next is not None else None
    params: Template = Constant({})
    over = None
    child_inputs: dict[str, Template] = {}
    branch_inputs: dict[str, dict[str, Template]] = {}
    if isinstance(node, ForeachNode):
        if node.action is not None:
            params = c.params(node.action.params, ns.for_params(node.as_), name, f"{base}.action.params")
        child_inputs = _child_inputs(c, node.inputs, ns.for_params(node.as_), name, f"{base}.inputs")
        over = c.template(node.over, ns.BASE, name, f"{base}.over")
    elif isinstance(node, ActionNode):
        params = c.params(node.action.params, ns.for_params(), name, f"{base}.action.params")
    elif isinstance(node, SubgraphNode):
        child_inputs = _child_inputs(c, node.inputs, ns.BASE, name, f"{base}.inputs")
    elif isinstance(node, ParallelNode):
        branch_inputs = {
            b: _child_inputs(c, branch.inputs, ns.BASE, name, f"{base}.branches.{b}.inputs")
            for b, branch in node.branches.items()
        }
    message = None
    if isinstance(node, PauseNode) and node.message is not None:
        message = c.template(node.message, ns.BASE, name, f"{base}.message")
    return CompiledNode(
        name,
        node,
        params=params,
        assign=assign,
        next=compiled_next,
        over=over,
        child_inputs=child_inputs,
        branch_inputs=branch_inputs,
        message=message,
    )


def _child_inputs(
    c: _Collector, inputs: dict[str, Any] | None, names: frozenset[str], node: str, where: str
) -> dict[str, Template]:
    """A child run's projected inputs (child field: parent field name, or an expression)."""
    return {
        k: c.template(v if c.rye else _as_expression(v), names, node, f"{where}.{k}")
        for k, v in (inputs or {}).items()
    }


def _as_expression(value: Any) -> Any:
    """A subgraph input written as a bare parent field name reads `state.<name>` (in a Rye graph
    inputs are values, as the walker passes a graph tool's params)."""
    if isinstance(value, str) and "${" not in value:
        return "${state." + value + "}"
    return value


def _compile_next(spec: Next, node: str, c: _Collector) -> CompiledNext:
    if spec.fn is not None:
        try:
            return CompiledNext(fn=import_callable(spec.fn), fn_ref=spec.fn)
        except ImportFailed as exc:
            c.issues.append(
                Issue(
                    "invalid_schema",
                    f"node '{node}': next.fn: {exc}",
                    node=node,
                    location=f"nodes.{node}.next.fn",
                )
            )
            return CompiledNext(fn_ref=spec.fn)
    branches = []
    for i, branch in enumerate(spec.branches):
        where = f"nodes.{node}.next.{i}.when"
        when = c.condition(branch.when, ns.WITH_RESULT, node, where) if branch.when is not None else None
        branches.append((branch.to, when))
    return CompiledNext(branches=tuple(branches), unmatched_ends=c.rye)


@dataclass(frozen=True, eq=False)
class CompiledGraph:
    """A graph ready for the engine: its spec, content hash, compiled nodes and hooks, reducers.

    A pure value: it neither reads files nor runs anything. `Graph` (a loaded graph) adds
    where it came from and how to run it.
    """

    spec: GraphSpec
    content_hash: str
    nodes: Mapping[str, CompiledNode]
    hooks: tuple[CompiledHook, ...]
    reducers: Reducers
    _children: dict[str, CompiledGraph] = field(default_factory=dict, repr=False)

    @property
    def id(self) -> str:
        """The graph id runs are registered under."""
        return self.spec.id

    def subgraph(self, graph_id: str) -> CompiledGraph:
        """The child graph `graph_id` named by a subgraph node; raises `GraphNotFound`."""
        child = self._children.get(graph_id)
        if child is None:
            raise GraphNotFound(f"subgraph '{graph_id}' of graph '{self.id}' is not known")
        return child

    def split_child_values(self, values: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """Projected subgraph values as (inputs, state) by what this graph declares: a declared
        input gets its value, and so does a state field; a name declared as both gets it twice."""
        inputs = {k: v for k, v in values.items() if k in self.spec.inputs}
        state = {k: v for k, v in values.items() if k not in self.spec.inputs or k in self.spec.state}
        return inputs, state
