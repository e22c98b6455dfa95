"""Who may use the run explorer: basic-auth logins, checked on every request, and where it may listen.

As `graphrunner flower`: the explorer refuses to start without a login unless told `--no-auth`,
and then serves on a loopback IP address only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from urllib.parse import urlsplit

from graphrunner.basic_auth import Refusal, matching_user, refusal, split_logins
from graphrunner.placeholders import placeholder_problem
from graphrunner.ui.logins import Login, UiAuthError

__all__ = ["UiAuthError", "basic_user", "check_address", "parse_users", "public_origins"]

REFUSED = {
    Refusal.BOTH: "give either --basic-auth/--users or --no-auth, not both",
    Refusal.NO_LOGIN: "the run explorer needs authentication: give --basic-auth=user:password or "
    "--users=FILE, or --no-auth to serve without it on 127.0.0.1 only",
    Refusal.NOT_LOOPBACK: "--no-auth serves the run explorer on a loopback IP address only (127.0.0.1, "
    "::1), not on --address={address}: give --basic-auth=user:password to serve it there",
}


def parse_users(values: Iterable[str]) -> dict[str, Login]:
    """`user:password` entries (each may hold several, comma-separated) as logins by user; they get
    no capabilities beyond the pure built-ins. Raises `UiAuthError` for a malformed entry or a
    placeholder password."""
    users: dict[str, Login] = {}
    entries = (credential.strip() for value in values for credential in value.split(","))
    for user, password in split_logins(entries, "--basic-auth", UiAuthError):
        problem = placeholder_problem(f"--basic-auth (GRAPHRUNNER_UI_BASIC_AUTH) user {user!r}", [password])
        if problem is not None:
            raise UiAuthError(problem)
        users[user] = Login(password.encode())
    return users


def merge_users(flags: Mapping[str, Login], file: Mapping[str, Login]) -> dict[str, Login]:
    """The logins of `--basic-auth` and of the users file; raises `UiAuthError` for a name in both."""
    both = sorted(set(flags) & set(file))
    if both:
        raise UiAuthError(f"user {both[0]!r} is given both by --basic-auth and in the users file: keep one")
    return {**file, **flags}


def check_address(address: str, *, users: Mapping[str, Login], no_auth: bool) -> None:
    """Raise `UiAuthError` unless there are users, or `no_auth` on a loopback IP `address`."""
    refused = refusal(logins=bool(users), no_auth=no_auth, address=address)
    if refused is not None:
        raise UiAuthError(REFUSED[refused].format(address=address))


def basic_user(header: str | None, users: Mapping[str, Login]) -> str | None:
    """The user an `Authorization: Basic ...` header names with their password, else None (every
    login compared in constant time: `graphrunner.basic_auth`)."""
    return matching_user(header, ((name, login.password) for name, login in users.items()))


def public_origins(urls: Iterable[str]) -> tuple[str, ...]:
    """The origins (`scheme://host[:port]`) of the URLs users reach the explorer at through a
    proxy, where its pages may send actions from; raises `UiAuthError` for a URL that is not one."""
    origins = []
    for url in urls:
        parts = urlsplit(url.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise UiAuthError(f"--public-url {url!r} is not an http:// or https:// URL with a host")
        origins.append(f"{parts.scheme}://{parts.netloc}")
    return tuple(origins)
