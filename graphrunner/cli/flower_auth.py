"""Flower behind authentication and read-only: refuse to start without auth, guard every request.

Flower leaves `/metrics` open even with --basic-auth (it names graphs, nodes and workers), and
its API sends tasks, revokes them and restarts or shuts down worker pools for anyone logged in
(a forged `graphrunner.item` message included). `guard_flower` makes every Flower handler check,
before it answers:
- the Host, under --no-auth: a loopback name or IP only (a DNS-rebinding page names its own);
- the Origin, when a browser sends one: Flower's own host only (no cross-origin reads);
- the user (basic auth compared as bytes; only the health check, which says nothing but `OK`,
  and the OAuth login pages stay open);
- the route: unless --allow-control, only the allow-list below, the routes that only read;
  anything else, a route a later Flower adds included, answers 403.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from graphrunner.basic_auth import Refusal, is_loopback_host, matching_user, refusal, split_logins
from graphrunner.errors import ConfigurationError
from graphrunner.placeholders import placeholder_problem

BASIC_AUTH = "--basic-auth (or FLOWER_BASIC_AUTH)"
OPEN_HANDLERS = ("Healthcheck",)  # class names that answer without a user
OPEN_MODULES = ("flower.views.auth",)  # the OAuth login handlers (GET only)
READ = frozenset({"GET", "HEAD", "OPTIONS"})
READ_AND_POST = READ | {"POST"}
# Flower's handlers that only read, and the methods allowed on them without --allow-control.
# Every other handler and method is refused: see tests/unit/test_flower_auth.py for the control ones.
READ_ONLY: dict[str, frozenset[str]] = {
    "flower.views.workers.WorkersView": READ,
    "flower.views.workers.WorkerView": READ,
    "flower.views.tasks.TaskView": READ,
    "flower.views.tasks.TasksView": READ,
    "flower.views.tasks.TasksDataTable": READ_AND_POST,  # the task list queries by POST
    "flower.views.broker.BrokerView": READ,
    "flower.views.monitor.Metrics": READ,
    "flower.views.monitor.Healthcheck": READ,
    "flower.views.error.NotFoundErrorHandler": READ_AND_POST,  # answers 404 to both
    "flower.api.workers.ListWorkers": READ,
    "flower.api.tasks.ListTasks": READ,
    "flower.api.tasks.ListTaskTypes": READ,
    "flower.api.tasks.GetQueueLengths": READ,
    "flower.api.tasks.TaskInfo": READ,
    "flower.api.tasks.TaskResult": READ,
}
REFUSED = {
    Refusal.BOTH: f"give either {BASIC_AUTH} or Flower's --auth, or --no-auth, not both",
    Refusal.NO_LOGIN: "Flower needs authentication: give --basic-auth=user:password (or set "
    "FLOWER_BASIC_AUTH), or --no-auth to serve without it on 127.0.0.1 only",
    Refusal.NOT_LOOPBACK: "--no-auth serves Flower on a loopback IP only (127.0.0.1, ::1), not on "
    "--address={address}: give --basic-auth=user:password (or FLOWER_BASIC_AUTH) to serve it there",
}
CONTROL_REFUSED = (
    "Flower is read-only under graphrunner: %s %s is refused, as are all of Flower's control "
    "endpoints (send, apply, revoke or abort tasks, change their limits, resize, restart or shut "
    "down workers). Start it with `graphrunner flower --allow-control` to enable them"
)


class FlowerAuthError(ConfigurationError):
    """Flower would start without authentication, or with a credential that cannot work."""


def check_options(args: list[str], *, no_auth: bool) -> list[str]:
    """`args` for Flower, checked: auth is configured, or `no_auth` and a loopback IP address.

    Reads the options as Flower will (its FLOWER_* variables, its config file, the arguments).
    Raises `FlowerAuthError` naming the setting. With `no_auth` and no address, binds 127.0.0.1.
    """
    options = _flower_options(args)
    basic = [c for c in (options.basic_auth or []) if c]
    logins = list(split_logins(basic, BASIC_AUTH, FlowerAuthError))
    problem = placeholder_problem(BASIC_AUTH, [password for _, password in logins])
    if problem:
        raise FlowerAuthError(problem)
    address = options.address or "127.0.0.1"
    refused = refusal(logins=bool(basic or options.auth), no_auth=no_auth, address=address)
    if refused is not None:
        raise FlowerAuthError(REFUSED[refused].format(address=address))
    return args if options.address or not no_auth else [*args, "--address=127.0.0.1"]


def _flower_options(args: list[str]) -> Any:
    """Flower's parsed options (tornado's global `options`), from its variables, file and `args`."""
    from flower.command import apply_env_options, apply_options
    from tornado.options import options

    apply_env_options()
    apply_options("graphrunner flower", args)
    return options


def basic_credential_ok(header: str, credentials: Iterable[str]) -> bool:
    """Whether an `Authorization: Basic ...` header holds one of the `user:password` credentials
    (compared as bytes, in constant time, against every one: `graphrunner.basic_auth`); a header
    that does not decode (bad base64, non-UTF-8, no colon) is simply not a user."""
    logins = [(user, password.encode()) for user, _, password in (c.partition(":") for c in credentials)]
    return matching_user(header, logins) is not None


def read_only_route(kind: type, method: str) -> bool:
    """Whether `method` on the Flower handler class `kind` only reads (it is on the allow-list)."""
    if kind.__module__ in OPEN_MODULES:
        return method in READ
    return method in READ_ONLY.get(f"{kind.__module__}.{kind.__qualname__}", frozenset())


def guard_flower(*, allow_control: bool, loopback_only: bool) -> None:
    """Make every Flower page and API check Host, Origin, user and route before it answers.

    `loopback_only` (--no-auth): answer only requests whose Host names loopback.
    `allow_control`: let logged-in users reach Flower's control endpoints.
    """
    from flower.api import BaseApiHandler
    from flower.views import BaseHandler

    _check_routes()
    for cls in (BaseHandler, BaseApiHandler):
        original = getattr(cls.prepare, "graphrunner_original", cls.prepare)
        cls.prepare = _guarded(original, allow_control=allow_control, loopback_only=loopback_only)
    BaseHandler.get_current_user = _current_user


def _check_routes() -> None:
    """Raise `FlowerAuthError` if this Flower serves a route that `guard_flower` cannot guard."""
    from flower.urls import handlers
    from flower.views import BaseHandler
    from tornado.web import StaticFileHandler

    kinds = [getattr(route, "handler_class", None) or route[1] for route in handlers]
    outside = [k.__name__ for k in kinds if not issubclass(k, (BaseHandler, StaticFileHandler))]
    if outside:
        raise FlowerAuthError(
            f"this Flower serves {', '.join(outside)} outside its BaseHandler, where graphrunner "
            "cannot check users: use the Flower version graphrunner pins"
        )


def _guarded(original: Any, *, allow_control: bool, loopback_only: bool) -> Any:
    def prepare(handler: Any) -> Any:
        from tornado.web import HTTPError

        request = handler.request
        if loopback_only and not is_loopback_host(request.host_name):
            raise HTTPError(
                403, "Host %s refused: without auth Flower answers to loopback only", request.host
            )
        refused = _cross_origin(request)
        if refused:
            raise HTTPError(403, "%s", refused)
        kind = type(handler)
        open_path = kind.__name__ in OPEN_HANDLERS or kind.__module__ in OPEN_MODULES
        # basic auth raises 401 itself for wrong credentials; OAuth pages redirect to the login
        if not open_path and not handler.current_user and not _oauth_page(handler):
            raise HTTPError(401)
        if not allow_control and not read_only_route(kind, request.method):
            raise HTTPError(403, CONTROL_REFUSED, request.method, request.path)
        return original(handler)

    prepare.graphrunner_original = original  # type: ignore[attr-defined]
    return prepare


def _cross_origin(request: Any) -> str | None:
    """Why a request comes from another site's page (a message), or None.

    An `Origin` other than Flower's own host is refused for every method (Flower answers
    `Access-Control-Allow-Origin: *` when it runs without auth); a state-changing method also
    needs `Sec-Fetch-Site`, when sent, to say the page is Flower's own.
    """
    origin = request.headers.get("Origin")
    if origin is not None and urlsplit(origin).netloc != request.host:
        return f"cross-origin request refused (Origin: {origin})"
    site = request.headers.get("Sec-Fetch-Site")
    if request.method not in READ and site is not None and site not in ("same-origin", "none"):
        return f"cross-site request refused (Sec-Fetch-Site: {site})"
    return None


def _current_user(handler: Any) -> Any:
    """Flower's `get_current_user`, its basic-auth check made to answer 401 to any bad header."""
    from flower.utils.authentication import authenticate
    from tornado.web import HTTPError

    options = handler.application.options
    if options.basic_auth:
        header = handler.request.headers.get("Authorization", "")
        if not basic_credential_ok(header, (c for c in options.basic_auth if c)):
            raise HTTPError(401)
    if not options.auth:
        return True
    user = handler.get_secure_cookie("user")  # Flower's OAuth session, as Flower reads it
    if user:
        user = user.decode() if isinstance(user, bytes) else user
        if authenticate(options.auth, user):
            return user
    return None


def _oauth_page(handler: Any) -> bool:
    """A web page under OAuth only: Flower's own `@authenticated` sends the browser to log in."""
    from flower.api import BaseApiHandler

    options = handler.application.options
    page = not isinstance(handler, BaseApiHandler) and type(handler).__name__ != "Metrics"
    return bool(page and options.auth and not options.basic_auth)
