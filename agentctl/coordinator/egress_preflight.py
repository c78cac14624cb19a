"""The egress pre-flight: every endpoint a plan can reach is judged before any state exists.

``run``, ``fork``, ``retry`` and ``repair`` call it before the database or the new run is
created, ``resume`` before it claims the run, so a refused endpoint leaves nothing behind
(spec/cli.md §12: "denial 3, DNS failure 6, no DB"). The endpoints are the plan's closure
(``agentctl.core.egress_reach``): the providers its agent tasks call, the MCP servers of its
``mcp.call`` tasks and agents' ``mcp.tool`` tools, the Agent Cards of its A2A peers.

Invariants:
- the rules are the worker's own (``agentctl.core.egress_rules``): first every URL (scheme,
  userinfo, host allowlist, port), then each origin's host resolved once within
  ``connectTimeoutSeconds`` and its whole answer judged by ``checked_addresses``;
- a denial is a ``NetworkPolicyError`` (exit 3), a name that does not resolve (or not in
  time) a ``DnsError`` (exit 6); both name the provider, server or peer;
- no request is sent: resolving is the only traffic, and a preview (``run --check``, whose
  network effects are stand-ins) skips even that — it applies the URL rules only;
- this does not replace the worker's checks: the worker resolves again at request time and
  pins the connection to what it checked (a name may resolve differently by then).
"""

from __future__ import annotations

import socket

import trio

from agentctl.core.builders import egress_settings
from agentctl.core.egress_reach import plan_endpoints
from agentctl.core.egress_rules import EgressPolicy, Target, check_url, checked_addresses
from agentctl.core.operations import Endpoint
from agentctl.core.plan import Plan
from agentctl.errors import DnsError, NetworkPolicyError
from agentctl.sigint import trio_handles_interrupts


def preflight_egress(plan: Plan, *, resolve: bool = True) -> None:
    """Refuse, before any state exists, a plan reaching an endpoint the policy forbids;
    ``resolve=False`` (a preview) applies the URL rules without resolving any name."""
    policy = EgressPolicy.from_json(egress_settings(plan.run.policy))
    origins: dict[tuple[str, int], tuple[Endpoint, Target]] = {}
    for endpoint in plan_endpoints(plan):
        try:
            target = check_url(endpoint.url, policy)
        except NetworkPolicyError as exc:
            raise NetworkPolicyError(f"{endpoint.owner}: {exc.message}") from None
        origins.setdefault((target.host, target.port), (endpoint, target))
    if resolve and origins:
        with trio_handles_interrupts():
            trio.run(_resolve_each, tuple(origins.values()), policy)


async def _resolve_each(origins: tuple[tuple[Endpoint, Target], ...], policy: EgressPolicy) -> None:
    for endpoint, target in origins:
        try:
            answer = await _resolve(target, policy.connect_timeout)
            checked_addresses(target.host, answer, policy)
        except NetworkPolicyError as exc:
            raise NetworkPolicyError(f"{endpoint.owner}: {exc.message}") from None
        except DnsError as exc:
            raise DnsError(f"{endpoint.owner}: {exc.message}") from None


async def _resolve(target: Target, seconds: float) -> list[str]:
    """The system resolver's addresses for ``target`` (trio runs the lookup in a thread)."""
    try:
        with trio.fail_after(seconds):
            infos = await trio.socket.getaddrinfo(target.host, target.port, type=socket.SOCK_STREAM)
    except trio.TooSlowError as exc:
        raise DnsError(
            f"resolving {target.host!r} took longer than "
            f"policy.network.connectTimeoutSeconds ({seconds:g} s)"
        ) from exc
    except OSError as exc:
        raise DnsError(f"cannot resolve {target.host!r}: {exc.strerror or exc}") from exc
    return [str(info[4][0]) for info in infos]
