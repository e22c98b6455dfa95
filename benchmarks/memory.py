"""Peak resident memory (VmHWM) of worker processes, from /proc (Linux only; None elsewhere).

VmHWM is the high-water mark of a process's resident set over its whole lifetime: read after a
run, it is the largest the process has been so far, this run or any earlier one in that process.
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.cpu import PROC, group_seconds


def peak_mb(pid: int) -> float | None:
    """VmHWM of `pid` in MB (10^6 bytes), or None if the process is gone or /proc is not there."""
    try:
        status = (PROC / str(pid) / "status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) * 1024 / 1e6, 1)  # the kernel writes kB (KiB)
    return None


def group_peaks(pgid: int) -> dict[int, float]:
    """VmHWM in MB of every live process in process group `pgid` (a worker: main and pool), by pid."""
    found = {pid: peak_mb(pid) for pid in group_seconds(pgid)}
    return {pid: mb for pid, mb in found.items() if mb is not None}


def role(pid: int, worker_pid: int) -> str:
    """`main` (the worker's own process), `pool` (another process of its group) or `other`."""
    if pid == worker_pid:
        return "main"
    return "pool" if pid in group_seconds(worker_pid) else "other"


def pid_of(worker: str) -> int | None:
    """The pid in a transcript record's `worker` field (`hostname:pid`), or None."""
    _, _, pid = worker.rpartition(":")
    return int(pid) if pid.isdigit() else None


def is_available() -> bool:
    """Whether /proc can be read for memory figures here."""
    return Path(PROC, "self", "status").is_file()
