"""Which requests may change a run: the explorer's defence against cross-site request forgery.

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

from collections.abc import Collection, Mapping
from urllib.parse import urlsplit

SAFE_SITES = ("same-origin", "none")
JSON = "application/json"


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
