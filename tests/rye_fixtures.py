"""The Rye graph fixtures of tests/rye: their expectations (tests/rye/expected.yaml), copies with
session-unique graph ids, and the comparison of a run with what the Rye walker gives.

See tests/rye/README.md for the format.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from graphrunner import RunResult

RYE_DIR = Path(__file__).resolve().parent / "rye"
BAD_DIR = RYE_DIR / "bad"
EXPECTED = RYE_DIR / "expected.yaml"
TMP = "@tmp"  # in `inputs`: an empty directory of the run's own
CASE_KEYS = {
    "name",
    "inputs",
    "status",
    "path",
    "state",
    "absent",
    "output",
    "errors_suppressed",
    "error_type",
    "graph",
    "warnings",
    "rejects",
    "xfail",
}
BAD_KEYS = {"code", "line", "words"}
MISSING = object()


@dataclass(frozen=True)
class RunCase:
    """One run of a fixture graph and what the walker gives for it."""

    fixture: str
    name: str | None
    expect: dict[str, Any]

    @property
    def id(self) -> str:
        """The fixture, and the case's name made a plain word (`201-cond-eq-default/3-equals-neither`)."""
        if self.name is None:
            return self.fixture
        return f"{self.fixture}/{re.sub(r'[^A-Za-z0-9.]+', '-', self.name).strip('-')}"

    @property
    def inputs(self) -> dict[str, Any]:
        return dict(self.expect.get("inputs") or {})


@dataclass(frozen=True)
class BadCase:
    """A Rye file loading refuses with exactly one located error."""

    fixture: str
    code: str
    line: int | None
    words: tuple[str, ...] = field(default=())

    @property
    def path(self) -> Path:
        return RYE_DIR / f"{self.fixture}.yaml"


def load_expectations() -> tuple[list[RunCase], list[BadCase]]:
    """Every run case and every bad file of expected.yaml; each fixture file must have an entry."""
    doc = yaml.safe_load(EXPECTED.read_text(encoding="utf-8"))
    runs: list[RunCase] = []
    bad: list[BadCase] = []
    for fixture, entry in doc.items():
        if fixture.startswith("bad/"):
            unknown = set(entry) - BAD_KEYS
            assert not unknown, f"{fixture}: unknown keys {sorted(unknown)}"
            words = entry.get("words", ())
            words = (words,) if isinstance(words, str) else tuple(words)
            bad.append(BadCase(fixture, entry["code"], entry.get("line"), words))
            continue
        shared = {k: v for k, v in entry.items() if k != "cases"}
        for case in entry.get("cases") or [{}]:
            merged = {**shared, **case}
            unknown = set(merged) - CASE_KEYS
            assert not unknown, f"{fixture}: unknown keys {sorted(unknown)}"
            runs.append(RunCase(fixture, merged.pop("name", None), merged))
    files = {p.stem for p in RYE_DIR.glob("*.yaml") if p != EXPECTED}
    files |= {f"bad/{p.stem}" for p in BAD_DIR.glob("*.yaml")}
    missing = files - {c.fixture for c in runs} - {b.fixture for b in bad}
    assert not missing, f"fixtures without an entry in {EXPECTED.name}: {sorted(missing)}"
    return runs, bad


def unique(text: str, suffix: str) -> str:
    """The fixture `text` with every graph id it declares or runs made unique by `suffix`."""
    text = re.sub(r"(?m)^tool_id:\s*(\S+)\s*$", lambda m: f"tool_id: {m.group(1)}{suffix}", text)
    return re.sub(r"(tool:graphs/)([\w./-]+)", lambda m: f"{m.group(1)}{m.group(2)}{suffix}", text)


def copy_fixtures(folder: Path, suffix: str) -> dict[str, Path]:
    """The runnable fixtures written to `folder` with ids unique to `suffix` (file names too:
    a graph without `tool_id` takes its id from its file name); fixture name -> copy."""
    copies = {}
    for source in sorted(RYE_DIR.glob("*.yaml")):
        if source == EXPECTED:
            continue
        target = folder / f"{source.stem}{suffix}.yaml"
        target.write_text(unique(source.read_text(encoding="utf-8"), suffix), encoding="utf-8")
        copies[source.stem] = target
    return copies


def with_dirs(inputs: dict[str, Any], make_dir: Callable[[], Path]) -> tuple[dict[str, Any], list[str]]:
    """`inputs` with each "@tmp" made an empty directory of its own; and those directories."""
    made: list[str] = []
    out = {}
    for key, value in inputs.items():
        if value == TMP:
            value = str(make_dir())
            made.append(value)
        out[key] = value
    return out, made


def normal(value: Any, replacements: dict[str, str]) -> Any:
    """`value` with each key of `replacements` replaced in every string (session ids, run dirs)."""
    if isinstance(value, str):
        for old, new in replacements.items():
            value = value.replace(old, new)
        return value
    if isinstance(value, dict):
        return {normal(k, replacements): normal(v, replacements) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [normal(v, replacements) for v in value]
    return value


def at(state: Any, dotted: str) -> Any:
    """The value at the dotted path (list indices allowed), or MISSING."""
    value = state
    for part in dotted.split("."):
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return MISSING
    return value


def summary(result: RunResult, replacements: dict[str, str]) -> dict[str, Any]:
    """What the walker's semantics decide about a run, with session ids and run dirs normalised."""
    error = result.error.to_dict() if result.error is not None else {}
    normalised: dict[str, Any] = normal(
        {
            "status": result.status,
            "path": list(result.path),
            "state": result.state,
            "output": result.output,
            "errors_suppressed": result.errors_suppressed,
            "error_type": error.get("type"),
            "error_node": error.get("node"),
        },
        replacements,
    )
    return normalised


def mismatches(case: RunCase, got: dict[str, Any]) -> list[str]:
    """How the run summary `got` differs from the case's expectation (empty when it matches)."""
    want = case.expect
    problems = []
    wanted_suppressed = want.get("errors_suppressed", 0)
    for key, wanted in (
        ("status", want["status"]),
        ("path", want["path"]),
        ("errors_suppressed", wanted_suppressed),
        ("error_type", want.get("error_type")),
    ):
        if got[key] != wanted:
            problems.append(f"{key}: expected {wanted!r}, got {got[key]!r}")
    if "output" in want and got["output"] != want["output"]:
        problems.append(f"output: expected {want['output']!r}, got {got['output']!r}")
    for dotted, wanted in (want.get("state") or {}).items():
        value = at(got["state"], dotted)
        if value is MISSING or value != wanted:
            shown = "nothing" if value is MISSING else repr(value)
            problems.append(f"state.{dotted}: expected {wanted!r}, got {shown}")
    for key in want.get("absent") or ():
        if key in got["state"]:
            problems.append(f"state.{key}: expected not set, got {got['state'][key]!r}")
    return problems
