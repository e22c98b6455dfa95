"""Which hosts and addresses the `http` tool may connect to (DESIGN §7).

Checked in this order, on the name of every hop and on each address it resolves to:
link-local addresses, cloud metadata names and addresses, and "this host" (0.0.0.0/8, ::)
are refused always; then the deployment's deny list (`GRAPHRUNNER_HTTP_DENY`); then, when
it is not empty, the allow list (`GRAPHRUNNER_HTTP_ALLOW`) must match the host or the
address. Loopback and private ranges are allowed unless a list says otherwise. An IPv6
address that carries an IPv4 one (`::ffff:169.254.169.254`, NAT64, 6to4) is judged as both.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_address, ip_network

from graphrunner.errors import ConfigurationError

Address = IPv4Address | IPv6Address
Network = IPv4Network | IPv6Network

ALLOW_SETTING = "GRAPHRUNNER_HTTP_ALLOW"
DENY_SETTING = "GRAPHRUNNER_HTTP_DENY"

ALWAYS_REFUSED: tuple[tuple[Network, str], ...] = (
    (ip_network("169.254.0.0/16"), "link-local (169.254.0.0/16, where cloud metadata services listen)"),
    (ip_network("fe80::/10"), "link-local (fe80::/10)"),
    (ip_network("fd00:ec2::254/128"), "the AWS instance metadata service (fd00:ec2::254)"),
    (ip_network("100.100.100.200/32"), "the Alibaba Cloud metadata service (100.100.100.200)"),
    (ip_network("0.0.0.0/8"), "'this host' (0.0.0.0/8), which reaches the worker itself"),
    (ip_network("::/128"), "the unspecified address (::), which reaches the worker itself"),
)
METADATA_NAMES = frozenset(
    {
        "metadata",
        "metadata.google.internal",
        "metadata.goog",
        "instance-data",
        "instance-data.ec2.internal",
        "metadata.tencentyun.com",
    }
)
NUMERIC_IPV4 = re.compile(r"[0-9][0-9a-fA-FxX.]*")
NAT64 = ip_network("64:ff9b::/96")
IPV4_MAPPED = IPv6Network("::ffff:0:0/96")
IPV4_COMPATIBLE = ip_network("::/96")


def normal_host(host: str) -> str:
    """A host name as the rules see it: lower case, without the root's trailing dot."""
    return host.strip().lower().rstrip(".")


def judged_addresses(address: Address) -> tuple[Address, ...]:
    """`address`, and the IPv4 address an IPv6 one carries (mapped, NAT64, 6to4, compatible)."""
    if isinstance(address, IPv4Address):
        return (address,)
    carried = address.ipv4_mapped or address.sixtofour
    if carried is None and (address in NAT64 or (address in IPV4_COMPATIBLE and int(address) > 1)):
        carried = IPv4Address(int(address) & 0xFFFFFFFF)
    return (address,) if carried is None else (address, carried)


class AddressRefused(Exception):
    """The policy refuses a host, or an address it resolves to; `url` is the redirect hop's."""

    def __init__(self, host: str, address: str | None, reason: str) -> None:
        if address is None:
            where = f"host '{host}'"
        elif literal_address(host) is not None:
            where = f"address {address}"
        else:
            where = f"host '{host}' at {address}"
        super().__init__(f"{where}: {reason}")
        self.host = host
        self.address = address
        self.reason = reason
        self.url: str | None = None


