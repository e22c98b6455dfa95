"""The compose file as `docker compose` reads it: `.env` interpolation, `<<` merges, services.

Only what the tests need of the Compose Specification's interpolation: `${VAR}`,
`${VAR:-default}`, `${VAR-default}`, `${VAR:?error}`, `${VAR?error}`, `$$` and `$VAR`; any
other `$` (a shell's `$(...)` written without `$$`) is an error, as `docker compose` makes it.
"""

from __future__ import annotations

import re
import secrets
import shlex
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
# laid over COMPOSE with `-f`: OTEL_* and the worker's metrics port (docs/deploy.md, Observability)
COMPOSE_OBSERVABILITY = ROOT / "docker-compose.observability.yml"
ENV_EXAMPLE = ROOT / ".env.example"
# the services of the `observability` profile: started only with `--profile observability`
OBSERVABILITY = ("otel-collector", "jaeger", "prometheus", "grafana")
VARIABLE = re.compile(r"\$(?:\$|\{(?P<braced>[^}]*)\}|(?P<plain>[A-Za-z_][A-Za-z0-9_]*)|(?P<invalid>))")
BRACED = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:-|-|:\?|\?)(?P<arg>.*))?$", re.DOTALL)


class MissingVariable(ValueError):
    """A `${VAR:?message}` whose variable is unset or empty."""


def read_env_file(path: Path = ENV_EXAMPLE) -> dict[str, str]:
    """KEY=VALUE lines of an env file (comments and blank lines skipped)."""
    env = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            env[key.strip()] = value.strip()
    return env


PLACEHOLDER = "change-me"
SECRET = secrets.token_hex(12)  # this test session's passwords


def deployed_env() -> dict[str, str]:
    """.env.example as an operator fills it in: every `change-me` replaced by a real secret
    (graphrunner's processes and the Redis command refuse the placeholder)."""
    return {key: value.replace(PLACEHOLDER, SECRET) for key, value in read_env_file().items()}


def interpolate(value: Any, env: dict[str, str]) -> Any:
    """`value` with every variable replaced as compose does (recursively in lists and maps)."""
    if isinstance(value, str):
        return VARIABLE.sub(lambda m: _substitute(m, env), value)
    if isinstance(value, list):
        return [interpolate(v, env) for v in value]
    if isinstance(value, dict):
        return {k: interpolate(v, env) for k, v in value.items()}
    return value


def _substitute(match: re.Match[str], env: dict[str, str]) -> str:
    if match.group(0) == "$$":
        return "$"
    if match.group("invalid") is not None:
        raise ValueError(
            f"invalid interpolation at {match.string[match.start() : match.start() + 20]!r}: write $$"
        )
    if match.group("plain"):
        return env.get(match.group("plain"), "")
    parsed = BRACED.match(match.group("braced"))
    if parsed is None:
        raise ValueError(f"bad variable {match.group(0)!r}")
    name, op, arg = parsed.group("name"), parsed.group("op"), parsed.group("arg")
    value = env.get(name)
    unset_or_empty = not value if op and op.startswith(":") else value is None
    if op in (":-", "-"):
        return str(arg) if unset_or_empty else str(value)
    if op in (":?", "?") and unset_or_empty:
        raise MissingVariable(f"{name}: {arg}")
    return value or ""


def load_compose(env: dict[str, str] | None = None) -> dict[str, Any]:
    """docker-compose.yml with `<<` merges resolved (PyYAML does them) and variables interpolated."""
    raw = yaml.safe_load(COMPOSE.read_text())
    return interpolate(raw, read_env_file() if env is None else env)  # type: ignore[no-any-return]


def load_observability(env: dict[str, str] | None = None) -> dict[str, Any]:
    """docker-compose.observability.yml alone, interpolated like docker-compose.yml."""
    raw = yaml.safe_load(COMPOSE_OBSERVABILITY.read_text())
    return interpolate(raw, read_env_file() if env is None else env)  # type: ignore[no-any-return]


def load_with_observability(env: dict[str, str] | None = None) -> dict[str, Any]:
    """`docker compose -f docker-compose.yml -f docker-compose.observability.yml`: the second
    file merged over the first as compose merges them, for the keys it uses (`environment`
    mappings merged, the later value winning; every other key, `command` included, replaced)."""
    base, over = load_compose(env), load_observability(env)
    merged = {**base, "services": dict(base["services"])}
    for name, service in over["services"].items():
        into = dict(merged["services"][name])  # an override of a service the base does not have is a mistake
        for key, value in service.items():
            if key == "environment":
                into[key] = {**into.get(key, {}), **value}
            else:
                into[key] = value
        merged["services"][name] = into
    return merged


def command_of(service: dict[str, Any]) -> list[str]:
    """A service's command as an argv list (a string command is split as compose splits it);
    empty for a service that runs its image's own command."""
    command = service.get("command", [])
    return shlex.split(command) if isinstance(command, str) else [str(a) for a in command]


def argv_of_service(service: dict[str, Any]) -> list[str]:
    """What the container runs: its `entrypoint` (when the service sets one) and its command."""
    entrypoint = service.get("entrypoint", [])
    entry = shlex.split(entrypoint) if isinstance(entrypoint, str) else [str(a) for a in entrypoint]
    return [*entry, *command_of(service)]


def redis_server_options(script: str) -> dict[str, str]:
    """The `--option value` pairs of the `exec redis-server - ...` line of a Redis start script."""
    (line,) = [s.strip() for s in script.splitlines() if s.strip().startswith("exec redis-server")]
    argv = shlex.split(line.partition("<<")[0])
    assert argv[:3] == ["exec", "redis-server", "-"], argv  # the configuration (password) from stdin
    return dict(zip(argv[3::2], argv[4::2], strict=True))
