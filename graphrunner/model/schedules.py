"""`ScheduleSpec`: when a schedule fires, with what inputs, and what happens when runs overlap.

The same model is written under `config.schedules.<name>` in a graph file and passed to
`Client.schedules.add`. Durations are seconds, or a number with a unit: `30s`, `15m`, `6h`, `1d`.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema, model_validator

Overlap = Literal["skip", "buffer_one", "buffer_all", "cancel_other", "terminate_other", "allow_all"]
OVERLAPS: tuple[str, ...] = Overlap.__args__  # type: ignore[attr-defined]
SCHEDULE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\Z")  # in a graph: the id is `<graph id>/<name>`
SCHEDULE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,119}\Z")  # fits in a concurrency key
DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*\Z")
UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(value: Any) -> Any:
    """Seconds from `30`, `"30s"`, `"15m"`, `"6h"` or `"1d"`; anything else is left for pydantic to refuse."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a duration: use seconds or a number with s, m, h or d")
    if isinstance(value, str):
        match = DURATION.match(value)
        if not match:
            raise ValueError(
                f"{value!r} is not a duration: use seconds or a number with s, m, h or d (30s, 15m)"
            )
        return float(match[1]) * UNIT_SECONDS[match[2]]
    return value


DURATION_SCHEMA = {
    "anyOf": [
        {"type": "number", "minimum": 0},
        {"type": "string", "pattern": r"^\s*\d+(\.\d+)?\s*[smhd]?\s*$"},
    ],
    "description": "seconds, or a number with a unit: 30s, 15m, 6h, 1d",
}
Duration = Annotated[float, BeforeValidator(parse_duration), WithJsonSchema(DURATION_SCHEMA)]


class ScheduleSpec(BaseModel):
    """When a schedule fires (`cron` or `every`, in `timezone`), what a run gets (`inputs`), and
    how a tick that finds the previous run still active is handled (`overlap`, `concurrency_key`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    cron: str | None = Field(
        default=None, description="a cron expression of 5 fields (minute hour day month weekday)"
    )
    every: Duration | None = Field(default=None, description="an interval, anchored at the Unix epoch")
    timezone: str = Field(default="UTC", description="the IANA time zone cron times are read in")
    inputs: dict[str, Any] = Field(default_factory=dict, description="the inputs of every run")
    concurrency_key: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,199}$",  # graphrunner/cluster/runs/ids.py's CONCURRENCY_KEY
        description="the key overlapping runs share (default `schedule:<id>`)",
    )
    overlap: Overlap = Field(default="skip", description="what a tick does while a run is active")
    catchup_window: Duration = Field(default=3600.0, description="how late a missed tick may still fire")
    jitter: Duration = Field(default=0.0, description="up to this much later a tick fires (fixed per tick)")
    paused: bool = Field(default=False, description="registered paused: nothing fires until resumed")

    @model_validator(mode="after")
    def _consistent(self) -> ScheduleSpec:
        if (self.cron is None) == (self.every is None):
            raise ValueError("give exactly one of `cron` and `every`")
        if self.cron is not None:
            _check_cron(self.cron)
        if self.every is not None and (self.every < 1 or self.every != int(self.every)):
            raise ValueError(f"`every` must be a whole number of seconds, at least 1, got {self.every:g}")
        if self.jitter < 0 or self.catchup_window < 0:
            raise ValueError("`jitter` and `catchup_window` cannot be negative")
        if self.every is not None and self.jitter >= self.every:
            raise ValueError(f"`jitter` ({self.jitter:g}s) must be shorter than `every` ({self.every:g}s)")
        _check_timezone(self.timezone)
        if self.overlap == "allow_all" and self.concurrency_key is not None:
            raise ValueError("`concurrency_key` has no effect with overlap `allow_all`: drop one of them")
        return self

    def zone(self) -> ZoneInfo:
        """The schedule's time zone."""
        return ZoneInfo(self.timezone)

    def key_for(self, schedule_id: str, overlap: str | None = None) -> str | None:
        """The concurrency key the schedule's runs take under `overlap` (its own policy by
        default; None for `allow_all`)."""
        if (overlap or self.overlap) == "allow_all":
            return None
        return self.concurrency_key or f"schedule:{schedule_id}"

    def describe(self) -> str:
        """`cron 0 * * * *` or `every 3600s`, for listings."""
        return f"cron {self.cron}" if self.cron is not None else f"every {self.every:g}s"


def _check_cron(expr: str) -> None:
    from cronsim import CronSim, CronSimError

    try:
        CronSim(expr, datetime(2000, 1, 1, tzinfo=UTC))
    except CronSimError as exc:
        raise ValueError(f"`cron` {expr!r} is not a cron expression: {exc}") from None


def _check_timezone(name: str) -> None:
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(
            f"`timezone` {name!r} is not a known IANA time zone (e.g. UTC, Europe/Paris)"
        ) from None


def check_schedule_id(schedule_id: Any) -> str:
    """`schedule_id` if well formed; raises `ScheduleError` naming the rule otherwise."""
    from graphrunner.errors import ScheduleError

    if not isinstance(schedule_id, str) or not SCHEDULE_ID.match(schedule_id):
        raise ScheduleError(
            f"invalid schedule id {schedule_id!r:.140}: use 1-120 letters, digits, '_', '.', ':', '/' "
            "or '-', starting with a letter or digit"
        )
    return schedule_id
