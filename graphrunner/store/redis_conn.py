"""A Redis connection for the store: calls retried with backoff on connection errors, Lua scripts."""

from __future__ import annotations

from collections.abc import Callable
from importlib import resources
from typing import Any, TypeVar

import redis
from tenacity import Retrying, retry_if_exception_type, stop_after_delay, wait_exponential

from graphrunner.errors import StoreUnavailable

T = TypeVar("T")
CONNECTION_ERRORS = (redis.ConnectionError, redis.TimeoutError)


def script_text(name: str, *, sends: bool = False) -> str:
    """The Lua script `store/lua/<name>`, with the `sends.lua` library before it when asked."""
    lua = resources.files("graphrunner.store").joinpath("lua")
    text = lua.joinpath(name).read_text(encoding="utf-8")
    return lua.joinpath("sends.lua").read_text(encoding="utf-8") + "\n" + text if sends else text


class RedisConnection:
    """A redis-py client whose calls are retried with backoff, then raise `StoreUnavailable`."""

    def __init__(self, client: redis.Redis, *, retry_seconds: float = 30.0, url: str = "") -> None:
        # redis-py types replies as bytes | str even with decode_responses=True: treat them as Any here
        self.redis: Any = client
        self.url = url
        self.retry_seconds = retry_seconds

    def script(self, name: str, *, sends: bool = False) -> Any:
        """The registered Lua script `name` (called by EVALSHA)."""
        return self.redis.register_script(script_text(name, sends=sends))

    def _call(self, fn: Callable[[], T]) -> T:
        """Run one Redis operation; after a connection error, retry it with exponential backoff."""
        try:
            return fn()
        except CONNECTION_ERRORS:
            return self._retry(fn)

    def _retry(self, fn: Callable[[], T]) -> T:
        retrying = Retrying(
            retry=retry_if_exception_type(CONNECTION_ERRORS),
            wait=wait_exponential(multiplier=0.1, max=2),
            stop=stop_after_delay(self.retry_seconds),
            reraise=True,
        )
        try:
            return retrying(fn)
        except CONNECTION_ERRORS as exc:
            where = f" at {self.url}" if self.url else ""
            raise StoreUnavailable(f"cannot reach Redis{where}: {exc}") from exc

    def ping(self) -> None:
        """Raise `StoreUnavailable` unless Redis answers."""
        self._call(self.redis.ping)

    def close(self) -> None:
        """Release the client's connections."""
        self.redis.close()
