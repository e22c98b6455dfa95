"""The explorer's HTML pages: the run list, a run, a graph. Server-rendered; `static/ui.js` keeps
them current from the JSON API."""

from __future__ import annotations

import json
from typing import Any

from graphrunner.store.query import STATUSES
from graphrunner.ui import reading
from graphrunner.ui.base import Page
from graphrunner.ui.node_stats import DEFAULT_WINDOW
from graphrunner.ui.timeline import duration, layout


def pretty(value: Any) -> str:
    """A value as indented JSON for a `<pre>`."""
    return json.dumps(value, indent=2, default=str, ensure_ascii=False)


class RunsPage(Page):
    """`/`: runs newest first, filtered by graph, status and time, a page at a time."""

    async def get(self) -> None:
        names = ("graph", "status", "schedule", "since", "until", "cursor", "limit")
        args = {k: v for k in names if (v := self.get_argument(k, "").strip())}
        page = await self.call(reading.runs_page, self.explorer.client, args)
        self.render("runs.html", page=page, args=args, statuses=STATUSES, pretty=pretty)


def percent(value: float | None) -> str:
    """A fraction as a percentage for a table: `12.5 %`; empty for None."""
    return "" if value is None else f"{value * 100:.1f} %"


class RunPage(Page):
    """`/runs/<id>`: the run on its graph, its timeline, transcript, state, links and actions."""

    async def get(self, run_id: str) -> None:
        after = self.get_argument("after", None)
        window = {
            "after": self.get_argument("timeline_after", ""),
            "latest": "1" if self.get_argument("timeline", "") == "latest" else "",
        }
        data = await self.call(reading.run_page, self.explorer.client, run_id, after, window)
        rows = layout(data.timeline)
        self.render("run.html", data=data, run=data.run, rows=rows, duration=duration, pretty=pretty)


class GraphPage(Page):
    """`/graphs/<id>`: per-node stats over a window, every version of the graph its recent runs
    use, and those runs."""

    async def get(self, graph_id: str) -> None:
        graph = await self.call(reading.graph_json, self.explorer.client, graph_id, True)
        window = self.get_argument("window", DEFAULT_WINDOW)
        stats = await self.call(reading.graph_stats, self.explorer.client, graph_id, window)
        self.render("graph.html", graph=graph, stats=stats, duration=duration, percent=percent, pretty=pretty)


class NotFoundPage(Page):
    """Any other path."""

    def prepare(self) -> None:
        super().prepare()
        self.set_status(404)
        self.write_problem(404, "NotFound", f"no page at {self.request.path}")
