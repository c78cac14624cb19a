"""The egress route for SDKs built on ``httpx`` (the official ``a2a-sdk``).

``egress_http`` enforces the egress decision for ``httpx2``; an SDK that insists on an
``httpx.AsyncClient`` gets one whose transport hands every request to that same
``EgressTransport``. So the same rules hold, with no second implementation of them: only the
checked origin and its pinned addresses, no redirects, no environment proxies, verified TLS,
answers capped at ``maxResponseBytes``, and ``SendTracker.sent`` set before a request byte
leaves.

Invariants: bodies are read whole (they are capped), so this transport does not stream; errors
of the ``httpx2`` stack and ``agentctl`` errors pass through unchanged, for the executor to
judge (a policy denial happened before any request).
"""

from __future__ import annotations

from collections.abc import Mapping

import httpx
import httpx2

from agentctl.workers.egress_http import EgressRoute, EgressTransport


class EgressHttpxTransport(httpx.AsyncBaseTransport):
    """An ``httpx`` transport over ``EgressTransport`` (see the module docstring)."""

    def __init__(self, route: EgressRoute) -> None:
        self._inner = EgressTransport(route)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        timeout = request.extensions.get("timeout")
        forwarded = httpx2.Request(
            request.method,
            str(request.url),
            headers=list(request.headers.raw),
            content=body,
            extensions={"timeout": timeout} if timeout is not None else {},
        )
        answer = await self._inner.handle_async_request(forwarded)
        try:
            content = await answer.aread()
        finally:
            await answer.aclose()
        return httpx.Response(answer.status_code, headers=answer.headers.raw, content=content)

    async def aclose(self) -> None:
        await self._inner.aclose()


def egress_httpx_client(
    route: EgressRoute, *, read_timeout: float, headers: Mapping[str, str]
) -> httpx.AsyncClient:
    """An ``httpx.AsyncClient`` bound to ``route`` (build it in the event loop that uses it)."""
    return httpx.AsyncClient(
        transport=EgressHttpxTransport(route),
        trust_env=False,
        follow_redirects=False,
        timeout=httpx.Timeout(read_timeout, connect=route.policy.connect_timeout),
        headers=dict(headers),
    )
