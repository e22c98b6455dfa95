"""Worker subprocesses: started in their own session, always stopped (group and all) by the harness."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
STOP_GRACE_SECONDS = 10.0


@dataclass(frozen=True)
class WorkerOptions:
    """Celery worker options shared by both sides (pool, concurrency, log level)."""

    concurrency: int = 2
    pool: str = "prefork"
    loglevel: str = "WARNING"

    def args(self, name: str) -> list[str]:
        """The common `celery worker` command-line options."""
        return [
            "-P",
            self.pool,
            "-c",
            str(self.concurrency),
            "--without-mingle",
            "--without-gossip",
            f"--loglevel={self.loglevel}",
            "-n",
            f"{name}@%h",
        ]


def clean_env(extra: Mapping[str, str]) -> dict[str, str]:
    """os.environ minus GRAPHRUNNER_*/CELERY_*/BENCH_* settings, plus `extra` and the repo on the path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GRAPHRUNNER_", "CELERY_", "BENCH_"))}
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return {**env, "PYTHONPATH": path, "PYTHONUNBUFFERED": "1", **extra}


def suite_launcher(name: str) -> ModuleType:
    """`tests/<name>.py` (a launcher the test suite uses: a Redis Cluster, a RabbitMQ node), loaded
    once from its path rather than copied or imported through `sys.path`: one launcher to keep up
    to date, and nothing in tests/ (`conftest`, `plugins`, ...) can shadow a module of the harness."""
    module_name = f"benchmarks._{name}_launcher"
    if module_name in sys.modules:
        return sys.modules[module_name]
    path = ROOT / "tests" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


def baseline_command(options: WorkerOptions) -> list[str]:
    """The baseline worker: bare Celery on `benchmarks.baseline_app`."""
    celery = [sys.executable, "-m", "celery", "-A", "benchmarks.baseline_app", "worker"]
    return [*celery, "-Q", "bench", *options.args("baseline")]


def graphrunner_command(options: WorkerOptions) -> list[str]:
    """The graphrunner worker, through its own CLI."""
    return [sys.executable, "-m", "graphrunner", "worker", *options.args("graphrunner")]


class Worker:
    """One worker process tree, its output in a log file."""

    def __init__(self, name: str, command: Sequence[str], env: Mapping[str, str]) -> None:
        self.name = name
        self.log = Path(tempfile.mkstemp(prefix=f"bench-{name}-", suffix=".log")[1])
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                list(command),
                env=dict(env),
                cwd=ROOT,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def check_alive(self) -> None:
        """Raise with the end of the worker's log if it has exited."""
        if self.process.poll() is not None:
            raise RuntimeError(f"{self.name} worker exited ({self.process.returncode}):\n{self.tail()}")

    def tail(self, chars: int = 2000) -> str:
        """The end of the worker's log."""
        return self.log.read_text(errors="replace")[-chars:]

    def stop(self) -> None:
        """Warm shutdown, then SIGKILL to the worker's process group if it lingers; remove the log."""
        pgid = self.process.pid
        if self.process.poll() is None:
            _signal_group(pgid, signal.SIGTERM)
            with suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=STOP_GRACE_SECONDS)
        _signal_group(pgid, signal.SIGKILL)
        self.process.wait(timeout=STOP_GRACE_SECONDS)
        self.log.unlink(missing_ok=True)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    """Signal the process group this harness started (its leader's pid), if any member is left."""
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


@contextmanager
def running_worker(name: str, command: Sequence[str], env: Mapping[str, str]) -> Iterator[Worker]:
    """A worker for the duration of the block, stopped however the block ends."""
    worker = Worker(name, command, env)
    try:
        yield worker
    finally:
        worker.stop()


@contextmanager
def terminate_as_exit() -> Iterator[None]:
    """Turn SIGINT/SIGTERM/SIGHUP into SystemExit, once, so `finally` clauses stop every process."""
    signals = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def handler(signum: int, _frame: object) -> None:
        for sig in signals:
            signal.signal(sig, signal.SIG_IGN)  # a second Ctrl-C must not cut the clean-up short
        print(f"[bench] {signal.Signals(signum).name}: stopping workers and Redis", file=sys.stderr)
        raise SystemExit(128 + signum)

    previous = {sig: signal.signal(sig, handler) for sig in signals}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
