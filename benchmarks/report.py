"""Aggregate timings into medians and ratios; print the table, the round trips and the JSON line."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

BASELINE = "baseline"
THROUGHPUT_TARGET = 0.90  # DESIGN §9: at least 90% of the baseline's steps per second
WORKER_CPU_TARGET = 1.20  # DESIGN §9: worker CPU per step (main + pool) at most 1.2x the baseline's
ROUNDTRIP_TARGET = (
    2.0  # DESIGN §9: store and publish round trips per step (load; commit with the next message)
)


@dataclass(frozen=True)
class Sample:
    """One timed scenario of one side, at one prefetch multiplier."""

    prefetch: int
    scenario: str
    side: str
    rate: float
    seconds: float
    cpu: dict[str, float] = field(default_factory=dict)


@dataclass
class Results:
    """Every sample of one harness run, grouped for medians and ratios."""

    samples: list[Sample] = field(default_factory=list)

    def add(self, sample: Sample) -> None:
        """Record one sample."""
        self.samples.append(sample)

    def rates(self, prefetch: int, scenario: str, side: str) -> list[float]:
        """The rates measured for one cell, in the order they were taken."""
        return [
            s.rate for s in self.samples if (s.prefetch, s.scenario, s.side) == (prefetch, scenario, side)
        ]

    def cpu(self, prefetch: int, scenario: str, side: str) -> dict[str, float]:
        """Median CPU microseconds per step by process role, for one cell."""
        cell = [s.cpu for s in self.samples if (s.prefetch, s.scenario, s.side) == (prefetch, scenario, side)]
        roles = dict.fromkeys(role for cpu in cell for role in cpu)
        return {role: round(statistics.median(c[role] for c in cell if role in c), 1) for role in roles}

    def median(self, prefetch: int, scenario: str, side: str) -> float | None:
        """The median rate of one cell, or None if it was not measured."""
        rates = self.rates(prefetch, scenario, side)
        return statistics.median(rates) if rates else None

    def cells(self) -> list[tuple[int, str, str]]:
        """The (prefetch, scenario, side) cells in first-measured order, baseline first."""
        seen = dict.fromkeys((s.prefetch, s.scenario, s.side) for s in self.samples)
        return sorted(seen, key=lambda c: (c[0], _order(self.samples, c[1]), c[2] != BASELINE))

    def ratio(self, prefetch: int, scenario: str, side: str) -> float | None:
        """Median steps/s of `side` over the baseline's, same prefetch and scenario."""
        mine, base = self.median(prefetch, scenario, side), self.median(prefetch, scenario, BASELINE)
        return mine / base if mine is not None and base else None

    def cpu_ratio(self, prefetch: int, scenario: str, side: str) -> float | None:
        """Baseline CPU per step over the side's: the throughput ratio if CPU were the only limit."""
        mine = self.cpu(prefetch, scenario, side).get("total")
        base = self.cpu(prefetch, scenario, BASELINE).get("total")
        return base / mine if mine and base else None

    def worker_cpu_ratio(self, prefetch: int, scenario: str, side: str) -> float | None:
        """The side's worker CPU per step (main + pool) over the baseline's: DESIGN §9's CPU figure."""
        mine = self.cpu(prefetch, scenario, side).get("worker")
        base = self.cpu(prefetch, scenario, BASELINE).get("worker")
        return mine / base if mine and base else None

    def rows(self) -> list[dict[str, Any]]:
        """One record per cell: rates, median and ratio to the baseline."""
        return [
            {
                "prefetch": p,
                "scenario": sc,
                "side": side,
                "rates": [round(r, 1) for r in self.rates(p, sc, side)],
                "median": round(self.median(p, sc, side) or 0.0, 1),
                "ratio": None if side == BASELINE else _round(self.ratio(p, sc, side)),
                "cpu_us_per_step": self.cpu(p, sc, side),
                "cpu_ratio": None if side == BASELINE else _round(self.cpu_ratio(p, sc, side)),
                "worker_cpu_ratio": None if side == BASELINE else _round(self.worker_cpu_ratio(p, sc, side)),
            }
            for p, sc, side in self.cells()
        ]


def _order(samples: list[Sample], scenario: str) -> int:
    return next(i for i, s in enumerate(samples) if s.scenario == scenario)


