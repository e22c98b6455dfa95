"""`graphrunner ui`: the run explorer web page and JSON API, never open by accident."""

from __future__ import annotations

import contextlib

import click

from graphrunner.cli.common import USAGE_ERROR, fail


@click.command("ui")
@click.option("--address", default="127.0.0.1", show_default=True, help="The address to listen on.")
@click.option("--port", default=8808, show_default=True, type=click.IntRange(0, 65535), help="The port.")
@click.option(
    "--basic-auth",
    "basic_auth",
    multiple=True,
    metavar="USER:PASSWORD",
    envvar="GRAPHRUNNER_UI_BASIC_AUTH",
    help="A user allowed in (repeat, or comma-separate, for several). Also read from "
    "GRAPHRUNNER_UI_BASIC_AUTH, which keeps passwords out of the process list.",
)
@click.option("--no-auth", is_flag=True, help="Serve without authentication, on loopback only.")
@click.option(
    "--public-url",
    "public_urls",
    multiple=True,
    metavar="URL",
    envvar="GRAPHRUNNER_UI_PUBLIC_URL",
    help="Where users reach the explorer through a proxy (https://runs.example.com): its pages' "
    "cancel and resume are accepted from there too (repeatable; GRAPHRUNNER_UI_PUBLIC_URL).",
)
def ui(
    address: str, port: int, basic_auth: tuple[str, ...], no_auth: bool, public_urls: tuple[str, ...]
) -> None:
    """Serve the run explorer: runs, a run on its graph, its transcript and state, and a JSON API
    under /api (OpenAPI at /api/openapi.json) to submit, cancel and resume runs.

    Every path but /healthcheck needs a user: --basic-auth=user:password. Without one it refuses
    to start unless --no-auth is given, and then serves on loopback only. Reads the cluster's
    Redis from GRAPHRUNNER_REDIS_URL; graphs to submit by id from GRAPHRUNNER_GRAPH_PATH.

    Example: `graphrunner ui --address 0.0.0.0 --port 8808 --basic-auth ops:secret`.
    """
    from graphrunner.cli.connect import cluster_client
    from graphrunner.ui.app import serve
    from graphrunner.ui.auth import UiAuthError, check_address, parse_users, public_origins

    try:
        users = parse_users(basic_auth)
        origins = public_origins(public_urls)
        check_address(address, users=users, no_auth=no_auth)
    except UiAuthError as exc:
        fail(str(exc), USAGE_ERROR)
    if no_auth:
        click.echo(
            f"warning: the run explorer runs without authentication (--no-auth), on {address} only", err=True
        )
    with cluster_client() as client:
        click.echo(f"graphrunner ui: serving on http://{address}:{port}/", err=True)
        with contextlib.suppress(KeyboardInterrupt):
            serve(client, users, address, port, origins)
