"""The in-process runner: whole runs, and single steps, in this process (no Redis, no Celery)."""

from graphrunner.runner.local import LocalRunner

__all__ = ["LocalRunner"]
