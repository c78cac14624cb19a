"""Egress policy decisions (spec/cli.md §12): which URL may be called, and at which addresses.

This module decides; ``agentctl.workers.egress_http`` enforces the decision on the wire.
Providers and MCP use both; A2A will. The URL rules themselves (scheme, userinfo, host,
port) are pure and live in ``agentctl.core.egress_rules``, so the coordinator can refuse a
URL before a run exists; resolving and the address rules happen here.

Invariants:
- a URL passes only with an allowed scheme, no userinfo, a host matching
  ``policy.networkAllowlist`` (exact, or ``*.suffix`` which never matches the bare suffix; an
  empty allowlist matches nothing: egress fails closed) and an allowed port (an empty
  ``allowedPorts`` admits only the scheme's default port);
- a host is resolved once, within ``connectTimeoutSeconds``; the answer is sorted and
  de-duplicated and refused *whole* if any address is private, loopback, link-local, CGNAT,
  documentation, multicast or reserved (unless ``allowPrivate``); the checked addresses are
  the only ones ever connected to (no re-resolution);
- a denial is a ``NetworkPolicyError`` (exit 3), a resolution failure a ``DnsError``
  (exit 6), both raised before any request is sent.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

import trio

from agentctl.core.egress_rules import Target, url_target
from agentctl.core.egress_rules import host_allowed as host_allowed
from agentctl.core.jsonvalue import JsonValue
from agentctl.errors import DnsError, NetworkPolicyError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], Awaitable[list[str]]]
MAX_RESPONSE_BYTES = 8_388_608

# The refused ranges, each with the category an error names. IPv6 addresses outside
# 2000::/3 (global unicast) that no row names are reserved too (see ``classify``).
_RANGES: tuple[tuple[str, str], ...] = (
    ("reserved", "0.0.0.0/8"),
    ("private", "10.0.0.0/8"),
    ("cgnat", "100.64.0.0/10"),
    ("loopback", "127.0.0.0/8"),
    ("link-local", "169.254.0.0/16"),
    ("private", "172.16.0.0/12"),
    ("reserved", "192.0.0.0/24"),
    ("documentation", "192.0.2.0/24"),
    ("reserved", "192.88.99.0/24"),
    ("private", "192.168.0.0/16"),
    ("reserved", "198.18.0.0/15"),
    ("documentation", "198.51.100.0/24"),
    ("documentation", "203.0.113.0/24"),
    ("multicast", "224.0.0.0/4"),
    ("reserved", "240.0.0.0/4"),
    ("reserved", "::/128"),
    ("loopback", "::1/128"),
    ("reserved", "100::/64"),
    ("reserved", "2001::/23"),
    ("documentation", "2001:db8::/32"),
    ("documentation", "3fff::/20"),
    ("private", "fc00::/7"),
    ("link-local", "fe80::/10"),
    ("private", "fec0::/10"),
    ("multicast", "ff00::/8"),
)
_NETWORKS = tuple((name, ipaddress.ip_network(net)) for name, net in _RANGES)
_GLOBAL_V6 = ipaddress.ip_network("2000::/3")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


@dataclass(frozen=True)
class EgressPolicy:
    """The egress half of a workflow policy, as a request carries it (``egress``)."""

    allowlist: tuple[str, ...] = ()
    schemes: tuple[str, ...] = ("https", "http")
    ports: tuple[int, ...] = ()
    allow_private: bool = False
    allow_proxy: bool = False
    custom_ca: str | None = None  # a PEM, already resolved by the coordinator
    connect_timeout: float = 10.0
    max_response_bytes: int = MAX_RESPONSE_BYTES

    @classmethod
    def from_json(cls, given: Mapping[str, JsonValue]) -> EgressPolicy:
        """Read the request's ``egress`` object (keys as spec/dsl.md §7 names them)."""
        ca = given.get("customCa")
        timeout = given.get("connectTimeoutSeconds")
        cap = given.get("maxResponseBytes")
        return cls(
            allowlist=tuple(str(h) for h in _list(given.get("networkAllowlist"))),
            schemes=tuple(str(s) for s in _list(given.get("allowedSchemes"))) or cls.schemes,
            ports=tuple(int(p) for p in _list(given.get("allowedPorts")) if isinstance(p, int)),
            allow_private=given.get("allowPrivate") is True,
            allow_proxy=given.get("allowProxy") is True,
            custom_ca=ca if isinstance(ca, str) else None,
            connect_timeout=float(timeout) if isinstance(timeout, int | float) else 10.0,
            max_response_bytes=int(cap) if isinstance(cap, int) else MAX_RESPONSE_BYTES,
        )


def _list(value: JsonValue) -> list[JsonValue]:
    return value if isinstance(value, list) else []


def check_url(url: str, policy: EgressPolicy) -> Target:
    """The URL's origin if policy admits it, else ``NetworkPolicyError``."""
    return url_target(url, policy.allowlist, policy.schemes, policy.ports)


def _embedded_v4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one carries (mapped, 6to4, NAT64), classified as itself."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def classify(address: IPAddress) -> str | None:
    """The refused category of ``address`` (``"loopback"``, …), or None for a public one."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = _embedded_v4(address)
        if embedded is not None:
            return classify(embedded)
    for name, network in _NETWORKS:
        if address.version == network.version and address in network:
            return name
    if isinstance(address, ipaddress.IPv6Address) and address not in _GLOBAL_V6:
        return "reserved"
    return None


async def system_resolve(host: str, port: int) -> list[str]:
    """Every address ``host`` has for TCP, by the system resolver (trio runs it in a thread)."""
    infos = await trio.socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


async def resolve_checked(
    target: Target, policy: EgressPolicy, resolver: Resolver | None = None
) -> tuple[str, ...]:
    """Resolve once and check the whole answer; the addresses to pin, sorted, no duplicates."""
    resolve = resolver or system_resolve
    try:
        with trio.fail_after(policy.connect_timeout):
            answer = await resolve(target.host, target.port)
    except trio.TooSlowError as exc:
        raise DnsError(f"resolving {target.host!r} timed out") from exc
    except OSError as exc:
        raise DnsError(f"cannot resolve {target.host!r}: {exc.strerror or exc}") from exc
    addresses = sorted({ipaddress.ip_address(a.split("%")[0]) for a in answer}, key=_order)
    if not addresses:
        raise DnsError(f"{target.host!r} resolved to no address")
    if not policy.allow_private:
        for address in addresses:
            category = classify(address)
            if category is not None:
                raise NetworkPolicyError(
                    f"egress host {target.host!r} resolves to {address} ({category}); "
                    "set policy.network.allowPrivate to allow it"
                )
    return tuple(str(a) for a in addresses)


def _order(address: IPAddress) -> tuple[int, int]:
    return (address.version, int(address))
