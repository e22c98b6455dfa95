"""The explorer's Tornado application and server: routes, settings, and `serve`."""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from tornado.web import Application

from graphrunner.ui import actions, api, pages
from graphrunner.ui.base import Static, executor

if TYPE_CHECKING:
    from graphrunner.client import Client

HERE = Path(__file__).resolve().parent
RUN = r"/runs/([^/]+)"


@dataclass
class Explorer:
    """What every handler shares: the client, the users (empty: no auth) and the threads."""

    client: Client
    users: Mapping[str, str]
    origins: tuple[str, ...] = ()  # where the page is served from besides its own address (a proxy's)
    executor: ThreadPoolExecutor = field(default_factory=executor)


def make_app(client: Client, users: Mapping[str, str], origins: tuple[str, ...] = ()) -> Application:
    """The explorer over `client`'s store, for `users` (passwords by user; empty: no auth); its
    actions also accepted from pages served at `origins` (a TLS proxy's `https://host`)."""
    routes = [
        (r"/healthcheck", api.Health),
        (r"/api/openapi.json", api.OpenApi),
        (r"/api/runs", api.Runs),
        (r"/api" + RUN, api.Run),
        (r"/api" + RUN + r"/steps", api.Steps),
        (r"/api" + RUN + r"/state", api.State),
        (r"/api" + RUN + r"/cancel", actions.Cancel),
        (r"/api" + RUN + r"/resume", actions.Resume),
        (r"/api/graphs/(.+)", api.GraphApi),
        (r"/", pages.RunsPage),
        (RUN, pages.RunPage),
        (r"/graphs/(.+)", pages.GraphPage),
    ]
    return Application(
        routes,
        graphrunner=Explorer(client, dict(users), origins),
        template_path=str(HERE / "templates"),
        static_path=str(HERE / "static"),
        static_handler_class=Static,
        default_handler_class=pages.NotFoundPage,
        xsrf_cookie_kwargs={"samesite": "Strict", "httponly": False},
        compress_response=True,
    )


def serve(
    client: Client, users: Mapping[str, str], address: str, port: int, origins: tuple[str, ...] = ()
) -> None:
    """Serve the explorer on `address:port` until interrupted (`origins`: as for `make_app`)."""
    import asyncio

    async def main() -> None:
        app = make_app(client, users, origins)
        app.listen(port, address, max_body_size=2 << 20)
        await asyncio.Event().wait()

    asyncio.run(main())
