"""What a deployment lets tools reach: the environment of the processes they start and the
addresses `http` may connect to (DESIGN §7). Tools read it from `ToolContext.policy`."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING

from graphrunner.tools.addresses import AddressPolicy

if TYPE_CHECKING:
    from graphrunner.settings import Settings

# What every child process gets from the worker's environment: where programs are, the home
# directory, temporary files, language and time zone. Nothing that could hold a secret.
BASE_ENV = ("PATH", "HOME", "TMPDIR", "LANG", "LANGUAGE", "LC_*", "TZ")


@dataclass(frozen=True)
class ToolPolicy:
    """The boundaries of the built-in tools: `shell_env_allow` names (fnmatch) the worker
    variables a started process gets besides `BASE_ENV`; `http` the addresses it may reach."""

    shell_env_allow: tuple[str, ...] = ()
    http: AddressPolicy = field(default_factory=AddressPolicy)

    @classmethod
    def from_settings(cls, settings: Settings) -> ToolPolicy:
        """The policy of `GRAPHRUNNER_SHELL_ENV_ALLOW`, `GRAPHRUNNER_HTTP_ALLOW` and
        `GRAPHRUNNER_HTTP_DENY`; raises `ConfigurationError` for an entry that is no host or network."""
        return cls(
            shell_env_allow=tuple(settings.shell_env_allow),
            http=AddressPolicy.parse(settings.http_allow, settings.http_deny),
        )

    def child_env(
        self, extra: Mapping[str, str] | None = None, environ: Mapping[str, str] = os.environ
    ) -> dict[str, str]:
        """The environment of a process a tool starts: the worker's variables that `BASE_ENV` or
        `shell_env_allow` name, then `extra` (the node's `env`), which wins."""
        patterns = (*BASE_ENV, *self.shell_env_allow)
        env = {name: value for name, value in environ.items() if any(fnmatchcase(name, p) for p in patterns)}
        env.update(extra or {})
        return env


DEFAULT_POLICY = ToolPolicy()
