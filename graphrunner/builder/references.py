"""Python functions as `pkg.module:qualname` references that workers can import.

A builder graph travels to workers as text, so every node function, routing function and
custom reducer must be importable by name. Lambdas, closures, nested functions, bound
methods, partials and functions of `__main__` are refused, with the reason.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

from graphrunner.importing import ImportFailed, import_callable

WHY = "workers import functions by 'module:qualname'"


class NotImportable(ValueError):
    """A function that workers could not import by name."""


def reference_of(fn: Any, what: str) -> str:
    """`module:qualname` of `fn`; raises `NotImportable` saying why it cannot be one."""
    name = getattr(fn, "__qualname__", None) or repr(fn)
    _check_kind(fn, what, name)
    module = getattr(fn, "__module__", None)
    if "<lambda>" in name:
        raise NotImportable(
            f"{what} is a lambda, which has no importable name ({WHY}): define it with def at module level"
        )
    if "<locals>" in name:
        outer = name.split(".<locals>")[0]
        raise NotImportable(
            f"{what} {name.replace('.<locals>', '')} is defined inside {outer}() (a closure or nested "
            f"function), so it has no importable name ({WHY}): define it at module level"
        )
    if not module or module == "__main__":
        raise NotImportable(
            f"{what} {name} is defined in __main__ (the script being run), which workers cannot "
            f"import ({WHY}): move it into a module"
        )
    return _checked(fn, what, f"{module}:{name}")


def _check_kind(fn: Any, what: str, name: str) -> None:
    if not callable(fn):
        raise NotImportable(f"{what} must be a function, got {type(fn).__name__} {fn!r:.60}")
    if isinstance(fn, functools.partial):
        raise NotImportable(f"{what} is a functools.partial ({WHY}): write a module-level function instead")
    if inspect.ismethod(fn):
        raise NotImportable(
            f"{what} {name} is a method bound to an object ({WHY}): use a module-level function "
            "or a staticmethod"
        )
    if not inspect.isfunction(fn):
        raise NotImportable(
            f"{what} must be a function, got a {type(fn).__name__} object ({WHY}): "
            "write a module-level function"
        )


def _checked(fn: Any, what: str, ref: str) -> str:
    try:
        found = import_callable(ref)
    except ImportFailed as exc:
        raise NotImportable(f"{what} {ref} cannot be imported by name ({WHY}): {exc}") from None
    if found is not fn:
        raise NotImportable(
            f"{what} {ref} is not the object that name imports, it was redefined or replaced "
            f"({WHY}): give it a module-level name of its own"
        )
    return ref
