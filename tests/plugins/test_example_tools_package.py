"""The example tools plugin (workers/example_tools): its own tests pass, and its entry points are visible here.

`make setup` installs the plugin into the virtualenv (`pip install --no-deps -e workers/example_tools`);
nothing here installs it, and nothing is skipped when it is missing: the failure says how to install it.
"""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import PackageNotFoundError, distribution, entry_points
from pathlib import Path

from graphrunner.tools import default_registry

REPO = Path(__file__).resolve().parents[2]
PLUGIN = REPO / "workers" / "example_tools"
TOOLS = {"example.slugify", "example.word_count"}
INSTALL = f"{sys.executable} -m pip install --no-deps -e {PLUGIN.relative_to(REPO)}"


def test_the_plugin_is_installed() -> None:
    try:
        dist = distribution("graphrunner-example-tools")
    except PackageNotFoundError:
        raise AssertionError(f"graphrunner-example-tools is not installed; run: {INSTALL}") from None
    assert dist.version == "0.1.0"


def test_the_plugin_entry_points_are_visible_in_this_interpreter() -> None:
    published = {ep.name for ep in entry_points(group="graphrunner.tools")}
    assert published >= TOOLS, f"missing {sorted(TOOLS - published)}; run: {INSTALL}"
    assert set(default_registry().names()) >= TOOLS


def test_the_plugin_tests_pass() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(PLUGIN / "tests")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=100,
        check=False,
    )
    assert proc.returncode == 0, f"the plugin's tests failed:\n{proc.stdout}\n{proc.stderr}"
