"""Start-up time of fresh processes: `import graphrunner`, `graphrunner --help`, `graphrunner validate`.

    python -m benchmarks.startup [--repeat N] [--json]

Each command runs N times in a fresh process, the commands interleaved round by round (the
order rotating), after one warm-up round that is not counted; the table shows the median,
the 90th percentile and the fastest wall time of each, against the targets of DESIGN §9.
`python -c pass` is the interpreter's own floor. Run it from the repository root.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

HELLO = "graphs/hello.yaml"


@dataclass(frozen=True)
class Command:
    """One command to time: a label, its argv, and its target in seconds (None: no target)."""

    label: str
    argv: tuple[str, ...]
    target: float | None


def console_script() -> tuple[str, ...]:
    """The `graphrunner` console script next to this interpreter, else `python -m graphrunner`."""
    script = Path(sys.executable).with_name("graphrunner")
    return (str(script),) if script.is_file() else (sys.executable, "-m", "graphrunner")


def commands() -> list[Command]:
    """The commands measured, with the targets of DESIGN §9 and issue 13."""
    cli = console_script()
    return [
        Command("python -c pass", (sys.executable, "-c", "pass"), None),
        Command("import graphrunner", (sys.executable, "-c", "import graphrunner"), 0.25),
        Command("graphrunner --help", (*cli, "--help"), 0.4),
        Command(f"graphrunner validate {HELLO}", (*cli, "validate", HELLO), 0.4),
    ]


def clean_env() -> dict[str, str]:
    """This environment without GRAPHRUNNER_* variables (a graph path or Redis URL changes nothing here)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("GRAPHRUNNER_")}


def time_once(command: Command, env: dict[str, str]) -> float:
    """Wall seconds of one fresh process of `command`; it must exit 0."""
    started = time.perf_counter()
    done = subprocess.run(command.argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{command.label!r} exited {done.returncode}: {done.stderr.decode()[-500:]}")
    return elapsed


def measure(cmds: Sequence[Command], repeat: int) -> dict[str, list[float]]:
    """`repeat` timings of every command, interleaved round by round after one warm-up round."""
    env = clean_env()
    for command in cmds:
        time_once(command, env)
    times: dict[str, list[float]] = {c.label: [] for c in cmds}
    for round_no in range(repeat):
        shift = round_no % len(cmds)
        for command in [*cmds[shift:], *cmds[:shift]]:
            times[command.label].append(time_once(command, env))
    return times


def p90(values: Sequence[float]) -> float:
    """The 90th percentile (inclusive method; the largest value for fewer than two)."""
    if len(values) < 2:
        return max(values)
    return statistics.quantiles(values, n=10, method="inclusive")[8]


@dataclass(frozen=True)
class Row:
    """The figures of one command, in seconds."""

    command: str
    median_s: float
    p90_s: float
    min_s: float
    target_s: float | None

    @property
    def verdict(self) -> str:
        """`ok` or `OVER` against the target; empty without one."""
        if self.target_s is None:
            return ""
        return "ok" if self.median_s <= self.target_s else "OVER"


def summary(cmds: Sequence[Command], times: dict[str, list[float]]) -> list[Row]:
    """One row per command: median, p90 and fastest time, and the target."""
    return [
        Row(
            command=c.label,
            median_s=round(statistics.median(times[c.label]), 3),
            p90_s=round(p90(times[c.label]), 3),
            min_s=round(min(times[c.label]), 3),
            target_s=c.target,
        )
        for c in cmds
    ]


def table(rows: Sequence[Row], repeat: int) -> str:
    """The rows as an aligned text table, in milliseconds."""
    lines = [f"{'command':<36} {'median':>7} {'p90':>7} {'min':>7} {'target':>7}  (ms, {repeat} runs each)"]
    for r in rows:
        target = "" if r.target_s is None else f"{r.target_s * 1000:.0f}"
        lines.append(
            f"{r.command:<36} {r.median_s * 1000:>7.0f} {r.p90_s * 1000:>7.0f} {r.min_s * 1000:>7.0f} "
            f"{target:>7}  {r.verdict}"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    """Measure, print the table (and with --json one JSON line of the rows)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.startup", description=__doc__)
    parser.add_argument("--repeat", type=int, default=20, help="timed runs of each command (default 20)")
    parser.add_argument("--json", action="store_true", help="also print the rows as one JSON line")
    args = parser.parse_args(argv)
    if not Path(HELLO).is_file():
        raise SystemExit(f"{HELLO} not found: run from the repository root")
    cmds = commands()
    rows = summary(cmds, measure(cmds, max(1, args.repeat)))
    print(table(rows, max(1, args.repeat)))
    if args.json:
        print(json.dumps({"startup": [{**asdict(r), "verdict": r.verdict} for r in rows]}))


if __name__ == "__main__":
    main()
