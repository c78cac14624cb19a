"""The URL rules of the egress policy (spec/cli.md §12): scheme, userinfo, host and port.

Pure: no resolution, no sockets. The worker applies them before it resolves a host
(``agentctl.workers.egress``); the coordinator applies them to the endpoints a plan will
reach before a run exists, so a URL the policy refuses is refused with nothing recorded.

Invariants:
- a URL passes only with a scheme in ``allowedSchemes`` (http or https), no userinfo, a host
  matching the allowlist (exact, or ``*.suffix``, which never matches the bare suffix; an
  empty allowlist matches nothing) and an allowed port (an empty ``allowedPorts`` admits only
  the scheme's default port);
- a refusal is a ``NetworkPolicyError`` (exit 3) naming the policy key that refused it.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from agentctl.errors import NetworkPolicyError

DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True)
class Target:
    """A URL's checked origin."""

    scheme: str
    host: str  # lower case, no trailing dot, IPv6 without brackets
    port: int


def host_allowed(host: str, allowlist: tuple[str, ...]) -> bool:
    """Exact match, or ``*.suffix`` matching a strict subdomain (never the bare suffix)."""
    name = host.lower().rstrip(".")
    for pattern in allowlist:
        entry = pattern.lower().rstrip(".")
        if entry.startswith("*."):
            if name.endswith(entry[1:]):  # ".suffix": the apex itself never ends with it
                return True
        elif name == entry:
            return True
    return False


def url_target(
    url: str, allowlist: tuple[str, ...], schemes: tuple[str, ...], ports: tuple[int, ...]
) -> Target:
    """The URL's origin if the rules admit it, else ``NetworkPolicyError``."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or scheme not in schemes:
        raise NetworkPolicyError(
            f"egress to {scheme or '(no scheme)'}:// is not in policy.network.allowedSchemes"
        )
    if parts.username is not None or parts.password is not None:
        raise NetworkPolicyError("egress URLs may not carry userinfo (user:password@)")
    host = (parts.hostname or "").rstrip(".")
    if not host:
        raise NetworkPolicyError(f"egress URL {url!r} has no host")
    if not host_allowed(host, allowlist):
        raise NetworkPolicyError(f"egress host {host!r} is not in policy.networkAllowlist")
    try:
        port = parts.port or DEFAULT_PORTS[scheme]
    except ValueError as exc:
        raise NetworkPolicyError(f"egress URL {url!r} has an invalid port") from exc
    allowed = ports or (DEFAULT_PORTS[scheme],)
    if port not in allowed:
        raise NetworkPolicyError(
            f"egress port {port} of {host!r} is not in policy.network.allowedPorts"
        )
    return Target(scheme, host, port)
