"""The handler every explorer page and API answer derives from: the Host allow-list, auth (slowed
after failed logins), the actions' guard, bodies read within the nesting limit, errors as JSON."""

from __future__ import annotations

import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any, TypeVar

from tornado.ioloop import IOLoop
from tornado.web import HTTPError, RequestHandler, StaticFileHandler

from graphrunner.errors import (
    CancelError,
    ForkError,
    GraphNotFound,
    GraphrunnerError,
    GraphValidationError,
    HistoryUnavailable,
    InvalidCapabilities,
    InvalidRunId,
    InvalidRunQuery,
    ResumeError,
    RunConflict,
    RunNotFound,
    RunRefused,
    ScheduleError,
    ScheduleNotFound,
    StateValidationError,
    StoreUnavailable,
)
from graphrunner.limits import MAX_DEPTH
from graphrunner.ui.auth import basic_user
from graphrunner.ui.guard import cross_site, host_problem, json_body
from graphrunner.ui.logins import ANONYMOUS, Login
from graphrunner.ui.permits import SubmitRefused

T = TypeVar("T")
MAX_BODY = 1 << 20  # 1 MiB of JSON for a submit or a state patch
REALM = 'Basic realm="graphrunner", charset="UTF-8"'
TOO_DEEP = (
    f"the body is nested too deeply: inputs, state and state patches may nest {MAX_DEPTH} levels "
    "(the nesting limit)"
)
STATUS_OF: tuple[tuple[type[GraphrunnerError], int], ...] = (
    (RunNotFound, 404),
    (GraphNotFound, 404),
    (ScheduleNotFound, 404),
    (HistoryUnavailable, 404),
    (InvalidRunId, 400),
    (InvalidRunQuery, 400),
    (GraphValidationError, 422),
    (StateValidationError, 422),
    (InvalidCapabilities, 422),
    (RunConflict, 409),
    (RunRefused, 409),
    (CancelError, 409),
    (ResumeError, 409),
    (ForkError, 409),
    (ScheduleError, 422),
    (StoreUnavailable, 503),
)


def status_of(exc: GraphrunnerError) -> int:
    """The HTTP status that reports `exc`: 404 for what does not exist, 409 for a conflict, ..."""
    return next((code for kind, code in STATUS_OF if isinstance(exc, kind)), 400)


