"""Which requests the explorer answers: the Host allow-list (against DNS rebinding) and, for the
requests that may change a run, its defence against cross-site request forgery.

Every request but `/healthcheck` must name, in `Host`, a loopback name (`localhost`, a loopback
IP such as `127.0.0.1` or `[::1]`, any port), the IP address it listens on, or the host of a
`--public-url`: a page on another site whose name was rebound to this server's address sends its
own name, and is refused before anything else is looked at.

Basic-auth credentials are ambient (a browser sends them with every request to the site, as it
sends cookies), so an action is refused unless it could only come from the page itself or from
a program that is not a browser:
- `Sec-Fetch-Site`, when sent, must be `same-origin` or `none`;
- `Origin` (and, without it, `Referer`), when sent, must be this server's own origin;
- the body must be `application/json`, which an HTML form cannot send and a cross-site
  `fetch` can send only after a CORS preflight that this server never approves;
- a request carrying cookies must carry the page's XSRF token (`X-XSRFToken`, Tornado's
  double-submit check), done by the handler.
A producer in another language (no cookies, no `Origin`) needs only its credentials.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from urllib.parse import urlsplit

from graphrunner.basic_auth import is_loopback_host

SAFE_SITES = ("same-origin", "none")
JSON = "application/json"
ANY_ADDRESS = ("0.0.0.0", "::", "")


def allowed_hosts(address: str, origins: Iterable[str]) -> frozenset[str]:
    """The host names (lower case, IPv6 without brackets) requests may name besides loopback ones:
    the listening IP address unless it is every address, and the hosts of `origins`."""
    hosts = {urlsplit(origin).hostname or "" for origin in origins}
    if address not in ANY_ADDRESS:
        hosts.add(address.strip("[]").lower())
    return frozenset(hosts - {""})


def host_problem(host: str, allowed: Collection[str]) -> str | None:
    """Why a request's `Host` is refused (a message), or None when it is loopback or `allowed`."""
    name = _host_name(host)
    if name and (is_loopback_host(name) or name in allowed):
        return None
    return (
        f"Host {host[:100]!r} is not one this run explorer answers to: use localhost or 127.0.0.1, "
        "or start it with --public-url for the name users reach it at"
    )


def _host_name(host: str) -> str:
    """The name in a `Host` value (`name[:port]`, `[v6]:port`), lower case; '' when malformed."""
    try:
        parts = urlsplit(f"//{host}")
        _ = parts.port  # a port that is not a number in range raises
    except ValueError:
        return ""
    if parts.netloc != host or "@" in host:  # a path, query, fragment or user in it
        return ""
    return parts.hostname or ""


def cross_site(headers: Mapping[str, str], own_origins: Collection[str]) -> str | None:
    """Why a request looks cross-site (a message), or None when nothing says it is; `own_origins`
    are where the page is served from (this server's address, and a proxy's in front of it)."""
    site = headers.get("Sec-Fetch-Site")
    if site is not None and site not in SAFE_SITES:
        return f"cross-site request refused (Sec-Fetch-Site: {site})"
    origin = headers.get("Origin")
    if origin is not None:
        return None if origin in own_origins else f"cross-site request refused (Origin: {origin})"
    referer = headers.get("Referer")
    if referer:
        parts = urlsplit(referer)
        if f"{parts.scheme}://{parts.netloc}" not in own_origins:
            return "cross-site request refused (Referer from another site)"
    return None


def json_body(headers: Mapping[str, str]) -> bool:
    """The request says its body is JSON (`Content-Type: application/json`, any parameters)."""
    return headers.get("Content-Type", "").split(";")[0].strip().lower() == JSON
