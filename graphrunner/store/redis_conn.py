"""A Redis connection for the store: calls retried with backoff on connection errors, Lua scripts."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from importlib import resources
from typing import Any, TypeVar

import redis
from tenacity import Retrying, retry_if_exception_type, stop_after_delay, wait_exponential

from graphrunner.errors import StoreUnavailable
from graphrunner.store.keys import KeySpace

T = TypeVar("T")
# A cluster that is failing over answers CLUSTERDOWN for a while; a multi-key script on a slot
# being migrated gets TRYAGAIN until the slot's keys are on one node, and redis-py gives up
# ("TTL exhausted", a ClusterError) after a few immediate retries: wait as for a connection
# error. (redis-py follows MOVED and ASK redirections itself.)
CONNECTION_ERRORS = (
    redis.ConnectionError,
    redis.TimeoutError,
    redis.exceptions.ClusterError,
    redis.exceptions.TryAgainError,
    redis.exceptions.SlotNotCoveredError,
)


def script_text(name: str, *, sends: bool = False) -> str:
    """The Lua script `store/lua/<name>`, with the `sends.lua` library before it when asked."""
    lua = resources.files("graphrunner.store").joinpath("lua")
    text = lua.joinpath(name).read_text(encoding="utf-8")
    return lua.joinpath("sends.lua").read_text(encoding="utf-8") + "\n" + text if sends else text


class RedisConnection:
    """A redis-py client whose calls are retried with backoff, then raise `StoreUnavailable`."""

    def __init__(
        self,
        client: redis.Redis | redis.RedisCluster,
        *,
        retry_seconds: float = 30.0,
        url: str = "",
        keyspace: KeySpace | None = None,
    ) -> None:
        # redis-py types replies as bytes | str even with decode_responses=True: treat them as Any here
        self.redis: Any = client
        self.url = url
        self.retry_seconds = retry_seconds
        self.keys = keyspace or KeySpace()
        self._scripts: list[Any] = []

    def script(self, name: str, *, sends: bool = False) -> Any:
        """The registered Lua script `name` (called by EVALSHA)."""
        script = self.redis.register_script(script_text(name, sends=sends))
        self._scripts.append(script)
        return script

    def run_scripts(self, script: Any, calls: Sequence[tuple[list[str], list[Any]]]) -> list[Any]:
        """Call `script` once per (keys, args): in one pipeline on one Redis; one by one on a
        Redis Cluster, whose pipelines take no scripts (each call may be on another slot). One
        call is not pipelined: a pipeline of scripts costs a round trip more (SCRIPT EXISTS)."""
        if self.keys.clustered or len(calls) == 1:
            return [script(keys=k, args=a) for k, a in calls]
        pipe = self.redis.pipeline(transaction=False)
        for k, a in calls:
            script(keys=k, args=a, client=pipe)
        replies: list[Any] = pipe.execute()
        return replies

    def _beat_keys(self, run_id: str) -> list[str]:
        """The keys of `beat.lua` for a run: its record and its shard's progress deadlines."""
        return [self.keys.run(run_id), self.keys.shard(run_id).progress()]

    def _call(self, fn: Callable[[], T]) -> T:
        """Run one Redis operation; after a connection error, retry it with exponential backoff.

        A script called in a pipeline is not loaded on demand: when a server does not know
        it (a new master after a failover, a restarted Redis), every script is loaded on
        every master and the operation runs again.
        """
        try:
            return fn()
        except CONNECTION_ERRORS:
            return self._retry(fn)
        except redis.exceptions.NoScriptError:
            self._call(self._load_scripts)
            return self._retry(fn)

    def _load_scripts(self) -> None:
        for script in self._scripts:
            self.redis.script_load(script.script)

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
