"""Deployment-wide hooks: a YAML file named by `GRAPHRUNNER_HOOKS` with a `hooks:` list.

Each entry is written like a graph hook (`event`, optional `when`, `action`). They run on
every run the worker takes, after the graph's own hooks, and only observe: their answers
never change control flow.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from graphrunner.compiled import CompiledHook, compile_hooks
from graphrunner.errors import ConfigurationError, GraphValidationError
from graphrunner.loading.yaml_source import parse_yaml
from graphrunner.model import Hook
from graphrunner.tools import ToolRegistry, default_registry

HOOKS = TypeAdapter(tuple[Hook, ...])


def load_hooks_file(path: Path, registry: ToolRegistry | None = None) -> tuple[CompiledHook, ...]:
    """The compiled hooks of a deployment hooks file; raises `ConfigurationError` naming the problem."""
    where = f"deployment hooks file {path} (GRAPHRUNNER_HOOKS)"
    try:
        doc = parse_yaml(path.read_text(encoding="utf-8"), str(path))
    except OSError as exc:
        raise ConfigurationError(f"cannot read {where}: {exc}") from None
    except GraphValidationError as exc:
        raise ConfigurationError(f"{where}: {exc}") from None
    data = doc.data
    if not isinstance(data, dict) or set(data) != {"hooks"}:
        raise ConfigurationError(f"{where}: expected a mapping with one key, 'hooks:' (a list of hooks)")
    return compile_deployment_hooks(data["hooks"], where, registry)


def compile_deployment_hooks(
    raw: Any, where: str, registry: ToolRegistry | None = None
) -> tuple[CompiledHook, ...]:
    """Deployment hooks (a list written like a graph's `hooks:`) compiled; raises
    `ConfigurationError` starting with `where` and naming each problem (`hooks.N...`)."""
    try:
        hooks = HOOKS.validate_python(raw)
    except ValidationError as exc:
        problems = "; ".join(f"hooks.{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise ConfigurationError(f"{where}: {problems}") from None
    compiled, issues = compile_hooks(hooks)
    known = registry or default_registry()
    # compile_hooks words its issues for a graph file (`config.hooks.N...`): here it is `hooks.N...`
    found = [i.message.replace("config.hooks", "hooks") for i in issues]
    found += [
        f"hooks.{n}.action: unknown tool '{h.action.tool}'"
        for n, h in enumerate(hooks)
        if h.action.tool not in known
    ]
    if found:
        raise ConfigurationError(f"{where}: {'; '.join(found)}")
    return compiled