@dataclass(frozen=True)
class AddressRules:
    """One list of a setting: host patterns (fnmatch) and networks, as written."""

    setting: str = ""
    hosts: tuple[str, ...] = ()
    networks: tuple[tuple[str, Network], ...] = ()

    @classmethod
    def parse(cls, entries: Iterable[str], setting: str) -> AddressRules:
        """Split `entries` into networks (`10.0.0.0/8`, `::1`) and host patterns (`*.internal`);
        an entry with a `/` or `:` that is no network (an entry has no port) is a
        `ConfigurationError` naming `setting`."""
        hosts: list[str] = []
        networks: list[tuple[str, Network]] = []
        for entry in (e.strip() for e in entries if e.strip()):
            try:
                networks.append((entry, _unmapped(ip_network(entry.strip("[]"), strict=False))))
            except ValueError as exc:
                if "/" in entry or ":" in entry:
                    raise ConfigurationError(
                        f"{setting}: {entry!r} is neither a host pattern nor a network: {exc}"
                    ) from None
                hosts.append(normal_host(entry))
        return cls(setting, tuple(hosts), tuple(networks))

    def __bool__(self) -> bool:
        return bool(self.hosts or self.networks)

    def host_entry(self, host: str) -> str | None:
        """The host pattern that matches `host`, or None."""
        name = normal_host(host)
        return next((pattern for pattern in self.hosts if fnmatchcase(name, pattern)), None)

    def network_entry(self, address: Address) -> str | None:
        """The entry whose network holds `address` (or the IPv4 address it carries), or None."""
        found = holding(address, ((network, entry) for entry, network in self.networks))
        return None if found is None else found[1]


def holding(address: Address, networks: Iterable[tuple[Network, str]]) -> tuple[Address, str] | None:
    """The label of the first network that holds `address` (else, the IPv4 address it carries),
    with the address it holds; None when none does."""
    listed = tuple(networks)
    for candidate in judged_addresses(address):
        for network, label in listed:
            if candidate.version == network.version and candidate in network:
                return candidate, label
    return None


def _unmapped(network: Network) -> Network:
    """An IPv4-mapped IPv6 network (`::ffff:10.0.0.0/104`) as the IPv4 network it maps."""
    if isinstance(network, IPv6Network) and network.prefixlen >= 96 and network.subnet_of(IPV4_MAPPED):
        return IPv4Network((int(network.network_address) & 0xFFFFFFFF, network.prefixlen - 96))
    return network


@dataclass(frozen=True)
class AddressPolicy:
    """The hosts and addresses the `http` tool may reach."""

    allow: AddressRules = AddressRules(ALLOW_SETTING)
    deny: AddressRules = AddressRules(DENY_SETTING)

    @classmethod
    def parse(cls, allow: Iterable[str] = (), deny: Iterable[str] = ()) -> AddressPolicy:
        """The policy of the settings' allow and deny lists; raises `ConfigurationError` for a bad entry."""
        return cls(AddressRules.parse(allow, ALLOW_SETTING), AddressRules.parse(deny, DENY_SETTING))

    def host_refusal(self, host: str) -> str | None:
        """Why the name `host` may not be reached whatever it resolves to, or None."""
        if normal_host(host) in METADATA_NAMES:
            return "a cloud metadata name, refused always"
        entry = self.deny.host_entry(host)
        return None if entry is None else f"matches {DENY_SETTING} entry {entry!r}"

    def address_refusal(self, host: str, address: Address) -> str | None:
        """Why `host` may not be reached at `address`, or None."""
        refused = holding(address, ALWAYS_REFUSED)
        if refused is not None:
            candidate, what = refused
            carried = "" if candidate == address else f"it carries {candidate}, "
            return f"{carried}{what}, refused always"
        entry = self.deny.network_entry(address)
        if entry is not None:
            return f"matches {DENY_SETTING} entry {entry!r}"
        if self.allow and self.allow.host_entry(host) is None and self.allow.network_entry(address) is None:
            return f"matches no {ALLOW_SETTING} entry"
        return None


def literal_address(host: str) -> Address | None:
    """The address `host` is written as, or None for a name: `127.0.0.1`, `::1`, and the
    forms the C resolver also reads as IPv4 (`2130706433`, `0x7f.1`, `0177.0.0.1`)."""
    try:
        return ip_address(host.strip("[]"))
    except ValueError:
        pass
    if not NUMERIC_IPV4.fullmatch(host):
        return None
    try:
        return IPv4Address(socket.inet_aton(host))
    except OSError:
        return None
