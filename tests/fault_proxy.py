"""A TCP proxy on loopback that misbehaves on demand, in the manner of toxiproxy.

    with FaultProxy(("127.0.0.1", redis_port)) as proxy:
        url = proxy.url_for(redis_url)        # point a worker at the proxy
        proxy.latency(0.05, jitter=0.02)      # every chunk, each way, 50 ± 20 ms late
        proxy.blackhole()                     # a partition: accept and hold, neither answer nor close
        proxy.reset()                         # close every connection with an RST (SO_LINGER 0)
        proxy.storm(every=0.3)                # reset every connection every 0.3 s until healed
        proxy.slow_close(2.0)                 # an end of stream is passed on 2 s late
        proxy.heal()                          # back to a plain relay

One asyncio event loop in a daemon thread; the controls may be called from any thread. Each
connection is two pipes (one per direction): a reader takes what arrives at once and stamps it
with its due time (latency plus jitter, never before what came earlier: the order of the bytes
is kept), a writer delivers it when due. Under a blackhole the writers hold what they have
(the readers keep reading, as a sender's kernel buffers would), so the peers see a connection
that is open and silent; on `heal` what was held is delivered, in order, as TCP's
retransmissions would after a partition: a command sent before the partition may still run.
benchmarks/rtt_proxy.py is the pipelined delay line the benchmarks use; this one is for faults.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
import struct
import threading
from typing import Any
from urllib.parse import urlsplit, urlunsplit

EOF = b""
CHUNK = 65536


class Pipe:
    """One direction of one connection: what `reader` receives reaches `writer` as the faults allow."""

    def __init__(
        self,
        proxy: FaultProxy,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        held: asyncio.Event,
    ) -> None:
        self.proxy, self.reader, self.writer, self.held = proxy, reader, writer, held
        self.queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()
        self.last_due = 0.0

    async def read(self) -> None:
        """Stamp and queue what arrives; an end of stream (or an error) is queued as EOF."""
        loop = asyncio.get_running_loop()
        try:
            while data := await self.reader.read(CHUNK):
                self.queue.put_nowait((self._due(loop.time()), data))
        except OSError:
            pass
        self.queue.put_nowait((self._due(loop.time()) + self.proxy.close_delay, EOF))

    def _due(self, now: float) -> float:
        delay = self.proxy.delay + random.uniform(-self.proxy.jitter, self.proxy.jitter)
        self.last_due = max(self.last_due, now + max(0.0, delay))
        return self.last_due

    async def write(self) -> None:
        """Deliver each chunk when due and when no blackhole holds it; pass the end of stream on."""
        loop = asyncio.get_running_loop()
        while True:
            due, data = await self.queue.get()
            if (wait := due - loop.time()) > 0:
                await asyncio.sleep(wait)
            await self.held.wait()
            if data == EOF:
                break
            try:
                self.writer.write(data)
                await self.writer.drain()
            except OSError:
                break
        close(self.writer)


class FaultProxy:
    """Relays loopback connections to `upstream`, with faults switched on and off at run time."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.delay = 0.0
        self.jitter = 0.0
        self.close_delay = 0.0
        self.port = 0
        self.accepted = 0  # connections accepted so far (a client that reconnected shows here)
        self.loop = asyncio.new_event_loop()
        self.open = asyncio.Event()
        self._writers: set[asyncio.StreamWriter] = set()
        self._gates: set[asyncio.Event] = set()  # one per connection: set while it may flow
        self._storm: asyncio.Task[None] | None = None
        self._server: asyncio.Server | None = None
        self._thread = threading.Thread(target=self.loop.run_forever, name="fault-proxy", daemon=True)

    # -- life ---------------------------------------------------------------------------------

    def start(self) -> FaultProxy:
        """Listen on a free loopback port (`port`) and relay in a daemon thread."""
        self._thread.start()
        self._run(self._heal(False))
        self._server = self._run(asyncio.start_server(self._accept, "127.0.0.1", 0))
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def stop(self) -> None:
        """Close the listener and every connection, then end the thread."""
        if self._server is not None:
            self.heal()
            self._server.close()
            self._run(self._reset_all())
            self._run(self._cancel_all())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        self.loop.close()

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def url_for(self, url: str) -> str:
        """`url` (redis://, amqp://) with its host and port replaced by the proxy's."""
        parts = urlsplit(url)
        auth = parts.netloc.rpartition("@")[0]
        netloc = f"{auth}@127.0.0.1:{self.port}" if auth else f"127.0.0.1:{self.port}"
        return urlunsplit(parts._replace(netloc=netloc))

    # -- faults -------------------------------------------------------------------------------

    def latency(self, seconds: float, jitter: float = 0.0) -> None:
        """Deliver every chunk, each way, `seconds` ± `jitter` late (order kept)."""
        self.delay, self.jitter = seconds, jitter

    def blackhole(self) -> None:
        """Hold everything on every connection, new ones included: accepted, never answered or closed."""
        self._run(self._blackhole())

    def reset(self) -> None:
        """Close every connection now with an RST, on both sides."""
        self._run(self._reset_all())

    def storm(self, every: float) -> None:
        """Reset every connection every `every` seconds until `heal`."""
        self._run(self._start_storm(every))

    def slow_close(self, seconds: float) -> None:
        """Pass an end of stream on `seconds` after it arrives (a close lingering in the network)."""
        self.close_delay = seconds

    def heal(self, *, strand: bool = False) -> None:
        """No more faults: held data is delivered, latency and slow closes end, a storm stops.

        `strand`: the connections a blackhole holds stay held for ever (state a NAT or a failed
        over peer lost: nothing ever answers on them, nothing closes them); new ones flow.
        """
        self.delay = self.jitter = self.close_delay = 0.0
        self._run(self._heal(strand))

    # -- inside the loop ----------------------------------------------------------------------

    async def _accept(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            reset(client_writer)
            return
        self._writers |= {client_writer, up_writer}
        gate = asyncio.Event()
        if self.open.is_set():
            gate.set()
        self._gates.add(gate)
        pipes = (Pipe(self, client_reader, up_writer, gate), Pipe(self, up_reader, client_writer, gate))
        try:
            await asyncio.gather(*(p.read() for p in pipes), *(p.write() for p in pipes))
        finally:
            self._writers -= {client_writer, up_writer}
            self._gates.discard(gate)

    async def _reset_all(self) -> None:
        for writer in list(self._writers):
            reset(writer)
        self._writers.clear()

    async def _cancel_all(self) -> None:
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _start_storm(self, every: float) -> None:
        async def blow() -> None:
            while True:
                await asyncio.sleep(every)
                await self._reset_all()

        await self._stop_storm()
        self._storm = asyncio.ensure_future(blow())

    async def _stop_storm(self) -> None:
        if self._storm is not None:
            self._storm.cancel()
            self._storm = None

    async def _blackhole(self) -> None:
        self.open.clear()
        for gate in self._gates:
            gate.clear()

    async def _heal(self, strand: bool) -> None:
        await self._stop_storm()
        self.open.set()
        if not strand:
            for gate in self._gates:
                gate.set()

    def _run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=10)


def reset(writer: asyncio.StreamWriter) -> None:
    """Close with an RST: SO_LINGER on, zero seconds."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


def close(writer: asyncio.StreamWriter) -> None:
    """Close gracefully (FIN), if it is still open."""
    if not writer.is_closing():
        writer.close()
