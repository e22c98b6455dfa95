"""`GraphBuilder`: a graph written in Python, compiled into the same `Graph` a YAML file gives.

The builder records nodes, edges and the entry, and `compile()` writes them as a graph
document (YAML text), which is loaded and validated by the same code as a graph file.
So a builder graph is a `Graph` like any other: `invoke` runs it in-process, and
`Client.submit` stores its text for workers, which import its functions by name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, Self, TypeVar

from pydantic import BaseModel

from graphrunner.builder.assemble import Assembly, Branches, Foreach, HookEntry, NodeTarget, assemble
from graphrunner.graph import Graph
from graphrunner.model import END, HookEvent, RetryPolicy
from graphrunner.report import Issue

S = TypeVar("S", bound=BaseModel)
RetrySpec = RetryPolicy | Mapping[str, Any] | Sequence[RetryPolicy | Mapping[str, Any]]
ErrorMode = Literal["fail", "continue"]


class GraphBuilder(Generic[S]):
    """Build a graph over the state model `state`: nodes, edges, an entry; then `compile()`.

    State fields are the model's fields; `Annotated[list[str], append]` gives a field its
    reducer (markers in `graphrunner.builder`). A node is a module-level function
    `async def node(state) -> dict` returning a partial update; a state parameter
    annotated with the model receives an instance of it, else a dict.
    """

    def __init__(
        self,
        state: type[S],
        *,
        id: str | None = None,
        version: str | None = None,
        description: str | None = None,
        max_steps: int = 1000,
        max_depth: int = 5,
        error_mode: ErrorMode = "fail",
    ) -> None:
        if not (isinstance(state, type) and issubclass(state, BaseModel)):
            raise TypeError(f"the state must be a pydantic model class, got {state!r:.80}")
        self.state = state
        self.id = id or f"{state.__module__}.{state.__qualname__}"
        self._head = {"version": version, "description": description}
        self._config: dict[str, Any] = {"max_steps": max_steps, "max_depth": max_depth}
        self._config["error_mode"] = error_mode
        self._entry: str | None = None
        self._nodes: dict[str, tuple[NodeTarget, dict[str, Any]]] = {}
        self._hooks: list[HookEntry] = []
        self._edges: dict[str, list[str]] = {}
        self._routers: dict[str, list[Callable[..., Any]]] = {}
        self._issues: list[Issue] = []

    def add_node(
        self,
        name: str,
        fn: Callable[..., Any],
        *,
        retry: RetrySpec | None = None,
        timeout: float | None = None,
        queue: str | None = None,
        on_error: str | None = None,
        error_mode: ErrorMode | None = None,
        cache_result: bool = False,
        description: str | None = None,
    ) -> Self:
        """Add node `name` running `fn(state)`, whose returned dict is merged through the reducers."""
        options = _dispatch(description, retry, timeout, queue, on_error, error_mode, cache_result)
        return self._add(name, fn, options)

    def add_subgraph(
        self,
        name: str,
        graph: Graph,
        *,
        inputs: Mapping[str, str] | None = None,
        outputs: Mapping[str, str] | None = None,
        projects_in: Iterable[str] | None = None,
        projects_out: Iterable[str] | None = None,
        on_error: str | None = None,
        error_mode: ErrorMode | None = None,
        description: str | None = None,
    ) -> Self:
        """Add node `name` running the compiled `graph` as a child run (OpenArmature projection).

        Nothing declared: the child starts from its own defaults and child fields named like
        parent fields merge back. `inputs` (child field: parent field) and `outputs` (parent
        field: child field) are explicit maps; `projects_in`/`projects_out` declare same-name
        fields, and name exactly what crosses. The two forms exclude each other.
        """
        if not isinstance(graph, Graph):
            raise TypeError(f"add_subgraph takes a compiled Graph, got {type(graph).__name__}")
        options = {
            "type": "subgraph",
            "description": description,
            "graph": graph.id,
            **self._projection(name, inputs, outputs, projects_in, projects_out),
            "on_error": on_error,
            "error_mode": error_mode,
        }
        return self._add(name, graph, options)

    def add_foreach(
        self,
        name: str,
        fn: Callable[..., Any] | Graph,
        *,
        over: str,
        inputs: Mapping[str, str] | None = None,
        collect: str | None = None,
        parallel: bool = False,
        max_concurrency: int | None = None,
        batch_size: int | None = None,
        tolerated_failures: int | str = 0,
        retry: RetrySpec | None = None,
        timeout: float | None = None,
        queue: str | None = None,
        on_error: str | None = None,
        error_mode: ErrorMode | None = None,
        cache_result: bool = False,
        description: str | None = None,
    ) -> Self:
        """Add foreach node `name` calling `fn(item)` once per item of `over` (a state field name,
        or an expression such as `"${state.docs}"`); the results go to `collect` in item order.

        `fn` also gets `index` and `state` when it has parameters of those names. `fn` may be a
        compiled graph instead: each item is then a child run of it, `inputs` (child field:
        expression, e.g. `{"doc": "${item}"}`, or parent field) projected in, and its output
        collected. The options mean what the foreach keys of a graph file mean.
        """
        if not isinstance(fn, Graph) and inputs is not None:
            raise TypeError("add_foreach takes inputs= only with a graph: a function gets the item itself")
        options = {
            "type": "foreach",
            "over": over if "${" in over else "${state." + over + "}",
            "inputs": dict(inputs) if inputs is not None else None,
            "collect": collect,
            "parallel": parallel or None,
            "max_concurrency": max_concurrency,
            "batch_size": batch_size,
            "tolerated_failures": tolerated_failures or None,
            **_dispatch(description, retry, timeout, queue, on_error, error_mode, cache_result),
        }
        return self._add(name, Foreach(fn), options)

    def add_parallel(
        self,
        name: str,
        branches: Mapping[str, Graph | BranchSpec],
        *,
        error_policy: Literal["fail_fast", "collect"] = "fail_fast",
        errors_field: str | None = None,
        on_error: str | None = None,
        error_mode: ErrorMode | None = None,
        description: str | None = None,
    ) -> Self:
        """Add parallel node `name`: every branch (a compiled graph, or `branch(graph, inputs=...,
        outputs=...)`) runs at once as a child run; their contributions merge into the state in
        the order the branches are given. `fail_fast` fails the node at the first failing branch
        (the others are cancelled); `collect` runs them all and writes the failures to `errors_field`.
        """
        specs = {key: b if isinstance(b, BranchSpec) else BranchSpec(b) for key, b in branches.items()}
        options = {
            "type": "parallel",
            "description": description,
            "branches": {key: spec.written() for key, spec in specs.items()},
            "error_policy": error_policy,
            "errors_field": errors_field,
            "on_error": on_error,
            "error_mode": error_mode,
        }
        return self._add(name, Branches({key: spec.graph for key, spec in specs.items()}), options)

    def add_pause(self, name: str, *, message: str | None = None, description: str | None = None) -> Self:
        """Add pause node `name`: the run parks as `paused` until it is resumed (with an optional
        state patch), then follows the node's edge."""
        return self._add(name, None, {"type": "pause", "message": message, "description": description})

    def add_return(
        self, name: str, *, output: str | Mapping[str, str] | None = None, description: str | None = None
    ) -> Self:
        """Add return node `name`, which ends the run with `output`: a state field name, or a mapping
        of output key to state field name (a value with `${...}` is an expression); the whole
        state without it."""
        options = {"type": "return", "output": _output(output), "description": description}
        return self._add(name, None, options)

    def add_hook(self, event: HookEvent, fn: Callable[..., Any], *, when: str | None = None) -> Self:
        """Call `fn(event)` on `event` (graph_started, after_step, error, limit, graph_completed)
        when the CEL condition `when` holds; `fn` also gets `state` when it has such a parameter.
        An `error` hook may return "retry", "continue" or "fail" to decide what happens next."""
        self._hooks.append(HookEntry(event, fn, when))
        return self

    def add_edge(self, src: str, dst: str) -> Self:
        """After `src`, go to `dst` (a node name, or `END` to end the run)."""
        self._edges.setdefault(src, []).append(dst)
        return self

    def add_conditional_edge(self, src: str, fn: Callable[..., str]) -> Self:
        """After `src`, go where `fn(state)` says: a node name or `END` (sees the updated state)."""
        self._routers.setdefault(src, []).append(fn)
        return self

    def set_entry(self, name: str) -> Self:
        """The node every run starts at (required: the entry is never implicit)."""
        self._entry = name
        return self

    def compile(self) -> Graph:
        """The validated, immutable `Graph`; raises `GraphValidationError` listing every problem."""
        return assemble(
            Assembly(
                state=self.state,
                graph_id=self.id,
                head=dict(self._head),
                config={"start": self._entry, **self._config},
                nodes=dict(self._nodes),
                edges={k: list(v) for k, v in self._edges.items()},
                routers={k: list(v) for k, v in self._routers.items()},
                issues=list(self._issues),
                hooks=list(self._hooks),
            )
        )

    def _add(self, name: str, target: NodeTarget, options: dict[str, Any]) -> Self:
        if name in self._nodes:
            self._issues.append(
                Issue("invalid_schema", f"node '{name}' is added twice", node=name, location=f"nodes.{name}")
            )
        self._nodes[name] = (target, {k: v for k, v in options.items() if v is not None})
        return self

    def _projection(
        self,
        name: str,
        inputs: Mapping[str, str] | None,
        outputs: Mapping[str, str] | None,
        projects_in: Iterable[str] | None,
        projects_out: Iterable[str] | None,
    ) -> dict[str, Any]:
        declared = projects_in is not None or projects_out is not None
        if declared and (inputs is not None or outputs is not None):
            self._issues.append(
                Issue(
                    "conflicting_projection_forms",
                    f"node '{name}' declares both the same-name sets (projects_in/projects_out) and "
                    "the inputs/outputs maps; use one form (a same-name pair is a map entry too)",
                    node=name,
                    location=f"nodes.{name}",
                )
            )
        if declared:  # a complete declaration: an absent set means nothing crosses that way
            return {"inputs": _same_name(projects_in), "outputs": _same_name(projects_out)}
        return {
            "inputs": dict(inputs) if inputs is not None else None,
            "outputs": dict(outputs) if outputs is not None else None,
        }


