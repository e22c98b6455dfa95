"""The round-trip-time proxy of the benchmarks (benchmarks/rtt_proxy.py, `--rtt-ms`): it relays the
bytes of both directions in order, and a round trip through it takes at least the configured time.

The proxy runs in its own process, started and stopped by the module's own launcher; the server
behind it is a loopback echo server in a thread. `benchmarks` is not on the tests' path, so the
module is loaded from its file (as benchmarks/cluster.py loads tests/redis_cluster.py). Times are
only ever checked from below: a loaded machine makes everything slower, never faster.
"""

from __future__ import annotations

import importlib.util
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

MODULE = Path(__file__).resolve().parents[2] / "benchmarks" / "rtt_proxy.py"
BANNER = b"ready\n"


def _load() -> ModuleType:
    name = "benchmarks_rtt_proxy_under_test"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, MODULE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


rtt_proxy = _load()


def _echo(conn: socket.socket) -> None:
    """Greet (server to client, before the client says anything), then echo until the client closes."""
    with conn:
        conn.sendall(BANNER)
        while data := conn.recv(65536):
            conn.sendall(data)


@pytest.fixture
def echo_server() -> Iterator[str]:
    """A loopback echo server in a thread; its URL."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=_echo, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"redis://127.0.0.1:{listener.getsockname()[1]}/0"
    stop.set()
    listener.shutdown(socket.SHUT_RDWR)  # wakes the accept (close alone does not)
    listener.close()
    thread.join(timeout=5)


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    chunks, left = [], size
    while left:
        chunk = sock.recv(min(left, 65536))
        assert chunk, f"connection closed with {left} bytes still expected"
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _connect(proxy: object) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", proxy.port), timeout=30)  # type: ignore[attr-defined]
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def test_bytes_go_through_in_order_both_ways_while_many_writes_are_in_flight(echo_server: str) -> None:
    # 4,000 numbered writes of varying sizes, sent without waiting for their echoes
    messages = [f"{i:06d}:".encode() + bytes([i % 251]) * (i % 700) for i in range(4000)]
    sent = b"".join(messages)
    received: list[bytes] = []
    with rtt_proxy.running_proxy(echo_server, 2.0) as proxy, _connect(proxy) as sock:
        assert _read_exactly(sock, len(BANNER)) == BANNER  # upstream to client, unprompted
        reader = threading.Thread(target=lambda: received.append(_read_exactly(sock, len(sent))))
        reader.start()
        for message in messages:
            sock.sendall(message)
        reader.join(timeout=60)
        assert not reader.is_alive()
        sock.shutdown(socket.SHUT_WR)  # the end of the stream is passed on, then the echo server's
        assert sock.recv(1) == b""
    assert received == [sent]


def test_a_round_trip_takes_at_least_the_configured_time(echo_server: str) -> None:
    rtt_ms = 40.0
    with rtt_proxy.running_proxy(echo_server, rtt_ms) as proxy, _connect(proxy) as sock:
        assert _read_exactly(sock, len(BANNER)) == BANNER
        for i in range(5):
            ping = f"ping {i}".encode()
            started = time.monotonic()
            sock.sendall(ping)
            assert _read_exactly(sock, len(ping)) == ping
            assert time.monotonic() - started >= rtt_ms / 1000


def test_the_workers_url_points_at_the_proxy() -> None:
    proxy = rtt_proxy.Proxy(port=4321, pid=1, rtt_ms=1.0)
    assert proxy.url_for("redis://127.0.0.1:6379/0") == "redis://127.0.0.1:4321/0"
    assert proxy.url_for("redis://:secret@127.0.0.1:6379/2") == "redis://:secret@127.0.0.1:4321/2"
