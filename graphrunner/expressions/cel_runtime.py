"""The CEL compiler of `common-expression-language`, loaded without the package's own CLI.

`import cel` runs `cel/__init__.py`, which imports the package's interactive command line
(typer, rich, prompt_toolkit, pygments): about 0.15 s here, ten times what loading the
compiler takes, paid by every command that compiles an expression (`validate`, `run`, a
worker). graphrunner uses only the compiled extension module `cel.cel` (`compile`, `Program`,
`OptionalValue`), so `load_cel` loads that module by itself: found in the package's
directory by the standard path finder, registered as `sys.modules["cel.cel"]` so that a
later `import cel` (whose `__init__` does `from .cel import *`) reuses it. Should the
package's layout change, it falls back to a plain `import cel`.
"""

from __future__ import annotations

import importlib.util
import sys
from importlib.machinery import ExtensionFileLoader, ModuleSpec, PathFinder
from types import ModuleType

EXTENSION = "cel.cel"


def load_cel() -> ModuleType:
    """The module with `compile` and `OptionalValue`: the `cel.cel` extension, else the `cel` package."""
    loaded = sys.modules.get(EXTENSION)
    if loaded is not None:
        return loaded
    spec = _extension_spec()
    if spec is None or spec.loader is None:
        import cel

        return cel
    module = importlib.util.module_from_spec(spec)
    sys.modules[EXTENSION] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[EXTENSION]
        raise
    return module


def _extension_spec() -> ModuleSpec | None:
    """Where the `cel.cel` extension module is, found without running the package's `__init__`."""
    package = importlib.util.find_spec("cel")
    if package is None or not package.submodule_search_locations:
        return None
    spec = PathFinder.find_spec(EXTENSION, list(package.submodule_search_locations))
    if spec is None or not isinstance(spec.loader, ExtensionFileLoader):
        return None
    return spec