@dataclass(frozen=True)
class BranchSpec:
    """One branch of `add_parallel`: a compiled graph and its projections (as `add_subgraph`'s)."""

    graph: Graph
    inputs: Mapping[str, str] | None = None
    outputs: Mapping[str, str] | None = None

    def written(self) -> dict[str, Any]:
        out: dict[str, Any] = {"graph": self.graph.id}
        if self.inputs is not None:
            out["inputs"] = dict(self.inputs)
        if self.outputs is not None:
            out["outputs"] = dict(self.outputs)
        return out


def branch(
    graph: Graph, *, inputs: Mapping[str, str] | None = None, outputs: Mapping[str, str] | None = None
) -> BranchSpec:
    """A branch of `add_parallel`: `inputs` (child field: parent field or expression) and `outputs`
    (parent field: child field), as for a subgraph."""
    if not isinstance(graph, Graph):
        raise TypeError(f"a branch runs a compiled Graph, got {type(graph).__name__}")
    return BranchSpec(graph, inputs, outputs)


def _dispatch(
    description: str | None,
    retry: RetrySpec | None,
    timeout: float | None,
    queue: str | None,
    on_error: str | None,
    error_mode: ErrorMode | None,
    cache_result: bool,
) -> dict[str, Any]:
    """The options of a node that dispatches (a node function, a foreach), as the graph file writes them."""
    return {
        "description": description,
        "retry": _retry(retry),
        "timeout": timeout,
        "queue": queue,
        "on_error": on_error,
        "error_mode": error_mode,
        "cache_result": cache_result or None,
    }


def _output(output: str | Mapping[str, str] | None) -> Any:
    def read(value: str) -> str:
        return value if "${" in value else "${state." + value + "}"

    if output is None:
        return None
    if isinstance(output, str):
        return read(output)
    return {key: read(value) for key, value in output.items()}


def _same_name(fields: Iterable[str] | None) -> dict[str, str]:
    if isinstance(fields, str):
        raise TypeError(f"projects_in/projects_out take field names, not one string: write [{fields!r}]")
    return {f: f for f in fields or ()}


def _retry(retry: RetrySpec | None) -> Any:
    if retry is None:
        return None
    if isinstance(retry, RetryPolicy | Mapping):
        retry = [retry]
    return [r.model_dump(mode="json") if isinstance(r, RetryPolicy) else dict(r) for r in retry]


__all__ = ["END", "BranchSpec", "GraphBuilder", "branch"]
