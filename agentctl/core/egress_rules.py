"""The rules of the egress policy (spec/cli.md §12): the URL's scheme, userinfo, host and
port, and the classes of address a resolved host may not have.

Pure: no resolution, no sockets. Both places that judge egress use these same rules: the
coordinator's pre-flight (``agentctl.coordinator.egress_preflight``, before any run or
database exists) and the worker (``agentctl.workers.egress``, again at request time, where it
also pins the connection to the checked addresses). Each resolves with its own call and hands
the answer to ``checked_addresses``.

Invariants:
- a URL passes only with a scheme in ``allowedSchemes`` (http or https), no userinfo, a host
  matching the allowlist (exact, or ``*.suffix``, which never matches the bare suffix; an
  empty allowlist matches nothing) and an allowed port (an empty ``allowedPorts`` admits only
  the scheme's default port);
- a resolver's answer is sorted and de-duplicated and refused *whole* if any address is
  private, loopback, link-local, CGNAT, documentation, multicast or reserved (unless
  ``allowPrivate``); an IPv6 address carrying an IPv4 one (mapped, 6to4, NAT64) is judged as
  that IPv4 address; an empty answer is a ``DnsError`` (exit 6);
- a refusal is a ``NetworkPolicyError`` (exit 3) that says "network address is not
  authorized" (the original's words) and then names the policy key that refused it.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from agentctl.core.jsonvalue import JsonValue
from agentctl.errors import DnsError, NetworkPolicyError

DEFAULT_PORTS = {"http": 80, "https": 443}
MAX_RESPONSE_BYTES = 8_388_608
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

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
class Target:
    """A URL's checked origin."""

    scheme: str
    host: str  # lower case, no trailing dot, IPv6 without brackets
    port: int


def host_name(host: str) -> str:
    """The one spelling of a host name every rule and every connection compares: lower case,
    without an FQDN's trailing dot (``Example.COM.`` is ``example.com``)."""
    return host.lower().rstrip(".")


def host_allowed(host: str, allowlist: tuple[str, ...]) -> bool:
    """Exact match, or ``*.suffix`` matching a strict subdomain (never the bare suffix)."""
    name = host_name(host)
    for pattern in allowlist:
        entry = host_name(pattern)
        if entry.startswith("*."):
            if name.endswith(entry[1:]):  # ".suffix": the apex itself never ends with it
                return True
        elif name == entry:
            return True
    return False


# The original's words for every egress denial, which its scripts match; our reason follows.
DENIED = "network address is not authorized"


def refused(reason: str) -> NetworkPolicyError:
    """The denial of a destination: the original's phrase, then the rule that refused it."""
    return NetworkPolicyError(f"{DENIED}: {reason}")


def url_target(
    url: str, allowlist: tuple[str, ...], schemes: tuple[str, ...], ports: tuple[int, ...]
) -> Target:
    """The URL's origin if the rules admit it, else ``NetworkPolicyError``."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or scheme not in schemes:
        raise refused(
            f"egress to {scheme or '(no scheme)'}:// is not in policy.network.allowedSchemes"
        )
    if parts.username is not None or parts.password is not None:
        raise refused("egress URLs may not carry userinfo (user:password@)")
    host = host_name(parts.hostname or "")
    if not host:
        raise refused(f"egress URL {url!r} has no host")
    if not host_allowed(host, allowlist):
        raise refused(f"egress host {host!r} is not in policy.networkAllowlist")
    try:
        given = parts.port  # an explicit 0 is port 0, which no rule admits, not the default
        port = DEFAULT_PORTS[scheme] if given is None else given
    except ValueError as exc:
        raise refused(f"egress URL {url!r} has an invalid port") from exc
    # An empty list permits the scheme's known port or the one the URL names (the original's
    # YAML reference: "Empty permits the scheme's known or explicit port"); a listed set is
    # the only ports allowed. Port 0 is never a port anything listens on: always refused.
    if port == 0 or (ports and port not in ports):
        raise refused(f"egress port {port} of {host!r} is not in policy.network.allowedPorts")
    return Target(scheme, host, port)


@dataclass(frozen=True)
class EgressPolicy:
    """The egress half of a workflow policy, in the shape a network request carries it
    (``EgressSettings``; ``agentctl.core.builders.egress_settings`` makes it from a policy)."""

    allowlist: tuple[str, ...] = ()
    schemes: tuple[str, ...] = ("https", "http")
    ports: tuple[int, ...] = ()
    allow_private: bool = False
    allow_proxy: bool = False
    custom_ca: str | None = None  # the worker's copy holds the resolved PEM
    connect_timeout: float = 10.0
    max_response_bytes: int = MAX_RESPONSE_BYTES

    @classmethod
    def from_json(cls, given: Mapping[str, JsonValue]) -> EgressPolicy:
        """Read an ``egress`` object (keys as spec/dsl.md §7 names them)."""
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


def checked_addresses(host: str, answer: Iterable[str], policy: EgressPolicy) -> tuple[str, ...]:
    """A resolver's ``answer`` for ``host``, sorted and de-duplicated, if policy admits all of
    it: one forbidden address refuses the whole answer (``NetworkPolicyError``)."""
    addresses = sorted({ipaddress.ip_address(a.split("%")[0]) for a in answer}, key=_order)
    if not addresses:
        raise DnsError(f"{host!r} resolved to no address")
    if not policy.allow_private:
        for address in addresses:
            category = classify(address)
            if category is not None:
                raise refused(
                    f"egress host {host!r} resolves to {address} ({category}); "
                    "set policy.network.allowPrivate to allow it"
                )
    return tuple(str(a) for a in addresses)


def _order(address: IPAddress) -> tuple[int, int]:
    return (address.version, int(address))
