"""Import `pkg.module:callable` references, with errors that say what was wrong.

A reference names code by the module it is defined in: walking attributes from `pkg.mod`
reaches whatever `pkg.mod` imported (`graphrunner.settings:os.mkdir`), so the callable a
reference resolves to must be defined in `pkg.mod` or a submodule of it (DESIGN §2.8: a
`tool:python:PKG.*` capability admits only callables defined under `PKG`).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from types import ModuleType
from typing import Any

REFERENCE = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*$")
DUNDER = re.compile(r"__\w*__")


class ImportFailed(ValueError):
    """A `pkg.module:callable` reference could not be imported."""


class ForeignCallable(ImportFailed):
    """A reference resolves to a callable defined outside the module it names."""


def check_reference(ref: str) -> None:
    """Raise `ImportFailed` unless `ref` is written `pkg.module:callable` (no dunder attributes)."""
    if not REFERENCE.match(ref):
        raise ImportFailed(f"{ref!r} is not a reference of the form 'pkg.module:callable'")
    dunders = [part for part in ref.partition(":")[2].split(".") if DUNDER.fullmatch(part)]
    if dunders:
        raise ImportFailed(
            f"{ref!r} reaches the special attribute '{dunders[0]}'; a reference names a function "
            "or class by its own name"
        )


def import_callable(ref: str) -> Callable[..., Any]:
    """The callable named by `pkg.module:callable`, which must be defined under `pkg.module`."""
    check_reference(ref)
    module_name, _, attr_path = ref.partition(":")
    module = _import_module(module_name, ref)
    target: Any = module
    for attr in attr_path.split("."):
        target = getattr(target, attr, None)
        if target is None:
            raise ImportFailed(f"module '{module_name}' has no attribute '{attr_path}' ({ref!r})")
    if not callable(target):
        raise ImportFailed(f"{ref!r} is not callable")
    _check_defined_under(ref, module, target)
    return target  # type: ignore[no-any-return]


def _import_module(module_name: str, ref: str) -> ModuleType:
    try:
        return importlib.import_module(module_name)
    except ImportError as exc:
        raise ImportFailed(f"cannot import module '{module_name}' of {ref!r}: {exc}") from None
    except Exception as exc:  # the module itself failed while it was imported
        raise ImportFailed(
            f"importing module '{module_name}' of {ref!r} raised {type(exc).__name__}: {exc}"
        ) from None


def defining_module(target: Any) -> str | None:
    """The module `target` was defined in (a bound method's function's), or None when it has none."""
    module = getattr(target, "__module__", None)  # a bound method answers for its function
    return module if isinstance(module, str) and module else None


def _is_under(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _check_defined_under(ref: str, module: ModuleType, target: Any) -> None:
    """Raise `ForeignCallable` unless `target` is defined in the referenced module or under it
    (or under the name the module really has: `os.path` is `posixpath`)."""
    named = ref.partition(":")[0]
    defined = defining_module(target)
    if defined is not None and (_is_under(defined, named) or _is_under(defined, module.__name__)):
        return
    if defined is None:
        raise ForeignCallable(
            f"{ref!r} resolves to {type(target).__name__} {target!r:.60}, which names no module it is "
            f"defined in; reference a function or class defined in '{named}'"
        )
    name = getattr(target, "__qualname__", None)
    instead = (
        f"reference '{defined}:{name}' instead"
        if isinstance(name, str) and REFERENCE.match(f"{defined}:{name}")
        else f"reference a function or class defined in '{named}'"
    )
    raise ForeignCallable(
        f"{ref!r} resolves to a callable defined in module '{defined}', not under '{named}' "
        f"(a reference names the module that defines it): {instead}"
    )
