"""The read side of the JSON API under `/api`: runs, one run, its steps, timeline and state,
graphs and their per-node stats, the login (`/api/me`), the OpenAPI document, and `/healthcheck`;
and submitting a run."""

from __future__ import annotations

from graphrunner.ui import reading
from graphrunner.ui.base import Base
from graphrunner.ui.openapi import document


class Health(Base):
    """`/healthcheck`: `OK`, without a user (it says nothing else)."""

    open = True

    def get(self) -> None:
        self.set_header("Content-Type", "text/plain")
        self.finish("OK")


class Runs(Base):
    """`GET /api/runs`: runs newest first; `POST /api/runs`: submit one (see `actions`)."""

    async def get(self) -> None:
        args = {
            k: self.get_argument(k)
            for k in ("graph", "status", "schedule", "since", "until", "cursor", "limit", "offset")
            if self.get_argument(k, None) is not None
        }
        self.send_json(await self.call(reading.runs_page, self.explorer.client, args))

    async def post(self) -> None:
        body = self.json_body()
        granted = self.login.granted
        trace = self.request.headers.get("traceparent")  # the run's trace hangs under the caller's span
        code, answer = await self.call(reading.submit, self.explorer.client, body, granted, self.user, trace)
        self.send_json(answer, code)


class Me(Base):
    """`GET /api/me`: who is logged in and the capabilities runs they submit carry."""

    def get(self) -> None:
        self.send_json({"user": self.user, "capabilities": list(self.login.granted)})


class Run(Base):
    """`GET /api/runs/<id>`: the run, its state capped."""

    async def get(self, run_id: str) -> None:
        self.send_json(await self.call(reading.run_json, self.explorer.client, run_id))


class Steps(Base):
    """`GET /api/runs/<id>/steps?after=&limit=`: a page of its transcript."""

    async def get(self, run_id: str) -> None:
        args = {k: self.get_argument(k) for k in ("after", "limit") if self.get_argument(k, None) is not None}
        self.send_json(await self.call(reading.steps_json, self.explorer.client, run_id, args))


class Timeline(Base):
    """`GET /api/runs/<id>/timeline?after=&limit=&latest=`: its steps in time, a window of its
    transcript."""

    async def get(self, run_id: str) -> None:
        names = ("after", "limit", "latest")
        args = {k: self.get_argument(k) for k in names if self.get_argument(k, None) is not None}
        self.send_json(await self.call(reading.timeline_json, self.explorer.client, run_id, args))


class State(Base):
    """`GET /api/runs/<id>/state[?key=K][&at=STEP]`: the whole state, or one key's value, uncapped;
    with `at`, as it was after that step (the run's history)."""

    async def get(self, run_id: str) -> None:
        key, at = self.get_argument("key", None), self.get_argument("at", None)
        self.send_json(await self.call(reading.full_state, self.explorer.client, run_id, key, at))


class GraphApi(Base):
    """`GET /api/graphs/<id>`: the versions of a graph its recent runs use, and those runs."""

    async def get(self, graph_id: str) -> None:
        self.send_json(await self.call(reading.graph_json, self.explorer.client, graph_id))


class GraphStats(Base):
    """`GET /api/graph-stats/<id>?window=`: per-node stats of the graph's runs in a window."""

    async def get(self, graph_id: str) -> None:
        window = self.get_argument("window", None)
        self.send_json(await self.call(reading.graph_stats, self.explorer.client, graph_id, window))


class OpenApi(Base):
    """`GET /api/openapi.json`: the API described."""

    def get(self) -> None:
        self.send_json(document())
