"""Loading the CEL compiler without the `cel` package's CLI, and the fallback to `import cel`."""

from __future__ import annotations

import subprocess
import sys

# After the fast path, `import cel` must reuse the extension module graphrunner loaded.
SHARED = """
import sys
from graphrunner.expressions.cel_runtime import load_cel
fast = load_cel()
assert fast.__name__ == "cel.cel" and "cel" not in sys.modules and "typer" not in sys.modules
program = fast.compile("size(x) * 2")
assert program.execute({"x": "abc"}) == 6
import cel
assert cel.OptionalValue is fast.OptionalValue and cel.compile is fast.compile
assert cel.evaluate("1 + 2") == 3
"""

# A fresh interpreter: the extension can be initialised only once per process.
FALLBACK = """
from graphrunner.expressions import cel_runtime
cel_runtime._extension_spec = lambda: None
module = cel_runtime.load_cel()
assert module.__name__ == "cel"
assert module.compile("1 + x").execute({"x": 2}) == 3
"""


def test_a_later_import_cel_reuses_the_loaded_extension() -> None:
    done = subprocess.run([sys.executable, "-c", SHARED], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_load_cel_falls_back_to_the_package_when_the_extension_is_not_found() -> None:
    done = subprocess.run([sys.executable, "-c", FALLBACK], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
