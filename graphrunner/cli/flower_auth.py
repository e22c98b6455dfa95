"""Flower behind authentication: refuse to start without it, and guard every path with it.

Flower leaves `/metrics` open even with --basic-auth (it names graphs, nodes and workers), so
`guard_every_path` makes every Flower handler check the user before it answers; only the
health check, which says nothing but `OK`, and the OAuth login pages stay open.
"""

from __future__ import annotations

from typing import Any

from graphrunner.errors import ConfigurationError

LOOPBACK = ("127.0.0.1", "localhost", "::1")
OPEN_HANDLERS = ("Healthcheck",)  # class names that answer without a user
OPEN_MODULES = ("flower.views.auth",)  # the OAuth login handlers


class FlowerAuthError(ConfigurationError):
    """Flower would start without authentication, or with a credential that cannot work."""


def check_options(args: list[str], *, no_auth: bool) -> list[str]:
    """`args` for Flower, checked: auth is configured, or `no_auth` and a loopback address.

    Reads the options as Flower will (its FLOWER_* variables, its config file, the arguments).
    Raises `FlowerAuthError` naming the setting. With `no_auth` and no address, binds 127.0.0.1.
    """
    options = _flower_options(args)
    basic = [c for c in (options.basic_auth or []) if c]
    for credential in basic:
        user, sep, password = credential.partition(":")
        if not (sep and user and password):
            raise FlowerAuthError(
                f"--basic-auth (or FLOWER_BASIC_AUTH) entry {user or credential!r} is not user:password"
            )
    if basic or options.auth:
        return args
    if not no_auth:
        raise FlowerAuthError(
            "Flower needs authentication: give --basic-auth=user:password (or set FLOWER_BASIC_AUTH), "
            "or --no-auth to serve without it on 127.0.0.1 only"
        )
    if not options.address:
        return [*args, "--address=127.0.0.1"]
    if options.address not in LOOPBACK and not options.address.startswith("127."):
        raise FlowerAuthError(
            f"--no-auth serves Flower on loopback only, not on --address={options.address}: "
            "give --basic-auth=user:password (or FLOWER_BASIC_AUTH) to serve it there"
        )
    return args


def _flower_options(args: list[str]) -> Any:
    """Flower's parsed options (tornado's global `options`), from its variables, file and `args`."""
    from flower.command import apply_env_options, apply_options
    from tornado.options import options

    apply_env_options()
    apply_options("graphrunner flower", args)
    return options


def guard_every_path() -> None:
    """Make every Flower page and API answer 401 to a request without a valid user."""
    from flower.api import BaseApiHandler
    from flower.views import BaseHandler

    for cls in (BaseHandler, BaseApiHandler):
        if not getattr(cls.prepare, "graphrunner_guard", False):
            cls.prepare = _guarded(cls.prepare)


def _guarded(original: Any) -> Any:
    def prepare(handler: Any) -> Any:
        from tornado.web import HTTPError

        kind = type(handler)
        open_path = kind.__name__ in OPEN_HANDLERS or kind.__module__ in OPEN_MODULES
        # basic auth raises 401 itself for wrong credentials; OAuth pages redirect to the login
        if not open_path and not handler.current_user and not _oauth_page(handler):
            raise HTTPError(401)
        return original(handler)

    prepare.graphrunner_guard = True  # type: ignore[attr-defined]
    return prepare


def _oauth_page(handler: Any) -> bool:
    """A web page under OAuth only: Flower's own `@authenticated` sends the browser to log in."""
    from flower.api import BaseApiHandler

    options = handler.application.options
    page = not isinstance(handler, BaseApiHandler) and type(handler).__name__ != "Metrics"
    return bool(page and options.auth and not options.basic_auth)