class ApiError(HTTPError):
    """An HTTP error with the error's type and message (and `details`) for the JSON body, and
    `headers` for the answer."""

    def __init__(
        self,
        status: int,
        kind: str,
        message: str,
        details: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(status, reason=None)
        self.kind = kind
        self.message = message
        self.details = details or {}
        self.headers = headers or {}


def admit(handler: RequestHandler) -> tuple[str | None, Login]:
    """The user and login a request comes with (None and `ANONYMOUS` without auth); raises
    `ApiError`: 421 for a Host not allowed, 429 while its client is slowed, 401 without a login."""
    explorer, request = handler.application.settings["graphrunner"], handler.request
    refused = host_problem(request.host, explorer.hosts)
    if refused:
        raise ApiError(421, "MisdirectedRequest", refused)
    if not explorer.users:
        return None, ANONYMOUS
    client = request.remote_ip or ""
    wait = explorer.throttle.retry_after(client)
    if wait is not None:
        message = f"too many failed logins from {client}: try again in {wait} s"
        raise ApiError(429, "TooManyRequests", message, headers={"Retry-After": str(wait)})
    header = request.headers.get("Authorization")
    user = basic_user(header, explorer.users)
    if user is None:
        if header is not None:
            explorer.throttle.failed(client)
        raise ApiError(401, "Unauthorized", "authentication required (HTTP basic auth)")
    return user, explorer.users[user]


class Base(RequestHandler):
    """Checks the Host and the user on every request, and the origin and token of every action."""

    open = False  # /healthcheck answers without a user, whatever the Host (a platform's probe)
    user: str | None = None
    login: Login = ANONYMOUS

    def initialize(self) -> None:
        self.explorer = self.application.settings["graphrunner"]

    def prepare(self) -> None:
        if self.open:
            return
        self.user, self.login = admit(self)
        if self.request.method not in ("GET", "HEAD", "OPTIONS"):
            self._guard_action()

    def _guard_action(self) -> None:
        own = (f"{self.request.protocol}://{self.request.host}", *self.explorer.origins)
        refused = cross_site(self.request.headers, own)
        if refused:
            raise ApiError(403, "CrossSiteRequest", refused)
        if not json_body(self.request.headers):  # even with no body: a form cannot send this
            raise ApiError(415, "UnsupportedMediaType", "send the body as Content-Type: application/json")
        if "Cookie" in self.request.headers:
            try:
                self.check_xsrf_cookie()
            except HTTPError:
                raise ApiError(
                    403, "XsrfTokenMissing", "a request with cookies needs the page's X-XSRFToken"
                ) from None

    def json_body(self) -> dict[str, Any]:
        """The request's JSON object body ({} when empty); 400 for anything else."""
        if len(self.request.body) > MAX_BODY:
            raise ApiError(413, "PayloadTooLarge", f"the body is over {MAX_BODY} bytes")
        if not self.request.body.strip():
            return {}
        try:
            body = json.loads(self.request.body, parse_constant=_not_json)
        except RecursionError:
            raise ApiError(400, "BadJson", TOO_DEEP) from None
        except (ValueError, UnicodeError) as exc:
            raise ApiError(400, "BadJson", f"the body is not JSON: {str(exc)[:200]}") from None
        if not isinstance(body, dict):
            raise ApiError(400, "BadJson", "the body must be a JSON object")
        return body

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        """`fn(*args)` on the explorer's threads (store reads block), its errors as HTTP errors."""
        try:
            return await IOLoop.current().run_in_executor(self.explorer.executor, fn, *args)
        except SubmitRefused as exc:
            raise ApiError(403, "PermissionDenied", str(exc), exc.details) from None
        except GraphrunnerError as exc:
            raise ApiError(status_of(exc), type(exc).__name__, str(exc)) from None
        except RecursionError:  # a value nested past what Python's JSON reads: the limit says more
            raise ApiError(400, "BadJson", TOO_DEEP) from None

    def send_json(self, body: Any, status: int = 200) -> None:
        self.set_status(status)
        self.set_header("Content-Type", "application/json; charset=UTF-8")
        self.finish(json.dumps(body, default=str))

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        kind, message, details = problem(self, status_code, kwargs.get("exc_info"))
        self.write_problem(status_code, kind, message, details)

    def write_problem(
        self, status_code: int, kind: str, message: str, details: dict[str, Any] | None = None
    ) -> None:
        """An error answer: JSON `{"error": {type, message, ...details}}` (pages render it as HTML)."""
        self.set_header("Content-Type", "application/json; charset=UTF-8")
        self.finish(json.dumps({"error": {"type": kind, "message": message, **(details or {})}}))

    def set_default_headers(self) -> None:
        self.set_header("X-Content-Type-Options", "nosniff")
        self.set_header("X-Frame-Options", "DENY")
        self.set_header("Referrer-Policy", "same-origin")
        self.set_header(
            "Content-Security-Policy",
            "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; "
            "frame-ancestors 'none'; form-action 'self'",
        )


class Page(Base):
    """An HTML page: errors are a page too."""

    def get_template_namespace(self) -> dict[str, Any]:
        return {**super().get_template_namespace(), "when": when}

    def write_problem(
        self, status_code: int, kind: str, message: str, details: dict[str, Any] | None = None
    ) -> None:
        self.set_header("Content-Type", "text/html; charset=UTF-8")
        self.render("error.html", status=status_code, kind=kind, message=message)


class Static(StaticFileHandler):
    """The package's CSS and JS, behind the same Host check and users as everything else."""

    def prepare(self) -> None:
        admit(self)

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        kind, message, details = problem(self, status_code, kwargs.get("exc_info"))
        self.set_header("Content-Type", "application/json; charset=UTF-8")
        self.finish(json.dumps({"error": {"type": kind, "message": message, **details}}))


def problem(handler: RequestHandler, status_code: int, exc_info: Any) -> tuple[str, str, dict[str, Any]]:
    """The type, message and details of an error answer; sets its headers (`WWW-Authenticate`, ...)."""
    if status_code == 401:
        handler.set_header("WWW-Authenticate", REALM)
    exc = (exc_info or (None, None, None))[1]
    if isinstance(exc, ApiError):
        for name, value in exc.headers.items():
            handler.set_header(name, value)
        return exc.kind, exc.message, exc.details
    reason = handler._reason
    return reason, getattr(exc, "log_message", None) or reason, {}


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def when(ms: int | None) -> str:
    """Epoch milliseconds as `YYYY-MM-DD HH:MM:SS` in UTC."""
    if not ms:
        return ""
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")


def executor(threads: int = 8) -> ThreadPoolExecutor:
    """The threads store reads run on, so one slow read never stalls the server."""
    return ThreadPoolExecutor(threads, thread_name_prefix="graphrunner-ui")
