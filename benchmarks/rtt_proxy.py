"""A userspace TCP latency proxy on loopback: round-trip time between the workers and Redis.

    python benchmarks/rtt_proxy.py --upstream 127.0.0.1:6379 --rtt-ms 5

It listens on a free loopback port (printed on stdout as `port N` once it accepts connections)
and relays every connection to `--upstream`, each chunk of bytes delivered `rtt / 2` after it
arrived, in each direction: a delay line. What arrives is stamped and queued at once, never
waiting for what is queued before it to be delivered; a timer delivers every chunk that is due
in one write. So what is in flight is pipelined, not one message at a time, the order of the
bytes is kept (one queue per direction), and the delay does not limit the throughput. An end of
stream is passed on (half-close) after the same delay; a connection lost closes both sides.

One asyncio event loop in one thread, on a `select()` selector: the default (epoll) selector
rounds its timeouts up to whole milliseconds, which would turn 0.5 ms each way into 1 ms or
more; `select()` takes microseconds. (It also limits the proxy to about 500 connections, far
more than two workers open.) The proxy's CPU time shows as `proxy` in the benchmarks' CPU table.

Standard library only, and runnable by its path, so that the tests can load it without
`benchmarks` on `sys.path`. `running_proxy` starts it in a process of its own (its own session)
and stops it by its handle; `benchmarks.steps` and `benchmarks.foreach` do so with `--rtt-ms`.
"""

from __future__ import annotations

import argparse
import asyncio
import select
import selectors
import signal
import subprocess
import sys
from collections import deque
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

START_TIMEOUT = 10.0  # seconds to wait for the proxy's `port N` line
STOP_TIMEOUT = 10.0
EOF = b""
EARLY = 1e-6  # a timer may fire this much before its time (the loop's clock resolution)


class DelayLine:
    """One direction of one connection: what one side sends reaches the other `delay` seconds later."""

    def __init__(self, loop: asyncio.AbstractEventLoop, delay: float, relay: Relay) -> None:
        self.loop, self.delay, self.relay = loop, delay, relay
        self.queue: deque[tuple[float, bytes]] = deque()  # (due, data); EOF: the end of the stream
        self.target: asyncio.Transport | None = None  # where it goes (None until connected)
        self.timer: asyncio.TimerHandle | None = None

    def put(self, data: bytes) -> None:
        """Stamp and queue what arrived; deliver it when due."""
        self.queue.append((self.loop.time() + self.delay, data))
        if self.timer is None:
            self._arm()

    def attach(self, target: asyncio.Transport) -> None:
        """The other side is connected: deliver to it (what is already due, at once)."""
        self.target = target
        if self.timer is None:
            self._arm()

    def _arm(self) -> None:
        if self.queue and self.target is not None:
            self.timer = self.loop.call_at(self.queue[0][0], self._deliver)

    def _deliver(self) -> None:
        """Write every chunk that is due, in one write; pass the end of the stream on."""
        self.timer = None
        if self.target is None or self.target.is_closing():
            return
        now = self.loop.time() + EARLY
        chunks: list[bytes] = []
        ended = False
        while self.queue and self.queue[0][0] <= now:
            data = self.queue.popleft()[1]
            if data == EOF:
                ended = True
                break
            chunks.append(data)
        if chunks:
            self.target.write(b"".join(chunks))
        if ended:
            try:
                self.target.write_eof()
            except OSError:  # the other side is gone already (reset)
                self.relay.close()
                return
            self.relay.ended()
            return
        self._arm()


class Side(asyncio.Protocol):
    """One socket of a relay: what it receives goes into `outgoing`."""

    def __init__(self, relay: Relay, outgoing: DelayLine) -> None:
        self.relay, self.outgoing = relay, outgoing
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport  # asyncio sets TCP_NODELAY on its TCP sockets

    def data_received(self, data: bytes) -> None:
        self.outgoing.put(data)

    def eof_received(self) -> bool:
        self.outgoing.put(EOF)
        return True  # half-closed: what the other side still sends is delivered

    def connection_lost(self, exc: Exception | None) -> None:
        self.relay.close()


