"""CPU time per process role (Redis, Redis Cluster nodes, worker main and pool processes, harness).

Read from /proc: Linux only; elsewhere the probe reports nothing. On a 2-core machine whose
cores are saturated, CPU time per step, not waiting, is what bounds steps per second.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _stat(pid: str) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name, or None if the process is gone."""
    try:
        return (PROC / pid / "stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _seconds(fields: list[str]) -> float:
    """User plus system CPU seconds of one process."""
    return (int(fields[11]) + int(fields[12])) / TICKS


def group_seconds(pgid: int) -> dict[int, float]:
    """CPU seconds of every live process in process group `pgid`, by pid."""
    found = {}
    for entry in PROC.iterdir():
        fields = _stat(entry.name) if entry.name.isdigit() else None
        if fields is not None and int(fields[2]) == pgid:
            found[int(entry.name)] = _seconds(fields)
    return found


def pids_seconds(pids: tuple[int, ...]) -> float:
    """CPU seconds of the live processes among `pids`, together."""
    stats = (_stat(str(pid)) for pid in pids)
    return sum(_seconds(fields) for fields in stats if fields is not None)


@dataclass(frozen=True)
class CpuProbe:
    """Reads the CPU seconds used so far by Redis, one worker (main and pool) and this harness.

    With `cluster_pids` (the nodes of a Redis Cluster holding graphrunner's run state), also
    their sum, as role `cluster`; `redis` is then the broker's Redis. `groups` adds a role per
    (name, process group): the RabbitMQ node (`rabbitmq`), the round-trip-time proxy (`proxy`).
    """

    redis_pid: int
    worker_pid: int
    cluster_pids: tuple[int, ...] = ()
    groups: tuple[tuple[str, int], ...] = ()

    def read(self) -> dict[str, float]:
        """CPU seconds by role; empty where /proc is not available."""
        if not PROC.is_dir():
            return {}
        redis = _stat(str(self.redis_pid))
        group = group_seconds(self.worker_pid)
        main = group.pop(self.worker_pid, 0.0)
        times = os.times()
        cluster = {"cluster": pids_seconds(self.cluster_pids)} if self.cluster_pids else {}
        groups = {name: sum(group_seconds(pgid).values()) for name, pgid in self.groups}
        return {
            "redis": _seconds(redis) if redis else 0.0,
            **cluster,
            **groups,
            "worker_main": main,
            "worker_pool": sum(group.values()),
            "harness": times.user + times.system,
        }


WORKER_ROLES = ("worker_main", "worker_pool")


def per_step(before: dict[str, float], after: dict[str, float], steps: int) -> dict[str, float]:
    """Microseconds of CPU per step by role, their total, and the worker's (main plus pool)."""
    used = {role: (after[role] - before[role]) * 1e6 / steps for role in before}
    if not used:
        return {}
    worker = sum(used[role] for role in WORKER_ROLES)
    return {
        **{k: round(v, 1) for k, v in used.items()},
        "total": round(sum(used.values()), 1),
        "worker": round(worker, 1),
    }
