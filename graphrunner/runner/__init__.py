"""Runners drive the pure engine: in-process here, Celery tasks in the distributed runtime."""

from graphrunner.runner.dispatch import classify, dispatch, retry_delay
from graphrunner.runner.local import LocalRunner

__all__ = ["LocalRunner", "classify", "dispatch", "retry_delay"]
