"""The explorer's Tornado application and server: routes, settings, and `serve`."""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from tornado.web import Application

from graphrunner.ui import actions, api, pages, schedules
from graphrunner.ui.base import Static, executor
from graphrunner.ui.guard import allowed_hosts
from graphrunner.ui.throttle import LoginThrottle

if TYPE_CHECKING:
    from graphrunner.client import Client
    from graphrunner.ui.logins import Login

HERE = Path(__file__).resolve().parent
RUN = r"/runs/([^/]+)"
SCHEDULE_API = r"/api/schedules/([^/]+)"  # the id percent-encoded: `graph%2Fname`


@dataclass
class Explorer:
    """What every handler shares: the client, the logins (empty: no auth), the Host allow-list,
    the failed-login throttle and the threads."""

    client: Client
    users: Mapping[str, Login]
    origins: tuple[str, ...] = ()  # where the page is served from besides its own address (a proxy's)
    hosts: frozenset[str] = frozenset()  # Host names answered besides loopback ones
    throttle: LoginThrottle = field(default_factory=LoginThrottle)
    executor: ThreadPoolExecutor = field(default_factory=executor)


def make_app(
    client: Client,
    users: Mapping[str, Login],
    origins: tuple[str, ...] = (),
    address: str = "127.0.0.1",
    throttle: LoginThrottle | None = None,
) -> Application:
    """The explorer over `client`'s store, for `users` (logins by name; empty: no auth), listening
    on `address`; its requests also accepted for the hosts of `origins` (a TLS proxy's
    `https://host`), and its actions from pages served there."""
    routes = [
        (r"/healthcheck", api.Health),
        (r"/api/openapi.json", api.OpenApi),
        (r"/api/me", api.Me),
        (r"/api/runs", api.Runs),
        (r"/api" + RUN, api.Run),
        (r"/api" + RUN + r"/steps", api.Steps),
        (r"/api" + RUN + r"/timeline", api.Timeline),
        (r"/api" + RUN + r"/state", api.State),
        (r"/api" + RUN + r"/cancel", actions.Cancel),
        (r"/api" + RUN + r"/resume", actions.Resume),
        (r"/api" + RUN + r"/fork", actions.Fork),
        (r"/api/schedules", schedules.SchedulesApi),
        (SCHEDULE_API, schedules.ScheduleApi),
        (SCHEDULE_API + r"/(" + "|".join(schedules.ACTIONS) + ")", schedules.ScheduleAction),
        (r"/api/graphs/(.+)", api.GraphApi),
        (r"/api/graph-stats/(.+)", api.GraphStats),
        (r"/", pages.RunsPage),
        (RUN, pages.RunPage),
        (r"/schedules", schedules.SchedulesPage),
        (r"/graphs/(.+)", pages.GraphPage),
    ]
    return Application(
        routes,
        graphrunner=Explorer(
            client, dict(users), origins, allowed_hosts(address, origins), throttle or LoginThrottle()
        ),
        template_path=str(HERE / "templates"),
        static_path=str(HERE / "static"),
        static_handler_class=Static,
        default_handler_class=pages.NotFoundPage,
        xsrf_cookie_kwargs={"samesite": "Strict", "httponly": False},
        compress_response=True,
    )


def serve(
    client: Client,
    users: Mapping[str, Login],
    address: str,
    port: int,
    origins: tuple[str, ...] = (),
    throttle: LoginThrottle | None = None,
) -> None:
    """Serve the explorer on `address:port` until interrupted (the rest: as for `make_app`)."""
    import asyncio

    async def main() -> None:
        app = make_app(client, users, origins, address, throttle)
        app.listen(port, address, max_body_size=2 << 20)
        await asyncio.Event().wait()

    asyncio.run(main())
