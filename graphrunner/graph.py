"""`Graph`: a loaded, validated, compiled and immutable graph; runs in-process with `invoke`."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from graphrunner.compiled import CompiledHook, CompiledNode
from graphrunner.errors import GraphNotFound
from graphrunner.model import GraphSpec
from graphrunner.reducers import Reducers
from graphrunner.report import ValidationReport
from graphrunner.settings import Settings

if TYPE_CHECKING:
    from graphrunner.results import RunResult
    from graphrunner.runner.local import StepObserver
    from graphrunner.tools import ToolRegistry


@dataclass(frozen=True, eq=False)
class Graph:
    """A graph ready to run: its spec, content hash, compiled expressions and reducers."""

    spec: GraphSpec
    content_hash: str
    file: str | None
    nodes: Mapping[str, CompiledNode]
    hooks: tuple[CompiledHook, ...]
    reducers: Reducers
    report: ValidationReport
    child_paths: Mapping[str, str] = field(default_factory=dict)
    text: str = field(default="", repr=False)
    _children: dict[str, Graph] = field(default_factory=dict, repr=False)

    @property
    def id(self) -> str:
        """The graph id runs are registered under."""
        return self.spec.id

    def validate(self) -> ValidationReport:
        """The validation report (a loaded graph has no errors; warnings may remain)."""
        return self.report

    def subgraph(self, graph_id: str) -> Graph:
        """The child graph `graph_id` named by a subgraph node, loaded once."""
        if graph_id not in self._children:
            from graphrunner.loading import load_graph

            path = self.child_paths.get(graph_id)
            if path is None:
                raise GraphNotFound(f"subgraph '{graph_id}' of graph '{self.id}' was not resolved at load")
            self._children[graph_id] = self if path == self.file else load_graph(path)
        return self._children[graph_id]

    def split_child_values(self, values: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """Projected subgraph values as (inputs, state) by what this graph declares."""
        inputs = {k: v for k, v in values.items() if k in self.spec.inputs and k not in self.spec.state}
        state = {k: v for k, v in values.items() if k not in inputs}
        return inputs, state

    async def invoke(
        self,
        inputs: Mapping[str, Any] | None = None,
        *,
        state: Mapping[str, Any] | None = None,
        run_id: str | None = None,
        capabilities: Sequence[str] | None = None,
        registry: ToolRegistry | None = None,
        on_step: StepObserver | None = None,
    ) -> RunResult:
        """Run the whole graph in this process and return its `RunResult`.

        Without `capabilities` the run gets the deployment's default (GRAPHRUNNER_DEFAULT_CAPABILITIES,
        `*` when unset); the state size limit is GRAPHRUNNER_MAX_STATE_BYTES.
        """
        from graphrunner.runner.local import LocalRunner

        settings = Settings.from_env()
        runner = LocalRunner(
            registry,
            on_step,
            max_state_bytes=settings.max_state_bytes,
            default_capabilities=settings.default_capabilities,
        )
        return await runner.invoke(self, inputs, state=state, run_id=run_id, capabilities=capabilities)

    def invoke_sync(self, inputs: Mapping[str, Any] | None = None, **kwargs: Any) -> RunResult:
        """`invoke` for synchronous code (not from inside a running event loop)."""
        return asyncio.run(self.invoke(inputs, **kwargs))
