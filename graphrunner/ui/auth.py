"""Who may use the run explorer: basic-auth users, checked on every request, and where it may listen.

As `graphrunner flower`: the explorer refuses to start without a user unless told `--no-auth`,
and then serves on loopback only.
"""

from __future__ import annotations

import base64
import binascii
import hmac
from collections.abc import Iterable, Mapping
from urllib.parse import urlsplit

from graphrunner.errors import ConfigurationError

LOOPBACK = ("127.0.0.1", "localhost", "::1")


class UiAuthError(ConfigurationError):
    """The explorer would start without authentication, or with a credential that cannot work."""


def parse_users(values: Iterable[str]) -> dict[str, str]:
    """`user:password` entries (each may hold several, comma-separated) as passwords by user."""
    users: dict[str, str] = {}
    for value in values:
        for credential in value.split(","):
            user, sep, password = credential.strip().partition(":")
            if not (sep and user and password):
                raise UiAuthError(f"--basic-auth entry {user or credential!r} is not user:password")
            users[user] = password
    return users


def check_address(address: str, *, users: Mapping[str, str], no_auth: bool) -> None:
    """Raise `UiAuthError` unless there are users, or `no_auth` on a loopback `address`."""
    if users:
        if no_auth:
            raise UiAuthError("give either --basic-auth or --no-auth, not both")
        return
    if not no_auth:
        raise UiAuthError(
            "the run explorer needs authentication: give --basic-auth=user:password, "
            "or --no-auth to serve without it on 127.0.0.1 only"
        )
    if address not in LOOPBACK and not address.startswith("127."):
        raise UiAuthError(
            f"--no-auth serves the run explorer on loopback only, not on --address={address}: "
            "give --basic-auth=user:password to serve it there"
        )


def basic_user(header: str | None, users: Mapping[str, str]) -> str | None:
    """The user an `Authorization: Basic ...` header names with their password, else None."""
    scheme, _, encoded = (header or "").partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    user, _, password = decoded.partition(":")
    expected = users.get(user)
    if expected is None:
        hmac.compare_digest(password, password)  # the same work for an unknown user
        return None
    return user if hmac.compare_digest(password.encode(), expected.encode()) else None


def public_origins(urls: Iterable[str]) -> tuple[str, ...]:
    """The origins (`scheme://host[:port]`) of the URLs users reach the explorer at through a
    proxy, where its pages may send actions from; raises `UiAuthError` for a URL that is not one."""
    origins = []
    for url in urls:
        parts = urlsplit(url.strip())
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise UiAuthError(f"--public-url {url!r} is not an http:// or https:// URL with a host")
        origins.append(f"{parts.scheme}://{parts.netloc}")
    return tuple(origins)
