"""The worker configuration module a team edits: its tools, deployment hooks and start-up code.

`GRAPHRUNNER_WORKER_CONFIG` names it: a path to a `.py`
file, imported by path (no PYTHONPATH needed), or a dotted module name. Importing it runs its
`register_tool(...)` calls; a module-level `hooks` list (written like a graph's hooks) adds
deployment-wide hooks beside those of GRAPHRUNNER_HOOKS. `workers/worker_config.py` is the
example every deployment starts from.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from graphrunner.compiled import CompiledHook
from graphrunner.errors import ConfigurationError
from graphrunner.loading.hooks_file import compile_deployment_hooks, load_hooks_file
from graphrunner.settings import Settings
from graphrunner.tools import ToolRegistry

MODULE_NAME = "graphrunner_worker_config"  # what a config file is imported as


@dataclass(frozen=True)
class WorkerConfig:
    """What a worker configuration module contributes beyond the tools it registered."""

    source: str
    hooks: tuple[CompiledHook, ...] = ()


def load_worker_config(ref: str, registry: ToolRegistry | None = None) -> WorkerConfig:
    """Import the configuration module `ref` (a .py path or a module name); raises
    `ConfigurationError` naming the module and what was wrong."""
    where = f"worker configuration {ref} (GRAPHRUNNER_WORKER_CONFIG)"
    module = _import(ref, where)
    raw = getattr(module, "hooks", ())
    if not isinstance(raw, list | tuple):
        raise ConfigurationError(f"{where}: `hooks` must be a list of hooks, got {type(raw).__name__}")
    return WorkerConfig(source=ref, hooks=compile_deployment_hooks(list(raw), where, registry))


def _import(ref: str, where: str) -> ModuleType:
    try:
        if ref.endswith(".py") or "/" in ref:
            return _import_file(Path(ref), where)
        return importlib.import_module(ref)
    except ConfigurationError:
        raise
    except ModuleNotFoundError as exc:
        raise ConfigurationError(f"{where}: cannot import it: {exc}") from None
    except Exception as exc:  # the team's code raised while it was imported
        raise ConfigurationError(f"{where}: importing it raised {type(exc).__name__}: {exc}") from exc


def _import_file(path: Path, where: str) -> ModuleType:
    if not path.is_file():
        raise ConfigurationError(f"{where}: no such file")
    spec = importlib.util.spec_from_file_location(MODULE_NAME, path)
    if spec is None or spec.loader is None:
        raise ConfigurationError(f"{where}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[MODULE_NAME] = module  # pickling and dataclasses look modules up by name
    spec.loader.exec_module(module)
    return module


def deployment_hooks(settings: Settings) -> tuple[CompiledHook, ...]:
    """Import the worker configuration (its tools are then registered), then the deployment hooks:
    those of GRAPHRUNNER_HOOKS followed by the configuration's. Raises `ConfigurationError`."""
    from_config = load_worker_config(settings.worker_config).hooks if settings.worker_config else ()
    from_file = load_hooks_file(settings.hooks_file) if settings.hooks_file else ()
    return (*from_file, *from_config)