def _round(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def table(rows: list[dict[str, Any]]) -> str:
    """The results as an aligned text table."""
    head = ("prefetch", "scenario", "side", "steps/s (median)", "ratio", "each run (steps/s)")
    body = [
        (
            str(r["prefetch"]),
            r["scenario"],
            r["side"],
            f"{r['median']:.0f}",
            _times(r["ratio"]),
            ", ".join(f"{x:.0f}" for x in r["rates"]),
        )
        for r in rows
    ]
    return align([head, *body])


def cpu_table(rows: list[dict[str, Any]]) -> str:
    """Median CPU microseconds per step by process role, the worker's, and its ratio to the baseline."""
    widest_first = sorted((r["cpu_us_per_step"] for r in rows), key=len, reverse=True)  # `cluster` by `redis`
    roles = [x for x in dict.fromkeys(role for cpu in widest_first for role in cpu) if x != "worker"]
    head = (
        "prefetch",
        "scenario",
        "side",
        *(f"{role} us" for role in roles),
        "worker us",
        "worker vs baseline",
    )
    body = [
        (
            str(r["prefetch"]),
            r["scenario"],
            r["side"],
            *(_us(r["cpu_us_per_step"].get(x)) for x in roles),
            f"{r['cpu_us_per_step'].get('worker', 0):.0f}",
            _times(r.get("worker_cpu_ratio")),
        )
        for r in rows
    ]
    return align([head, *body]) if roles else ""


def _us(value: float | None) -> str:
    """Microseconds as a whole number; `-` for a role the side was not measured for."""
    return "-" if value is None else f"{value:.0f}"


def verdicts(rows: list[dict[str, Any]]) -> str:
    """One line per DESIGN §9 target and graphrunner cell: the figure, the target, met or not."""
    head = ("target", "prefetch", "scenario", "side", "figure", "verdict")
    body = []
    for r in rows:
        if r["side"].startswith(BASELINE):
            continue
        cell = (str(r["prefetch"]), r["scenario"], r["side"])
        throughput = _verdict(r["ratio"], THROUGHPUT_TARGET, at_least=True)
        cpu = _verdict(r.get("worker_cpu_ratio"), WORKER_CPU_TARGET, at_least=False)
        body.append((f"steps/s >= {THROUGHPUT_TARGET:.2f}x baseline", *cell, *throughput))
        body.append((f"worker CPU/step <= {WORKER_CPU_TARGET:.2f}x baseline", *cell, *cpu))
    return align([head, *body]) if body else ""


def below_floor(rows: list[dict[str, Any]], floor: float) -> list[str]:
    """The plain graphrunner cells (no `+ev`, `+otel` side) whose steps/s ratio is under `floor`."""
    return [
        f"{r['side']} {r['scenario']} (prefetch {r['prefetch']}): {r['ratio']:.2f}x the baseline, "
        f"under {floor:.2f}x"
        for r in rows
        if not r["side"].startswith(BASELINE)
        and "+" not in r["side"]
        and r["ratio"] is not None
        and r["ratio"] < floor
    ]


def _verdict(value: float | None, target: float, *, at_least: bool) -> tuple[str, str]:
    """The figure as text and `met` / `not met` (`n/a` when it was not measured)."""
    if value is None:
        return "-", "n/a"
    met = value >= target if at_least else value <= target
    return f"{value:.2f}x", "met" if met else "NOT MET"


def _times(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}x"


def prefetch_summary(results: Results, scenario: str) -> list[str]:
    """Which prefetch multiplier is faster for each graphrunner side in `scenario`."""
    lines = []
    prefetches = sorted({s.prefetch for s in results.samples})
    sides = dict.fromkeys(s.side for s in results.samples if s.side != BASELINE)
    for side in sides:
        medians = {p: results.median(p, scenario, side) for p in prefetches}
        known = {p: m for p, m in medians.items() if m is not None}
        if len(known) < 2:
            continue
        best = max(known, key=lambda p: known[p])
        figures = ", ".join(f"prefetch {p}: {m:.0f} steps/s" for p, m in known.items())
        lines.append(f"{side} {scenario}: {figures} -> prefetch {best} is faster")
    return lines


def roundtrip_table(counts: dict[str, dict[str, Any]]) -> str:
    """Commands and round trips per step, by side and category."""
    rows = [("side", "category", "round trips/step", "commands/step", "commands (per step)")]
    for side, tally in counts.items():
        for cat, total in tally["commands_total"].items():
            trips = tally["round_trips"].get(cat)
            detail = ", ".join(f"{name} {n:g}" for name, n in tally["commands"][cat].items() if n >= 0.01)
            rows.append((side, cat, "-" if trips is None else f"{trips:.2f}", f"{total:.2f}", detail))
    return align(rows)


def roundtrip_verdicts(counts: dict[str, dict[str, Any]]) -> str:
    """Store round trips plus the broker's LPUSH (publishing the next step) per step, against two."""
    head = ("target", "side", "store", "publish (LPUSH)", "figure", "verdict")
    body = []
    for side, tally in counts.items():
        if side.startswith(BASELINE):
            continue
        store = tally["round_trips"].get("store", 0.0)
        publish = tally["commands"].get("broker", {}).get("LPUSH", 0.0)
        met = store + publish <= ROUNDTRIP_TARGET + 0.05  # per-run commands amortise to a few hundredths
        figure = f"{store + publish:.2f}"
        target = f"store + publish round trips/step <= {ROUNDTRIP_TARGET:g}"
        body.append((target, side, f"{store:.2f}", f"{publish:.2f}", figure, "met" if met else "NOT MET"))
    return align([head, *body]) if body else ""


def align(rows: Sequence[tuple[str, ...]]) -> str:
    """`rows` (the first is the header) as left-aligned columns, a rule under the header."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
