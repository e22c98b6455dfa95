"""`graphrunner ui`: the run explorer web page and JSON API, never open by accident."""

from __future__ import annotations

import contextlib
from pathlib import Path

import click

from graphrunner.cli.common import USAGE_ERROR, fail, set_up_telemetry


@click.command("ui")
@click.option("--address", default="127.0.0.1", show_default=True, help="The address to listen on.")
@click.option("--port", default=8808, show_default=True, type=click.IntRange(0, 65535), help="The port.")
@click.option(
    "--users",
    "users_file",
    type=click.Path(path_type=Path),
    metavar="FILE",
    help="A YAML users file: each login's password (password_file, password_env or password) and the "
    "capabilities its runs get beyond the pure built-ins (default: GRAPHRUNNER_UI_USERS).",
)
@click.option(
    "--basic-auth",
    "basic_auth",
    multiple=True,
    metavar="USER:PASSWORD",
    envvar="GRAPHRUNNER_UI_BASIC_AUTH",
    help="A login allowed in, running the pure built-ins only (repeat, or comma-separate, for "
    "several). Also read from GRAPHRUNNER_UI_BASIC_AUTH, which keeps passwords out of the process list.",
)
@click.option(
    "--no-auth",
    is_flag=True,
    help="Serve without authentication, on a loopback IP only (pure built-ins only).",
)
@click.option(
    "--public-url",
    "public_urls",
    multiple=True,
    metavar="URL",
    envvar="GRAPHRUNNER_UI_PUBLIC_URL",
    help="Where users reach the explorer through a proxy (https://runs.example.com): requests naming "
    "its host are answered, and its pages' actions accepted (repeatable; GRAPHRUNNER_UI_PUBLIC_URL).",
)
@click.option(
    "--max-login-failures",
    default=10,
    show_default=True,
    type=click.IntRange(1),
    envvar="GRAPHRUNNER_UI_MAX_LOGIN_FAILURES",
    help="Failed logins from one client address within --login-window before it is answered 429.",
)
@click.option(
    "--login-window",
    default=60.0,
    show_default=True,
    type=click.FloatRange(0.1),
    envvar="GRAPHRUNNER_UI_LOGIN_WINDOW",
    help="Seconds a failed login counts against its client address.",
)
def ui(
    address: str,
    port: int,
    users_file: Path | None,
    basic_auth: tuple[str, ...],
    no_auth: bool,
    public_urls: tuple[str, ...],
    max_login_failures: int,
    login_window: float,
) -> None:
    """Serve the run explorer: runs, a run on its graph, its transcript and state, and a JSON API
    under /api (OpenAPI at /api/openapi.json) to submit, cancel and resume runs.

    Every path but /healthcheck needs a login: --users=FILE (logins with their capabilities) or
    --basic-auth=user:password. Without one it refuses to start unless --no-auth is given, and then
    serves on a loopback IP only. A run submitted through it carries its login's capabilities
    (never GRAPHRUNNER_DEFAULT_CAPABILITIES): the pure built-ins (echo, fail, sleep) and what the
    users file grants; a graph that needs more is refused (403) before it runs. Requests must
    name localhost, a loopback IP, or a --public-url host in Host. Reads the cluster's Redis from
    GRAPHRUNNER_REDIS_URL; graphs to submit by id from GRAPHRUNNER_GRAPH_PATH.

    Example: `graphrunner ui --address 0.0.0.0 --users /etc/graphrunner/ui-users.yaml
    --public-url https://runs.example.com`.
    """
    from graphrunner.cli.connect import cluster_client, server_settings
    from graphrunner.ui.app import serve
    from graphrunner.ui.auth import UiAuthError, check_address, merge_users, parse_users, public_origins
    from graphrunner.ui.logins import load_users
    from graphrunner.ui.throttle import LoginThrottle

    settings = server_settings()
    set_up_telemetry("ui")
    path = users_file or settings.ui_users
    try:
        users = merge_users(parse_users(basic_auth), load_users(path) if path else {})
        origins = public_origins(public_urls)
        check_address(address, users=users, no_auth=no_auth)
    except UiAuthError as exc:
        fail(str(exc), USAGE_ERROR)
    if no_auth:
        click.echo(
            f"warning: the run explorer runs without authentication (--no-auth), on {address} only", err=True
        )
    throttle = LoginThrottle(max_login_failures, login_window)
    with cluster_client(settings) as client:
        click.echo(f"graphrunner ui: serving on http://{address}:{port}/", err=True)
        with contextlib.suppress(KeyboardInterrupt):
            serve(client, users, address, port, origins, throttle)