class Relay:
    """A client connection and its upstream connection, a delay line each way."""

    def __init__(self, loop: asyncio.AbstractEventLoop, delay: float) -> None:
        self.up = DelayLine(loop, delay, self)  # client to upstream
        self.down = DelayLine(loop, delay, self)  # upstream to client
        self.client = Side(self, self.up)
        self.upstream = Side(self, self.down)
        self.open_directions = 2

    def ended(self) -> None:
        """One direction passed its end of stream on; close both sockets once both have."""
        self.open_directions -= 1
        if self.open_directions == 0:
            self.close()

    def close(self) -> None:
        for side in (self.client, self.upstream):
            if side.transport is not None and not side.transport.is_closing():
                side.transport.close()
        for line in (self.up, self.down):
            if line.timer is not None:
                line.timer.cancel()
                line.timer = None


async def serve(upstream: tuple[str, int], delay: float, port: int = 0) -> asyncio.Server:
    """Listen on loopback; relay every connection to `upstream` through two delay lines."""
    loop = asyncio.get_running_loop()
    connecting: set[asyncio.Task[None]] = set()

    async def connect(relay: Relay) -> None:
        try:
            transport, _ = await loop.create_connection(lambda: relay.upstream, *upstream)
        except OSError:
            relay.close()
            return
        assert isinstance(transport, asyncio.Transport)
        relay.up.attach(transport)
        assert relay.client.transport is not None
        relay.down.attach(relay.client.transport)

    def accepted() -> Side:
        relay = Relay(loop, delay)
        task = loop.create_task(connect(relay))
        connecting.add(task)
        task.add_done_callback(connecting.discard)
        return relay.client

    return await loop.create_server(accepted, "127.0.0.1", port, backlog=128)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python benchmarks/rtt_proxy.py", description=__doc__.splitlines()[0])
    p.add_argument("--upstream", required=True, help="HOST:PORT to relay to (loopback)")
    p.add_argument("--rtt-ms", type=float, required=True, help="round-trip time to add (half each way)")
    p.add_argument("--port", type=int, default=0, help="loopback port to listen on (0: a free one)")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Listen, say `port N` on stdout, relay until SIGTERM or SIGINT."""
    args = parse_args(argv)
    host, _, port = args.upstream.rpartition(":")
    loop = asyncio.SelectorEventLoop(selectors.SelectSelector())
    try:
        server = loop.run_until_complete(serve((host, int(port)), args.rtt_ms / 2000, args.port))
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, loop.stop)
        print(f"port {server.sockets[0].getsockname()[1]}", flush=True)
        loop.run_forever()
        server.close()
    finally:
        loop.close()
    return 0


@dataclass(frozen=True)
class Proxy:
    """A running proxy: the port it listens on, its pid, the round-trip time it adds."""

    port: int
    pid: int
    rtt_ms: float

    def url_for(self, url: str) -> str:
        """`url` (e.g. `redis://127.0.0.1:6379/0`) with its host and port replaced by the proxy's."""
        parts = urlsplit(url)
        auth = parts.netloc.rpartition("@")[0]
        netloc = f"{auth}@127.0.0.1:{self.port}" if auth else f"127.0.0.1:{self.port}"
        return urlunsplit(parts._replace(netloc=netloc))


@contextmanager
def running_proxy(upstream_url: str, rtt_ms: float) -> Iterator[Proxy]:
    """The proxy in a process of its own, in front of the server of `upstream_url`, for the block;
    stopped by its handle (SIGTERM, then SIGKILL) however the block ends."""
    parts = urlsplit(upstream_url)
    upstream = f"{parts.hostname}:{parts.port}"
    command = [sys.executable, str(Path(__file__).resolve()), "--upstream", upstream, "--rtt-ms", str(rtt_ms)]
    process = subprocess.Popen(
        command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, start_new_session=True
    )
    try:
        yield Proxy(_read_port(process), process.pid, rtt_ms)
    finally:
        process.terminate()
        try:
            process.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=STOP_TIMEOUT)
        if process.stdout is not None:
            process.stdout.close()


def _read_port(process: subprocess.Popen[bytes]) -> int:
    """The port of the proxy's `port N` line; raise if it does not come in time."""
    assert process.stdout is not None
    readable, _, _ = select.select([process.stdout], [], [], START_TIMEOUT)
    line = process.stdout.readline().decode() if readable else ""
    if not line.startswith("port "):
        raise RuntimeError(f"the RTT proxy did not start (exit code {process.poll()}, said {line!r})")
    return int(line.split()[1])


if __name__ == "__main__":
    sys.exit(main())
