"""`Graph`: a loaded, validated graph: its source, report and children; runs in-process with `invoke`."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from graphrunner.compiled import CompiledGraph
from graphrunner.errors import GraphNotFound
from graphrunner.report import ValidationReport
from graphrunner.settings import Settings

if TYPE_CHECKING:
    from graphrunner.results import RunResult
    from graphrunner.runner.local import StepObserver
    from graphrunner.streaming import StreamEvent
    from graphrunner.tools import ToolRegistry


@dataclass(frozen=True, eq=False)
class Graph(CompiledGraph):
    """A compiled graph with where it came from: file, YAML text, validation report, child files."""

    file: str | None = None
    report: ValidationReport = field(default_factory=ValidationReport)
    child_paths: Mapping[str, str] = field(default_factory=dict)
    text: str = field(default="", repr=False)
    load_child: Callable[[str], Graph] | None = field(default=None, repr=False)  # by file, for subgraphs

    def validate(self) -> ValidationReport:
        """The validation report (a loaded graph has no errors; warnings may remain)."""
        return self.report

    def draw_mermaid(self, run: RunResult | None = None) -> str:
        """The graph as a Mermaid flowchart, `run`'s path painted on it (more: `graphrunner.render`)."""
        from graphrunner.render import render

        return render(self, "mermaid", run=run)

    def subgraph(self, graph_id: str) -> CompiledGraph:
        """The child graph `graph_id` named by a subgraph node, loaded once from its file."""
        if graph_id not in self._children:
            path = self.child_paths.get(graph_id)
            if path is None or self.load_child is None:
                raise GraphNotFound(f"subgraph '{graph_id}' of graph '{self.id}' was not resolved at load")
            self._children[graph_id] = self if path == self.file else self.load_child(path)
        return self._children[graph_id]

    async def invoke(
        self,
        inputs: Mapping[str, Any] | None = None,
        *,
        state: Mapping[str, Any] | None = None,
        run_id: str | None = None,
        capabilities: Sequence[str] | None = None,
        registry: ToolRegistry | None = None,
        on_step: StepObserver | None = None,
        start: str | None = None,
    ) -> RunResult:
        """Run the whole graph in this process and return its `RunResult`.

        `start` names the node to start at instead of the entry node: with `state`, a run picks
        up where a saved history left it (`graph.invoke(state=client.state_at(run, 3),
        start=entry.next_node)`).

        Without `capabilities` the run gets GRAPHRUNNER_DEFAULT_CAPABILITIES, or `*` when that is
        unset (a local run runs as you); the state size limit is GRAPHRUNNER_MAX_STATE_BYTES.
        """
        from graphrunner.runner.local import LocalRunner

        runner = LocalRunner.from_settings(Settings.from_env(), registry=registry, on_step=on_step)
        return await runner.invoke(
            self, inputs, state=state, run_id=run_id, capabilities=capabilities, start=start
        )

    def invoke_sync(self, inputs: Mapping[str, Any] | None = None, **kwargs: Any) -> RunResult:
        """`invoke` for synchronous code (not from inside a running event loop)."""
        return asyncio.run(self.invoke(inputs, **kwargs))

    def astream(
        self, inputs: Mapping[str, Any] | None = None, *, mode: str = "updates", **kwargs: Any
    ) -> AsyncIterator[StreamEvent]:
        """Run the graph in this process, yielding its events as its steps complete, then a
        `ResultEvent`: the events of `Client.stream` (`mode` `updates` or `values`); `kwargs` as
        `invoke`'s (without `on_step`)."""
        from graphrunner.runner.stream import astream
        from graphrunner.streaming import check_mode

        return astream(self, inputs, mode=check_mode(mode), **kwargs)

    def stream(
        self, inputs: Mapping[str, Any] | None = None, *, mode: str = "updates", **kwargs: Any
    ) -> Iterator[StreamEvent]:
        """`astream` for synchronous code (not from inside a running event loop)."""
        from graphrunner.runner.stream import iterate

        return iterate(self.astream(inputs, mode=mode, **kwargs))
