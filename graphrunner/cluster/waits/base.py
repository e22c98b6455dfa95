"""What a suspended step waits for, kept in the run record between its tasks.

A step that cannot finish in one task (a long retry backoff, a durable sleep, the items
of a foreach, a child run, a hook asking to run it again) commits a `Wait` and bumps the
run's `phase`; the task that goes on with it carries that phase, so every commit of the
step stays fenced.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

from graphrunner.engine import RunSnapshot, RunStatus
from graphrunner.services import Deferred

WaitKind = Literal["retry", "timer", "restart", "foreach", "items", "child", "kids"]


@dataclass(frozen=True)
class Wait:
    """A suspended step: why, until when, and where it stands.

    - retry / timer: the action waits `due`; then attempt `attempt` (retry), or the timer's
      `result` stands (timer: a durable `sleep`).
    - restart: an error hook answered `retry`; the step runs again as round `hook_round`.
    - foreach: parallel items `[0, upto)` of `total` have been sent; results under `tag`.
    - items: items run one at a time in a task; item `next` is the next to run.
    - child: the child run `child` is running.
    - kids: child runs of a parallel node (keyed by branch) or of a foreach over a graph (keyed
      by item index): `open` are running; items `[0, upto)` of `total` have been started,
      and `bad` lists the items that could not start (index, message); `kept` are the keys
      whose kid completed in an earlier attempt of the step (`prior`), not run again.
    """

    kind: WaitKind
    hook_round: int = 0
    due: float | None = None
    attempt: int = 1
    timer: dict[str, Any] | None = None
    tag: str = ""
    total: int = 0
    upto: int = 0
    next: int = 0
    failed: int = 0
    child: str = ""
    open: tuple[str, ...] = field(default=())
    bad: tuple[tuple[int, str], ...] = field(default=())
    prior: str = ""  # kids: the id prefix of the kids of this step's earlier attempt
    kept: tuple[str, ...] = field(default=())  # kids: keys whose earlier kid completed (not run again)
    retries: tuple[dict[str, Any], ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        """The JSON form kept in the run's snapshot."""
        return {k: v for k, v in asdict(self).items() if v not in (None, "", (), 0) or k == "kind"}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Wait:
        """The wait stored in a snapshot."""
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        for name in ("retries", "open", "kept"):
            if name in known:
                known[name] = tuple(known[name])
        if "bad" in known:
            known["bad"] = tuple((int(i), str(m)) for i, m in known["bad"])
        return cls(**known)

    def remaining(self, now: float | None = None) -> float:
        """Seconds until `due` (0 when due or no due time)."""
        if self.due is None:
            return 0.0
        return max(0.0, self.due - (time.time() if now is None else now))

    def but(self, **changes: Any) -> Wait:
        """A copy with `changes`."""
        return replace(self, **changes)


def timed(kind: WaitKind, delay: float, **fields: Any) -> Wait:
    """A wait of `kind` that comes due in `delay` seconds."""
    return Wait(kind, due=time.time() + delay, **fields)


def deferred_wait(deferred: Deferred, hook_round: int) -> Wait:
    """The wait of an action that asked to wait: a retry backoff, or a durable sleep."""
    kind: WaitKind = "timer" if deferred.kind == "timer" else "retry"
    return timed(kind, deferred.delay, hook_round=hook_round, attempt=deferred.attempt, timer=deferred.timer)


def open_kids(snap: RunSnapshot) -> list[str]:
    """The run ids of the kids `snap` is waiting on (for cancel and the sweeper)."""
    wait = Wait.from_dict(snap.wait) if snap.wait is not None else None
    if wait is None or wait.kind != "kids":
        return []
    return [f"{wait.child}.{key}" for key in wait.open]


def latest(snap: RunSnapshot) -> str:
    """The id prefix of the kids of the step `snap` stopped at, when it waited on kids: what a
    resume or an error hook's retry of that step keeps (the kids that completed)."""
    wait = Wait.from_dict(snap.wait) if snap.wait is not None else None
    if wait is not None and wait.kind == "kids":
        return wait.child
    error = snap.error or {}
    if error.get("node") == snap.node and snap.children:  # failed at it: its kids were the last
        return snap.children[-1]
    return ""


CHILD_CHECKS = 10  # a parent waiting on its child is looked at every CHILD_CHECKS x stall_after


def deadline(snap: RunSnapshot, stall_after: float, now: float | None = None) -> float | None:
    """When the sweeper should look at `snap` if nothing else happens (epoch s); None when the
    run is not running (nothing to look at)."""
    if snap.status is not RunStatus.RUNNING:
        return None
    now = time.time() if now is None else now
    wait = Wait.from_dict(snap.wait) if snap.wait is not None else None
    if wait is None:
        return now + stall_after
    if wait.due is not None:
        return max(now, wait.due) + stall_after
    if wait.kind in ("child", "kids"):
        return now + CHILD_CHECKS * stall_after
    return now + stall_after
