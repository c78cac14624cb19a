"""Egress at request time (spec/cli.md §12): the worker's own resolution of a checked URL.

This module resolves; ``agentctl.workers.egress_http`` enforces the decision on the wire.
Providers, MCP and A2A use both. The rules themselves (scheme, userinfo, host, port, and the
refused address classes) are pure and live in ``agentctl.core.egress_rules``, shared with the
coordinator's pre-flight (``agentctl.coordinator.egress_preflight``), which applies them to
every endpoint a plan can reach before a run exists.

The pre-flight does not replace what happens here: a name can resolve differently between
the pre-flight and the request (DNS rebinding, a changed record, a resumed run days later), so
the worker checks the URL again, resolves again and pins the connection to the addresses it
checked itself. Defence in depth: either check alone refuses a forbidden address.

Invariants:
- a host is resolved once per request route, within ``connectTimeoutSeconds``; the answer is
  judged whole by ``checked_addresses`` and the checked addresses are the only ones ever
  connected to (no re-resolution);
- a denial is a ``NetworkPolicyError`` (exit 3), a resolution failure a ``DnsError``
  (exit 6), both raised before any request is sent.
"""

from __future__ import annotations

import socket
from collections.abc import Awaitable, Callable

import trio

from agentctl.core.egress_rules import EgressPolicy as EgressPolicy
from agentctl.core.egress_rules import Target, checked_addresses
from agentctl.core.egress_rules import check_url as check_url
from agentctl.errors import DnsError

Resolver = Callable[[str, int], Awaitable[list[str]]]


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
    return checked_addresses(target.host, answer, policy)
