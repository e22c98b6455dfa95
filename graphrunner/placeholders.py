"""Placeholder passwords: the `change-me` of an example file is refused where a server starts.

The shipped `.env.example` and `deploy/secret.example.yaml` write `change-me` where a secret
belongs; a deployment that copied them unchanged must not come up with a password everyone
knows. `placeholder_problem` names the setting whose password is a placeholder.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

from graphrunner.errors import ConfigurationError

if TYPE_CHECKING:
    from graphrunner.settings import Settings

PLACEHOLDERS = frozenset({"change-me", "changeme", "change_me", "replace-me", "replaceme", "placeholder"})


def is_placeholder(password: str) -> bool:
    """Whether `password` is one of the example files' placeholders (any case, spaces ignored)."""
    return password.strip().lower() in PLACEHOLDERS


def placeholder_problem(setting: str, passwords: Iterable[str]) -> str | None:
    """Why `setting` may not be used (one of its passwords is a placeholder), or None."""
    if any(is_placeholder(p) for p in passwords):
        return (
            f"{setting} still holds the example password 'change-me' (or another placeholder): "
            "set a real secret before starting (docs/security.md)"
        )
    return None


def url_password(url: str | None) -> str:
    """The password in a URL such as `redis://:secret@host:6379/0` ('' when it has none)."""
    if not url:
        return ""
    try:
        return unquote(urlsplit(url).password or "")
    except ValueError:
        return ""


def check_redis_url(settings: Settings) -> None:
    """Raise `ConfigurationError` when GRAPHRUNNER_REDIS_URL's password is a placeholder (a server
    started against a Redis whose password everyone knows from the example files)."""
    problem = placeholder_problem("GRAPHRUNNER_REDIS_URL", [url_password(settings.redis_url)])
    if problem is not None:
        raise ConfigurationError(problem)
