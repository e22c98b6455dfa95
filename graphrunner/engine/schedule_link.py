"""`ScheduleLink`: the schedule and tick that started a run, kept with the run."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class ScheduleLink(BaseModel):
    """The schedule `id` that started a run and the `tick` (epoch seconds) it fired for; a run
    started by `trigger` carries the time it was triggered and `trigger=True`."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    id: str
    tick: int
    trigger: bool = False
