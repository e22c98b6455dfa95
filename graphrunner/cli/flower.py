"""`graphrunner flower [flower options]`: Flower against the configured broker, never open by accident."""

from __future__ import annotations

import sys

import click

from graphrunner.cli.common import OWN_HELP, USAGE_ERROR, fail
from graphrunner.cli.connect import server_settings


@click.command("flower", context_settings=OWN_HELP)
@click.option("--no-auth", is_flag=True, help="Serve without authentication, on a loopback IP only.")
@click.option(
    "--allow-control",
    is_flag=True,
    help="Enable Flower's control endpoints: send, revoke, limit tasks; resize, restart, stop workers.",
)
@click.argument("flower_args", nargs=-1, type=click.UNPROCESSED)
def flower(no_auth: bool, allow_control: bool, flower_args: tuple[str, ...]) -> None:
    """Run Flower against the configured broker, read-only; every other option goes to Flower.

    Flower needs authentication: --basic-auth=user:password (or FLOWER_BASIC_AUTH, comma-separated
    for several users), or Flower's OAuth (--auth with its FLOWER_OAUTH2_* settings). Every path is
    behind it, /metrics and /api included; only /healthcheck answers without it. A placeholder
    password (change-me) is refused. Without auth it refuses to start unless --no-auth is given,
    and then serves on 127.0.0.1 (or another loopback IP given as --address) and answers only
    requests whose Host is a loopback name.

    Flower is read-only: its control endpoints (send-task, apply, revoke, abort, rate-limit,
    time limits, pool grow/shrink/autoscale/restart, add/cancel consumer, shutdown) and any
    route not known to only read answer 403, since a Flower login could otherwise send any
    message to the workers. --allow-control enables them, for every user who can log in.

    Examples: `graphrunner flower --basic-auth=ops:secret --port=5555`,
    `graphrunner flower --no-auth` (on a laptop). Flower turns task events on in the workers.
    """
    from graphrunner.cli.flower_auth import FlowerAuthError, check_options, guard_flower
    from graphrunner.cluster.transport.app import create_app

    args = list(flower_args)
    if "-h" in args or "--help" in args:
        _help_with_flower_options()
    try:
        args = check_options(args, no_auth=no_auth)
        guard_flower(allow_control=allow_control, loopback_only=no_auth)
    except FlowerAuthError as exc:
        fail(str(exc), USAGE_ERROR)
    if no_auth:
        click.echo("warning: Flower runs without authentication (--no-auth), on loopback only", err=True)
    if allow_control:
        click.echo(
            "warning: Flower's control endpoints are on (--allow-control): whoever can log in "
            "can send tasks to the workers, revoke tasks, and restart or shut down workers",
            err=True,
        )
    else:
        args.append("--read_only=True")  # Flower hides its control buttons; the guard refuses the routes
    create_app(server_settings()).start(["flower", *args])


def _help_with_flower_options() -> None:
    """Our help, then every option Flower takes (as --name=value)."""
    import flower.options  # noqa: F401  (defines Flower's options)
    from tornado.options import options

    click.echo(click.get_current_context().get_help())
    click.echo("\nFlower's own options, passed through as --name=value:")
    options.print_help(sys.stdout)
    raise click.exceptions.Exit(0)
