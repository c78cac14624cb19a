"""The egress decision on the wire: an ``httpx2`` client that cannot leave the checked route.

``agentctl.workers.egress`` decides which URL and which addresses; this module builds the HTTP
client the provider SDKs and the MCP client (and later A2A) are given. It imports ``httpx2`` and
``httpcore2`` (the HTTP stack of the official SDKs), so only executors that talk HTTP import it.

Invariants:
- the client connects only to the addresses checked before (the host's name stays in the URL,
  so TLS SNI, certificate checks and ``Host`` use the name; the socket goes to the pinned IP);
  a request for any other origin is a ``NetworkPolicyError``;
- no redirect is followed: a 3xx is a ``NetworkPolicyError`` naming the Location;
- environment proxies are ignored (``trust_env=False``) unless ``allowProxy``, in which case
  the environment's proxy for the scheme is used explicitly, through this same transport;
- TLS is always verified against the system roots, plus ``customCa`` when given;
- an answer larger than ``maxResponseBytes`` fails with ``ResponseTooLargeError`` while it is
  read (``Content-Length`` first, then counted bytes; compression is declined so the count
  is the real size);
- ``SendTracker.sent`` turns true before the first request byte is written: a failure while
  it is false happened before anything left, one after it may have reached the server.
"""

from __future__ import annotations

import functools
import ssl
import urllib.request
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpcore2
import httpx2

from agentctl.core.egress_rules import Target, host_name
from agentctl.errors import NetworkPolicyError, ResponseTooLargeError
from agentctl.workers.egress import EgressPolicy, Resolver, check_url, resolve_checked
from agentctl.workers.tracecontext import current_traceparent

Pins = Mapping[tuple[str, int], tuple[str, ...]]


@dataclass
class SendTracker:
    """Whether any request byte may have left this process (the uncertainty boundary), and
    why an answer was refused (``refused``: a library reading it may report only that it
    ended, as the MCP SDK does with an SSE stream cut at the cap)."""

    sent: bool = False
    refused: str | None = None


@dataclass(frozen=True)
class EgressRoute:
    """A checked URL: its origin, its pinned addresses and the proxy to use, if any."""

    target: Target
    addresses: tuple[str, ...]
    policy: EgressPolicy
    proxy: str | None = None
    tracker: SendTracker = field(default_factory=SendTracker)


async def check_route(
    url: str, policy: EgressPolicy, resolver: Resolver | None = None
) -> EgressRoute:
    """Check ``url`` and resolve its host once: every denial happens here, before a request."""
    target = check_url(url, policy)
    addresses = await resolve_checked(target, policy, resolver)
    return EgressRoute(target, addresses, policy, _env_proxy(target, policy))


def _env_proxy(target: Target, policy: EgressPolicy) -> str | None:
    if not policy.allow_proxy:
        return None
    if urllib.request.proxy_bypass(target.host):
        return None
    return urllib.request.getproxies_environment().get(target.scheme)


def egress_client(route: EgressRoute, *, read_timeout: float) -> httpx2.AsyncClient:
    """An ``httpx2.AsyncClient`` bound to ``route`` (build it in the event loop that uses it)."""
    timeout = httpx2.Timeout(read_timeout, connect=route.policy.connect_timeout)
    return httpx2.AsyncClient(
        transport=EgressTransport(route),
        trust_env=False,
        follow_redirects=False,
        timeout=timeout,
    )


def ssl_context(policy: EgressPolicy) -> ssl.SSLContext:
    return _verifying_context(policy.custom_ca or None)


@functools.lru_cache(maxsize=8)
def _verifying_context(custom_ca: str | None) -> ssl.SSLContext:
    """One verifying context per CA set, shared by every call of this worker.

    Loading the system roots costs tens of milliseconds of CPU; built per call it was most of
    a model call's own cost, and concurrent calls in one worker queued behind each other.
    A context is safe to share: connections only read it (httpcore sets the same ALPN list).
    """
    context = ssl.create_default_context()
    if custom_ca:
        try:
            context.load_verify_locations(cadata=custom_ca)
        except ssl.SSLError as exc:
            raise NetworkPolicyError("policy.network.customCa is not a valid PEM") from exc
    return context


