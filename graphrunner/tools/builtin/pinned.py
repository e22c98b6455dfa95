"""An httpx transport that connects only where an `AddressPolicy` admits, at the address it checked.

Every new connection (the first request and every redirect hop) goes through
`PinnedBackend.connect_tcp`: the host name is checked, resolved once, every address it resolves
to is checked, and the socket is opened to one of those addresses, never to the name again, so
DNS cannot answer differently between the check and the connect. TLS still verifies the
certificate against the host name (httpcore sends it as SNI) and the Host header is unchanged.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Iterable
from functools import cache
from typing import Any

import httpcore
import httpx

from graphrunner.tools.addresses import AddressPolicy, AddressRefused, literal_address


async def resolve(host: str, port: int) -> list[str]:
    """The addresses `host` resolves to, in the resolver's order (tests replace this function)."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


async def admitted_addresses(policy: AddressPolicy, host: str, port: int) -> list[str]:
    """The addresses to connect to for `host`; raises `AddressRefused` when the name or any
    address it resolves to is refused (a name that also points somewhere refused is suspect)."""
    reason = policy.host_refusal(host)
    if reason is not None:
        raise AddressRefused(host, None, reason)
    literal = literal_address(host)
    written = [str(literal)] if literal is not None else await _resolved(host, port)
    for text in written:
        address = literal_address(text)
        if address is None:  # a resolver answer that is no address: refuse rather than guess
            raise AddressRefused(host, text, "the resolver answered something that is not an address")
        reason = policy.address_refusal(host, address)
        if reason is not None:
            raise AddressRefused(host, text, reason)
    return written


async def _resolved(host: str, port: int) -> list[str]:
    try:
        addresses = await resolve(host, port)
    except OSError as exc:
        raise httpcore.ConnectError(f"cannot resolve {host!r}: {exc}") from exc
    if not addresses:
        raise httpcore.ConnectError(f"{host!r} resolves to no address")
    return addresses


class PinnedBackend(httpcore.AsyncNetworkBackend):
    """httpcore's asyncio backend, connecting only to addresses the policy admits."""

    def __init__(self, policy: AddressPolicy) -> None:
        self._policy = policy
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        """Check `host`, resolve it, check its addresses, then connect to the first that answers."""
        try:
            addresses = await asyncio.wait_for(admitted_addresses(self._policy, host, port), timeout)
        except TimeoutError:
            raise httpcore.ConnectTimeout(f"resolving {host!r} timed out") from None
        error: httpcore.ConnectError | None = None
        for address in addresses:
            try:
                return await self._inner.connect_tcp(address, port, timeout, local_address, socket_options)
            except httpcore.ConnectError as exc:  # the next address may answer
                error = exc
        assert error is not None
        raise error

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.AsyncNetworkStream:
        """Unix sockets are not reachable by the `http` tool."""
        raise AddressRefused(path, None, "unix sockets are not reachable by the http tool")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


@cache
def _ssl_context() -> ssl.SSLContext:
    """The TLS context of every request (certifi's CAs, or SSL_CERT_FILE / SSL_CERT_DIR), made once."""
    return httpx.create_ssl_context()


class PinnedTransport(httpx.AsyncHTTPTransport):
    """httpx's transport over a connection pool whose every connection goes through `PinnedBackend`."""

    def __init__(self, policy: AddressPolicy) -> None:
        super().__init__(verify=_ssl_context(), trust_env=False)
        # httpx takes no network backend, so its pool is replaced by one that has ours; fail
        # closed if a future httpx no longer keeps its pool where this expects it.
        if not isinstance(getattr(self, "_pool", None), httpcore.AsyncConnectionPool):
            raise RuntimeError("httpx's transport has changed: the http tool cannot pin addresses")
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=_ssl_context(), network_backend=PinnedBackend(policy)
        )
