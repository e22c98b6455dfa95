"""The explorer's schedules: the JSON API under `/api/schedules` and the `/schedules` page.

A schedule's id is `<graph id>/<name>`; in a URL it is one path segment, percent-encoded
(`ui%2Fnightly%2Fnightly`). What a login may do follows what it may do with runs: any login may
pause or remove a schedule (stopping never widens what runs do); adding one makes its runs carry
the login's capabilities (or the body's narrower `capabilities`), checked against the graph as a
submit is; resuming, triggering or backfilling one starts runs with the schedule's capabilities,
so it needs a login granted them all (`permits.check_resume`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from graphrunner.errors import InvalidRunQuery
from graphrunner.ui.base import Base, Page
from graphrunner.ui.permits import check_carried, check_grants, run_capabilities
from graphrunner.ui.reading import find_graph

if TYPE_CHECKING:
    from graphrunner.client import Client
    from graphrunner.cluster.schedules.admin import ScheduleInfo

SPEC_FIELDS = (
    "cron",
    "every",
    "timezone",
    "inputs",
    "overlap",
    "catchup_window",
    "jitter",
    "concurrency_key",
)
ADD_FIELDS = frozenset({"graph", "name", "paused", "capabilities", *SPEC_FIELDS})
ACTIONS = ("pause", "resume", "trigger", "backfill", "remove")


def view(info: ScheduleInfo) -> dict[str, Any]:
    """A schedule as the API shows it: its `ScheduleInfo`, with `when` (`cron ...`/`every ...`)."""
    return {**info.model_dump(mode="json"), "when": info.spec.describe()}


def schedules_json(client: Client) -> dict[str, Any]:
    """`GET /api/schedules`: every schedule, oldest first."""
    return {"schedules": [view(info) for info in client.schedules.list()]}


def schedule_json(client: Client, sid: str) -> dict[str, Any]:
    """`GET /api/schedules/<id>`: one schedule (404 `ScheduleNotFound`)."""
    return view(client.schedules.get(sid))


def add(client: Client, body: Mapping[str, Any], granted: Sequence[str], user: str | None) -> dict[str, Any]:
    """`POST /api/schedules`: add (or replace) the schedule `<graph>/<name>`; its runs carry the
    login's capabilities (or the body's narrower ones), refused before anything is stored when the
    graph needs more."""
    unknown = sorted(set(body) - ADD_FIELDS)
    if unknown:
        raise InvalidRunQuery(f"unknown field(s) {unknown}: a schedule takes {sorted(ADD_FIELDS)}")
    graph_ref, name = body.get("graph"), body.get("name")
    if not isinstance(graph_ref, str) or not graph_ref:
        raise InvalidRunQuery('"graph" must be a graph id (a non-empty string)')
    if not isinstance(name, str) or not name:
        raise InvalidRunQuery('"name" must be the schedule\'s name (a non-empty string)')
    if not isinstance(body.get("paused", False), bool):
        raise InvalidRunQuery('"paused" must be true or false')
    capabilities = run_capabilities(granted, body.get("capabilities"), user)
    graph = find_graph(client, graph_ref)
    check_grants(client, graph, capabilities, user)
    fields = {k: body[k] for k in SPEC_FIELDS if body.get(k) is not None}
    info = client.schedules.add(
        graph, name, paused=bool(body.get("paused", False)), capabilities=capabilities, **fields
    )
    return view(info)


def act(
    client: Client, sid: str, action: str, body: Mapping[str, Any], granted: Sequence[str], user: str | None
) -> dict[str, Any]:
    """`POST /api/schedules/<id>/<action>`: pause, resume, trigger, backfill or remove it."""
    schedules = client.schedules
    if action == "pause":
        return view(schedules.pause(sid))
    if action == "remove":
        schedules.remove(sid)
        return {"id": sid, "removed": True}
    info = schedules.get(sid)
    check_starts(client, info, granted, user)
    if action == "resume":
        return view(schedules.resume(sid))
    if action == "trigger":
        handle = schedules.trigger(sid)
        return {"id": sid, "run_id": handle.id, "status": handle.status()}
    start, end = _when(body, "start"), _when(body, "end")
    outcomes = schedules.backfill(sid, start, end)
    return {"id": sid, "ticks": [o.model_dump(mode="json") for o in outcomes]}


def check_starts(client: Client, info: ScheduleInfo, granted: Sequence[str], user: str | None) -> None:
    """Raise `SubmitRefused` unless the login is granted every capability the schedule's runs carry."""
    carried = info.capabilities
    if carried is None:
        carried = tuple(client.settings.default_capabilities)
    subject = f"schedule {info.id} starts runs carrying"
    check_carried(granted, subject, carried, user, "resume, trigger or backfill")


def _when(body: Mapping[str, Any], name: str) -> datetime | float:
    """A backfill bound: epoch seconds or an ISO date-time (naive: UTC)."""
    value = body.get(name)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value)
        except ValueError:
            pass
    raise InvalidRunQuery(f'"{name}" must be epoch seconds or an ISO date-time, got {value!r:.60}')


class SchedulesApi(Base):
    """`GET /api/schedules`: every schedule; `POST /api/schedules`: add one."""

    async def get(self) -> None:
        self.send_json(await self.call(schedules_json, self.explorer.client))

    async def post(self) -> None:
        body = self.json_body()
        answer = await self.call(add, self.explorer.client, body, self.login.granted, self.user)
        self.send_json(answer, 201)


class ScheduleApi(Base):
    """`GET /api/schedules/<id>`: one schedule."""

    async def get(self, sid: str) -> None:
        self.send_json(await self.call(schedule_json, self.explorer.client, sid))


class ScheduleAction(Base):
    """`POST /api/schedules/<id>/<pause|resume|trigger|backfill|remove>` (backfill's body:
    `{"start": ..., "end": ...}`)."""

    async def post(self, sid: str, action: str) -> None:
        body = self.json_body()
        answer = await self.call(act, self.explorer.client, sid, action, body, self.login.granted, self.user)
        self.send_json(answer)


class SchedulesPage(Page):
    """`/schedules`: every schedule, when it fires next, what its recent ticks did, and actions."""

    async def get(self) -> None:
        listed = await self.call(schedules_json, self.explorer.client)
        self.render("schedules.html", schedules=listed["schedules"])
