"""The `http` tool: one HTTP request with httpx, to addresses the deployment allows.

Each hop (the request, then every redirect, followed here up to `MAX_REDIRECTS`) connects
through `pinned.PinnedTransport`: its host is resolved once, checked against the `AddressPolicy`
of `ToolContext.policy` (link-local and cloud metadata refused always, then
`GRAPHRUNNER_HTTP_DENY` and `GRAPHRUNNER_HTTP_ALLOW`), and the socket opened to the checked
address. A refusal is a permanent `AddressRefused` failure naming host, address and rule.
Proxy variables and .netrc are not read: a proxy would connect where no check could see.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from graphrunner.errors import ToolError
from graphrunner.tools.addresses import AddressPolicy, AddressRefused
from graphrunner.tools.base import ToolContext, effective_timeout, parse_params

if TYPE_CHECKING:
    import httpx

DEFAULT_TIMEOUT = 30.0
MAX_REDIRECTS = 20  # as httpx follows by default
BODY_SNIPPET = 200

QueryValue = str | int | float | bool | None


class HttpParams(BaseModel):
    """Params of `http`; `json` and `body` are two ways to send a body (not both)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    method: str = "GET"
    url: str
    headers: dict[str, str] | None = None
    params: dict[str, QueryValue | list[QueryValue]] | None = None
    json_body: Any = Field(default=None, alias="json")
    body: str | None = None
    timeout: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    check: bool = True
    follow_redirects: bool = True

    @field_validator("method")
    @classmethod
    def _upper(cls, value: str) -> str:
        """Methods are upper case tokens."""
        method = value.strip().upper()
        if not method.isalpha():
            raise ValueError(f"{value!r} is not an HTTP method")
        return method

    @model_validator(mode="after")
    def _one_body(self) -> HttpParams:
        """At most one of json / body."""
        if self.json_body is not None and self.body is not None:
            raise ValueError("give json or body, not both")
        return self


class HttpTool:
    """`http`: sends a request; 429 and 5xx are transient errors, other 4xx permanent."""

    name = "http"
    version = "1"

    async def run(self, params: dict[str, Any], context: ToolContext) -> Any:
        """Send the request; return status, headers, data, success and duration."""
        p = parse_params(HttpParams, params, self.name)
        timeout = effective_timeout(p.timeout, context.timeout) or DEFAULT_TIMEOUT
        started = time.monotonic()
        response = await _send(p, timeout, context.policy.http)
        result = {
            "status": response.status_code,
            "headers": {k.lower(): v for k, v in response.headers.items()},
            "data": _data(response),
            "success": 200 <= response.status_code < 400,
            "duration_ms": round((time.monotonic() - started) * 1000),
        }
        if p.check:
            _check_status(p, response)
        return result


async def _send(p: HttpParams, timeout: float, policy: AddressPolicy) -> httpx.Response:
    """Send the request within `timeout` seconds in all; transport errors and refused
    addresses become ToolErrors."""
    import httpx  # on first use: loading a graph or a worker need not pay for it

    from graphrunner.tools.builtin.pinned import PinnedTransport

    try:
        transport = PinnedTransport(policy)
        async with httpx.AsyncClient(transport=transport, timeout=timeout, trust_env=False) as client:
            return await asyncio.wait_for(_exchange(client, p), timeout)
    except AddressRefused as exc:
        hop = "" if exc.url is None else f" at its redirect to {exc.url}"
        raise _error(p, f"refused{hop}: {exc}", "AddressRefused", "permanent") from exc
    except (TimeoutError, httpx.TimeoutException) as exc:
        raise _error(p, f"timed out after {timeout:g} s", "RemoteTimeout", "transient") from exc
    except (httpx.InvalidURL, httpx.UnsupportedProtocol) as exc:
        raise _error(p, f"bad url: {exc}", "InvalidURL", "validation") from exc
    except httpx.TransportError as exc:
        raise _error(p, f"{type(exc).__name__}: {exc}", "ConnectionError", "transient") from exc
    except httpx.HTTPError as exc:
        raise _error(p, f"{type(exc).__name__}: {exc}", type(exc).__name__, "permanent") from exc


async def _exchange(client: httpx.AsyncClient, p: HttpParams) -> httpx.Response:
    """Send the request, then follow its redirects one hop at a time (each hop's connection is
    checked where it is made); more than `MAX_REDIRECTS` is `TooManyRedirects`."""
    import httpx

    request = client.build_request(
        p.method, p.url, headers=p.headers, params=p.params, json=p.json_body, content=p.body
    )
    for hop in range(MAX_REDIRECTS + 1):
        try:
            response = await client.send(request)
        except AddressRefused as exc:
            exc.url = str(request.url) if hop else None
            raise
        if not p.follow_redirects or response.next_request is None:
            return response
        request = response.next_request
    raise httpx.TooManyRedirects(f"more than {MAX_REDIRECTS} redirects", request=request)


def _error(p: HttpParams, what: str, kind: str, classification: str) -> ToolError:
    """A ToolError naming the request."""
    return ToolError(
        f"tool 'http': {p.method} {p.url} {what}", error_type=kind, classification=classification
    )


def _is_json(response: httpx.Response) -> bool:
    """True if the content type is JSON (`application/json` or `...+json`)."""
    content_type: str = response.headers.get("content-type", "")
    media = content_type.split(";")[0].strip().lower()
    return media == "application/json" or media.endswith("+json")


def _data(response: httpx.Response) -> Any:
    """The body: parsed JSON when the content type says JSON and it parses, else text."""
    if _is_json(response):
        try:
            return response.json()
        except ValueError:
            pass
    return response.text


def _check_status(p: HttpParams, response: httpx.Response) -> None:
    """Raise for 4xx/5xx: 429 and 5xx are transient, the rest permanent."""
    status = response.status_code
    if status < 400:
        return
    transient = status == 429 or status >= 500
    snippet = response.text[:BODY_SNIPPET].strip()
    what = f"returned HTTP {status}" + (f": {snippet}" if snippet else "")
    raise _error(p, what, f"HTTP{status}", "transient" if transient else "permanent")
