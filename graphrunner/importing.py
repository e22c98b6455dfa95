"""Import `pkg.module:callable` references, with errors that say what was wrong."""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from typing import Any

REFERENCE = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*$")


class ImportFailed(ValueError):
    """A `pkg.module:callable` reference could not be imported."""


def check_reference(ref: str) -> None:
    """Raise `ImportFailed` unless `ref` is written `pkg.module:callable`."""
    if not REFERENCE.match(ref):
        raise ImportFailed(f"{ref!r} is not a reference of the form 'pkg.module:callable'")


def import_callable(ref: str) -> Callable[..., Any]:
    """The callable named by `pkg.module:callable`."""
    check_reference(ref)
    module_name, _, attr_path = ref.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ImportFailed(f"cannot import module '{module_name}' of {ref!r}: {exc}") from None
    except Exception as exc:  # the module itself failed while it was imported
        raise ImportFailed(
            f"importing module '{module_name}' of {ref!r} raised {type(exc).__name__}: {exc}"
        ) from None
    for attr in attr_path.split("."):
        target = getattr(target, attr, None)
        if target is None:
            raise ImportFailed(f"module '{module_name}' has no attribute '{attr_path}' ({ref!r})")
    if not callable(target):
        raise ImportFailed(f"{ref!r} is not callable")
    return target  # type: ignore[no-any-return]
