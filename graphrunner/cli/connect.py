"""The CLI's connection to a cluster: a client for GRAPHRUNNER_REDIS_URL, and errors as exit codes."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from graphrunner.cli.common import USAGE_ERROR, fail, load_settings
from graphrunner.errors import (
    ConfigurationError,
    GraphNotFound,
    GraphrunnerError,
    GraphValidationError,
    InvalidCapabilities,
    InvalidRunId,
    StateValidationError,
    StoreUnavailable,
)
from graphrunner.settings import Settings

if TYPE_CHECKING:  # imported when used: Celery and redis-py are not needed for --help or validate
    from graphrunner.client import Client

RETRY_SECONDS = 3.0
NO_REDIS = (
    "GRAPHRUNNER_REDIS_URL is not set: set it to the Redis the cluster uses "
    "(e.g. export GRAPHRUNNER_REDIS_URL=redis://localhost:6379/0)"
)
USAGE_ERRORS = (InvalidRunId, StateValidationError, GraphNotFound, GraphValidationError, InvalidCapabilities)


def cluster_settings() -> Settings:
    """The settings from the environment; exits 2 when GRAPHRUNNER_REDIS_URL is not set."""
    settings = load_settings()
    if not settings.redis_url:
        fail(NO_REDIS, USAGE_ERROR)
    return settings


def server_settings() -> Settings:
    """The settings of a long-running server (worker, beat, Flower, the explorer): exits 2 when
    GRAPHRUNNER_REDIS_URL is unset or its password is an example file's placeholder."""
    from graphrunner.placeholders import check_redis_url

    settings = cluster_settings()
    try:
        check_redis_url(settings)
    except ConfigurationError as exc:
        fail(str(exc), USAGE_ERROR)
    return settings


@contextmanager
def cluster_client(
    settings: Settings | None = None, retry_seconds: float = RETRY_SECONDS
) -> Iterator[Client]:
    """A client of the configured cluster that gives up on a dead Redis within a few seconds."""
    from graphrunner.client import Client

    client = Client(settings=settings or cluster_settings(), retry_seconds=retry_seconds)
    try:
        yield client
    finally:
        client.close()


@contextmanager
def reported_errors() -> Iterator[None]:
    """Turn graphrunner's errors into `error: ...` lines: exit 2 for bad usage, else 1."""
    try:
        yield
    except USAGE_ERRORS as exc:
        fail(str(exc), USAGE_ERROR)
    except StoreUnavailable as exc:
        fail(f"{exc} (is Redis running, and is GRAPHRUNNER_REDIS_URL right?)", 1)
    except GraphrunnerError as exc:
        fail(str(exc), 1)
