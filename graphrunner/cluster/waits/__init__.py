"""The kinds of wait a suspended step keeps, one module each, behind one protocol (`base`).

Importing this package imports every module in it, so every kind of wait is registered (its
`WaitKind` for the executor and the sweeper, its `Wait` models for reading snapshots back):
a new kind is one new module here, and nothing else changes.
"""

import importlib
import pkgutil

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