class _TrackedStream(httpcore2.AsyncNetworkStream):
    def __init__(self, inner: httpcore2.AsyncNetworkStream, tracker: SendTracker) -> None:
        self._inner = inner
        self._tracker = tracker

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return await self._inner.read(max_bytes, timeout)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if buffer:
            self._tracker.sent = True  # before the write: a partial write may have arrived
        await self._inner.write(buffer, timeout)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        # The handshake carries no request data, so it does not count as sent.
        inner = await self._inner.start_tls(ssl_context, server_hostname, timeout)
        return _TrackedStream(inner, self._tracker)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _PinnedBackend(httpcore2.AsyncNetworkBackend):
    """Connects a checked name to its checked addresses only (``pins`` None: via a proxy)."""

    def __init__(self, pins: Pins | None, tracker: SendTracker) -> None:
        self._pins = pins
        self._tracker = tracker
        self._inner = httpcore2.AnyIOBackend()  # anyio runs under trio and under asyncio

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        # ``localhost.`` (an FQDN) is the name the policy checked and pinned as ``localhost``.
        key = (host_name(host), port)
        addresses = (host,) if self._pins is None else self._pins.get(key)
        if not addresses:
            raise NetworkPolicyError(f"egress to {host}:{port} was not checked by policy")
        failure: Exception | None = None
        for address in addresses:
            try:
                stream = await self._inner.connect_tcp(
                    address, port, timeout, local_address, socket_options
                )
            except (httpcore2.ConnectError, httpcore2.ConnectTimeout) as exc:
                failure = exc  # try the next checked address, as a resolver would
                continue
            return _TrackedStream(stream, self._tracker)
        assert failure is not None
        raise failure

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class _CappedStream(httpx2.AsyncByteStream):
    """The response body, refused once it grows past the cap (checked per chunk read)."""

    def __init__(
        self, inner: httpx2.AsyncByteStream, cap: int, host: str, tracker: SendTracker
    ) -> None:
        self._inner = inner
        self._cap = cap
        self._host = host
        self._tracker = tracker

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = 0
        async for chunk in self._inner:
            seen += len(chunk)
            if seen > self._cap:
                raise _too_large(self._host, self._cap, self._tracker)
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


def _too_large(host: str, cap: int, tracker: SendTracker) -> ResponseTooLargeError:
    tracker.refused = (
        f"the answer from {host} exceeds policy.network.maxResponseBytes ({cap} bytes)"
    )
    return ResponseTooLargeError(tracker.refused)


class EgressTransport(httpx2.AsyncHTTPTransport):
    """httpx2's transport on a pinned, tracked connection pool, screening every answer."""

    def __init__(self, route: EgressRoute) -> None:
        context = ssl_context(route.policy)
        super().__init__(verify=context, trust_env=False)
        self._route = route
        pins = {(host_name(route.target.host), route.target.port): route.addresses}
        backend = _PinnedBackend(None if route.proxy else pins, route.tracker)
        # httpx2 has no network-backend parameter; its pool is the seam. Replacing the pool
        # keeps httpx2's own request mapping and exception translation, which the SDKs rely on.
        if route.proxy is None:
            self._pool = httpcore2.AsyncConnectionPool(ssl_context=context, network_backend=backend)
        else:
            self._pool = httpcore2.AsyncHTTPProxy(
                proxy_url=route.proxy, ssl_context=context, network_backend=backend
            )

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        target = self._route.target
        origin = (request.url.scheme, host_name(request.url.host), request.url.port)
        if (
            origin[:2] != (target.scheme, host_name(target.host))
            or (origin[2] or _default_port(target.scheme)) != target.port
        ):
            raise NetworkPolicyError(f"egress to {request.url.host} was not checked by policy")
        request.headers["Accept-Encoding"] = "identity"
        parent = current_traceparent()
        if parent is not None and "traceparent" not in request.headers:
            request.headers["traceparent"] = parent
        response = await super().handle_async_request(request)
        return await self._screen(response)

    async def _screen(self, response: httpx2.Response) -> httpx2.Response:
        host, cap = self._route.target.host, self._route.policy.max_response_bytes
        if 300 <= response.status_code < 400:
            await response.aclose()
            location = response.headers.get("location", "(no Location)")
            raise NetworkPolicyError(
                f"{host} answered HTTP {response.status_code} redirecting to {location}; "
                "redirects are never followed"
            )
        length = response.headers.get("content-length", "")
        if length.isdigit() and int(length) > cap:
            await response.aclose()
            raise _too_large(host, cap, self._route.tracker)
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        return httpx2.Response(
            status_code=response.status_code,
            headers=response.headers,
            stream=_CappedStream(response.stream, cap, host, self._route.tracker),
            extensions=response.extensions,
        )


def _default_port(scheme: str) -> int:
    return 443 if scheme == "https" else 80
