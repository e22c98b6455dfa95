"""`graphrunner flower [flower options]`: Flower against the configured broker, never open by accident."""

from __future__ import annotations

import sys

import click

from graphrunner.cli.common import USAGE_ERROR, fail
from graphrunner.cli.connect import cluster_settings
from graphrunner.cli.worker import OWN_HELP


@click.command("flower", context_settings=OWN_HELP)
@click.option("--no-auth", is_flag=True, help="Serve without authentication, on loopback only.")
@click.argument("flower_args", nargs=-1, type=click.UNPROCESSED)
def flower(no_auth: bool, flower_args: tuple[str, ...]) -> None:
    """Run Flower against the configured broker; every other option goes to Flower.

    Flower needs authentication: --basic-auth=user:password (or FLOWER_BASIC_AUTH, comma-separated
    for several users), or Flower's OAuth (--auth with its FLOWER_OAUTH2_* settings). Every path is
    behind it, /metrics and /api included; only /healthcheck answers without it. Without auth it
    refuses to start unless --no-auth is given, and then serves on 127.0.0.1 only.

    Examples: `graphrunner flower --basic-auth=ops:secret --port=5555`,
    `graphrunner flower --no-auth` (on a laptop). Flower turns task events on in the workers.
    """
    from graphrunner.cli.flower_auth import FlowerAuthError, check_options, guard_every_path
    from graphrunner.cluster.app import create_app

    args = list(flower_args)
    if "-h" in args or "--help" in args:
        _help_with_flower_options()
    try:
        args = check_options(args, no_auth=no_auth)
    except FlowerAuthError as exc:
        fail(str(exc), USAGE_ERROR)
    if no_auth:
        click.echo("warning: Flower runs without authentication (--no-auth), on 127.0.0.1 only", err=True)
    guard_every_path()
    create_app(cluster_settings()).start(["flower", *args])


def _help_with_flower_options() -> None:
    """Our help, then every option Flower takes (as --name=value)."""
    import flower.options  # noqa: F401  (defines Flower's options)
    from tornado.options import options

    click.echo(click.get_current_context().get_help())
    click.echo("\nFlower's own options, passed through as --name=value:")
    options.print_help(sys.stdout)
    raise click.exceptions.Exit(0)
