"""Count the Redis commands and round trips per step with MONITOR, by who made them.

Categories: `store` (graphrunner's `gr:*` keys, or the baseline's `bench:chain:*` state),
`broker` (everything kombu/Celery does: queues, unacked bookkeeping, events), `in-script`
(commands a Lua script runs inside one EVALSHA; not round trips), `harness` (the
harness's own polling; left out). A MULTI ... EXEC block counts as one round trip.

With graphrunner's run state on a Redis Cluster, MONITOR watches the broker's Redis only; what
the cluster's masters ran comes from their INFO commandstats, summed (`cluster_commands`).
"""

from __future__ import annotations

import re
import threading
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, cast

import redis

LINE = re.compile(rb"^[\d.]+ \[\d+ ([^\]]*)\] (.*)$", re.S)
TOKEN = re.compile(rb'"((?:[^"\\]|\\.)*)"')
STORE_PREFIXES = ("gr:", "bench:chain:")
SCRIPT_COMMANDS = {"EVALSHA", "EVAL"}
CLUSTER = "cluster"  # category: every call the cluster's masters ran, in-script ones included
HARNESS_COMMANDS = {"info"}  # the harness's own INFO commandstats reads


@dataclass(frozen=True)
class Command:
    """One command as MONITOR saw it: the client address (or `lua`), its name and key."""

    client: str
    name: str
    key: str


@dataclass
class Tally:
    """Commands and round trips by category and command name."""

    commands: Counter[tuple[str, str]] = field(default_factory=Counter)
    round_trips: Counter[str] = field(default_factory=Counter)

    def per_step(self, steps: int) -> dict[str, Any]:
        """The tally divided by `steps`, as plain data."""
        by_category: dict[str, dict[str, float]] = {}
        for (category, name), count in sorted(self.commands.items()):
            by_category.setdefault(category, {})[name] = round(count / steps, 3)
        return {
            "steps": steps,
            "commands": by_category,
            "commands_total": {c: round(sum(v.values()), 3) for c, v in by_category.items()},
            "round_trips": {c: round(n / steps, 3) for c, n in sorted(self.round_trips.items())},
        }


def parse(line: bytes) -> Command | None:
    """The client, command name and first key of one MONITOR line."""
    match = LINE.match(line)
    if match is None:
        return None
    tokens = [t.decode(errors="replace") for t in TOKEN.findall(match.group(2))[:4]]
    if not tokens:
        return None
    name = tokens[0].upper()
    key = tokens[3] if name in SCRIPT_COMMANDS and len(tokens) > 3 else (tokens[1] if len(tokens) > 1 else "")
    return Command(match.group(1).decode(), name, key)


def category(cmd: Command, harness: set[str]) -> str:
    """Who made the command: store, broker, in-script or harness."""
    if cmd.client == "lua":
        return "in-script"
    if cmd.client in harness:
        return "harness"
    return "store" if cmd.key.startswith(STORE_PREFIXES) else "broker"


def tally(commands: list[Command], harness: set[str]) -> Tally:
    """Commands by category; round trips with each MULTI ... EXEC block counted once."""
    result = Tally()
    in_multi: set[str] = set()
    for cmd in commands:
        kind = category(cmd, harness)
        result.commands[(kind, cmd.name)] += 1
        if kind == "in-script":
            continue
        if cmd.name == "MULTI":
            in_multi.add(cmd.client)
            result.round_trips[kind] += 1
        elif cmd.name == "EXEC":
            in_multi.discard(cmd.client)
        elif cmd.client not in in_multi:
            result.round_trips[kind] += 1
    return result


def cluster_commands(result: Tally, before: Counter[str], after: Counter[str], polls: int) -> None:
    """Add the calls between two summed INFO commandstats of a cluster's masters to `result`.

    They go to category `cluster`, without round trips: commandstats counts a command a Lua
    script runs like any other. The harness's `polls` HMGETs and its INFO reads are left out;
    the polls are counted as `harness`.
    """
    calls = after - before
    calls["hmget"] -= polls
    for name, count in sorted(calls.items()):
        if count > 0 and name not in HARNESS_COMMANDS:
            result.commands[(CLUSTER, name.upper())] += count
    if polls:
        result.commands[("harness", "HMGET")] += polls


class CommandLog:
    """Every command the server receives while it is open, read by a MONITOR connection in a thread."""

    def __init__(self, url: str) -> None:
        self.client = redis.Redis.from_url(url)
        self.marker = f"bench-monitor-end-{uuid.uuid4().hex}"
        self.lines: list[bytes] = []
        self.connection = cast(Any, self.client.connection_pool.get_connection())
        self.connection.send_command("MONITOR")
        if self.connection.read_response() not in (b"OK", "OK"):
            raise RuntimeError("MONITOR was refused")
        self.thread = threading.Thread(target=self._read, name="monitor", daemon=True)
        self.thread.start()

    def _read(self) -> None:
        marker = self.marker.encode()
        while True:
            line = self.connection.read_response()
            if isinstance(line, bytes) and marker in line:
                return
            self.lines.append(line)

    def close(self) -> None:
        """Stop monitoring (the marker command tells the reader thread to stop)."""
        self.client.echo(self.marker)
        self.thread.join(timeout=30)
        self.connection.disconnect()
        self.client.close()

    def commands(self) -> list[Command]:
        """The commands seen, the harness's marker left out."""
        return [c for c in map(parse, self.lines) if c is not None and c.name != "ECHO"]


@contextmanager
def monitoring(url: str) -> Iterator[CommandLog]:
    """A `CommandLog` for the duration of the block."""
    log = CommandLog(url)
    try:
        yield log
    finally:
        log.close()


def client_address(client: redis.Redis) -> str:
    """The `ip:port` Redis sees for a single-connection client."""
    return str(client.client_info()["addr"])
