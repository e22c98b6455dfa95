"""The explorer's logins: a password and the capabilities runs submitted with it get (DESIGN §2.8).

A users file (`graphrunner ui --users FILE`, or GRAPHRUNNER_UI_USERS) maps each login to where
its password is and what it may run:

    users:
      ops:
        password_file: /run/secrets/ops-password   # or password_env: OPS_PASSWORD, or password: "..."
        capabilities: ["tool:shell", "tool:http", "graph:*"]
      viewer:
        password_env: VIEWER_PASSWORD              # no capabilities: the pure built-ins only

Every login may run the pure built-ins (`PURE_BUILTINS`: echo, fail, sleep); `capabilities`
grants more. `--basic-auth` logins and `--no-auth` get nothing more. A file that cannot work
(an unknown key, two password sources, a missing file or variable, an empty or placeholder
password, malformed capabilities) is refused at start with the file, user and key named.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from graphrunner.engine.capabilities import checked
from graphrunner.errors import ConfigurationError, GraphValidationError, InvalidCapabilities
from graphrunner.loading.yaml_source import parse_yaml
from graphrunner.placeholders import is_placeholder
from graphrunner.settings import PURE_BUILTINS

SOURCES = ("password_file", "password_env", "password")
USER_KEYS = (*SOURCES, "capabilities")
MAX_FILE_BYTES = 1 << 20


class UiAuthError(ConfigurationError):
    """The explorer would start without authentication, or with a credential that cannot work."""


@dataclass(frozen=True)
class Login:
    """One login: its password (UTF-8 bytes) and the capabilities configured for it."""

    password: bytes = field(repr=False)
    capabilities: tuple[str, ...] = ()  # beyond the pure built-ins

    @property
    def granted(self) -> tuple[str, ...]:
        """What its runs may do: the pure built-ins and its configured capabilities."""
        return tuple(dict.fromkeys((*PURE_BUILTINS, *self.capabilities)))


ANONYMOUS = Login(b"")  # `--no-auth`: the pure built-ins only


def load_users(path: Path, environ: Mapping[str, str] | None = None) -> dict[str, Login]:
    """The logins of a users file (a relative `password_file` is read next to it); raises
    `UiAuthError` naming the file, user and key at fault."""
    environ = os.environ if environ is None else environ
    data = _document(path)
    users = data.get("users") if isinstance(data, dict) else None
    extra = sorted(set(data) - {"users"}) if isinstance(data, dict) else []
    if extra:
        raise UiAuthError(f"{path}: unknown key {extra[0]!r}; a users file holds only 'users:'")
    if not isinstance(users, dict) or not users:
        raise UiAuthError(
            f"{path}: write 'users:' as a mapping of login names to {{password_file, capabilities}}"
        )
    return {str(name): _login(path, name, entry, environ) for name, entry in users.items()}


def _document(path: Path) -> Any:
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise UiAuthError(f"{path}: the users file is over {MAX_FILE_BYTES} bytes")
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UiAuthError(f"cannot read the users file {path}: {exc}") from None
    try:
        return parse_yaml(text, str(path)).data
    except GraphValidationError as exc:
        raise UiAuthError(f"the users file {path} is not valid YAML: {exc}") from None


def _login(path: Path, name: Any, entry: Any, environ: Mapping[str, str]) -> Login:
    where = f"{path}: user {name!r}"
    if not isinstance(name, str) or not name or ":" in name or not name.isprintable():
        raise UiAuthError(f"{where}: a login name is non-empty text without ':' or control characters")
    if not isinstance(entry, dict):
        raise UiAuthError(f"{where}: write a mapping with one of {', '.join(SOURCES)} (and capabilities)")
    unknown = sorted(str(k) for k in entry if k not in USER_KEYS)
    if unknown:
        raise UiAuthError(f"{where}: unknown key {unknown[0]!r}; a user takes {', '.join(USER_KEYS)}")
    sources = [k for k in SOURCES if k in entry]
    if len(sources) != 1:
        which = " and ".join(sources) if sources else "none"
        raise UiAuthError(f"{where}: give exactly one of {', '.join(SOURCES)} (got {which})")
    password = _password(where, sources[0], entry[sources[0]], environ, path.parent)
    try:
        capabilities = checked(entry.get("capabilities", []))
    except InvalidCapabilities as exc:
        raise UiAuthError(f"{where}: capabilities: {exc}") from None
    return Login(password.encode(), capabilities)


def _password(where: str, key: str, value: Any, environ: Mapping[str, str], here: Path) -> str:
    if not isinstance(value, str) or not value:
        raise UiAuthError(f"{where}: {key} must be non-empty text")
    if key == "password_file":
        try:
            password = (here / value).read_text(encoding="utf-8").rstrip("\r\n")
        except (OSError, UnicodeDecodeError) as exc:
            raise UiAuthError(f"{where}: password_file: cannot read {value}: {exc}") from None
    elif key == "password_env":
        password = environ.get(value, "")
        if not password:
            raise UiAuthError(f"{where}: password_env: the variable {value} is not set or is empty")
    else:
        password = value
    if not password.strip():
        raise UiAuthError(f"{where}: {key}: the password is empty")
    if is_placeholder(password):
        raise UiAuthError(
            f"{where}: {key}: the password is the example placeholder 'change-me' (or another): "
            "set a real secret (docs/security.md)"
        )
    return password
