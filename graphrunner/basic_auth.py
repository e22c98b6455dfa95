"""What the run explorer and `graphrunner flower` share about who is asking: `user:password`
logins, a Basic credential read as bytes, compared in constant time, and loopback decided on IP
addresses, never on names; without a login a server listens on a loopback IP only.

`hmac.compare_digest` raises `TypeError` for non-ASCII text, which made a non-ASCII password a
500; both servers compare SHA-256 digests of UTF-8 bytes, against every login, so the time
taken tells neither which users exist nor which part was wrong. `127.evil.example` resolves
wherever its owner likes: only an address that parses as a loopback IP is loopback.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import ipaddress
from collections.abc import Iterable, Iterator
from enum import Enum

from graphrunner.errors import ConfigurationError


class Refusal(Enum):
    """Why a server may not start with the logins and address it was given."""

    BOTH = "logins and --no-auth given together"
    NO_LOGIN = "neither a login nor --no-auth given"
    NOT_LOOPBACK = "--no-auth on an address that is not a loopback IP"


def refusal(*, logins: bool, no_auth: bool, address: str) -> Refusal | None:
    """Why a server with (or without) `logins` may not listen on `address`, else None: it needs a
    login, or `no_auth` and a loopback IP address, never both."""
    if logins:
        return Refusal.BOTH if no_auth else None
    if not no_auth:
        return Refusal.NO_LOGIN
    return None if is_loopback_ip(address) else Refusal.NOT_LOOPBACK


def split_logins(
    entries: Iterable[str], setting: str, error: type[ConfigurationError]
) -> Iterator[tuple[str, str]]:
    """`(user, password)` of each `user:password` entry (the password may hold colons), as read;
    raises `error` naming `setting` for an entry whose user or password is missing."""
    for entry in entries:
        user, sep, password = entry.partition(":")
        if not (sep and user and password):
            raise error(f"{setting} entry {user or entry!r} is not user:password")
        yield user, password


def credential(header: str | None) -> tuple[bytes, bytes] | None:
    """`(user, password)` of an `Authorization: Basic ...` header, as UTF-8 bytes; None when there is
    none or it cannot be read (not base64, not UTF-8, no colon)."""
    scheme, _, encoded = (header or "").strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(encoded.strip().encode("ascii"), validate=True)
        decoded.decode("utf-8")
    except (binascii.Error, UnicodeError, ValueError):
        return None
    user, sep, password = decoded.partition(b":")
    return (user, password) if sep else None


def matching_user(header: str | None, logins: Iterable[tuple[str, bytes]]) -> str | None:
    """The user of `logins` (`(name, password bytes)` pairs) whose credential `header` carries, else
    None; every login is compared, as digests of equal length and in constant time."""
    given = credential(header)
    user, password = (_digest(part) for part in (given or (b"", b"")))
    found = None
    for name, secret in logins:
        same_user = hmac.compare_digest(user, _digest(name.encode()))
        same_password = hmac.compare_digest(password, _digest(secret))
        if same_user & same_password and given is not None:
            found = name
    return found


def is_loopback_ip(text: str) -> bool:
    """Whether `text` is a loopback IP address (127.0.0.0/8, ::1; brackets allowed), never a name
    that resolves to one, `localhost` included."""
    try:
        return ipaddress.ip_address(text.strip("[]")).is_loopback
    except ValueError:
        return False


def is_loopback_host(name: str) -> bool:
    """Whether a request's Host name (without its port; an IPv6 address in brackets) names
    loopback: `localhost` or a loopback IP, never a name that merely resolves to one."""
    return name.lower() == "localhost" or is_loopback_ip(name)


def _digest(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()
