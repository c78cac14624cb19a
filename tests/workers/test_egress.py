"""Egress policy: address classes, host and URL checks, one resolution, and the pinned client.

The client tests make real HTTP requests to a fixture server on 127.0.0.1; a test resolver
maps made-up names to it, which proves the connection goes to the checked address while the
request keeps the name.
"""

from __future__ import annotations

import ipaddress

import httpx2
import pytest

from agentctl.core.egress_rules import EgressPolicy, check_url, classify, host_allowed
from agentctl.errors import DnsError, NetworkPolicyError, ResponseTooLargeError
from agentctl.workers.egress import resolve_checked
from agentctl.workers.egress_http import check_route, egress_client
from tests.providers.fixtures import FixtureServer, Reply

REFUSED = [
    ("10.1.2.3", "private"),
    ("172.16.0.1", "private"),
    ("172.31.255.255", "private"),
    ("192.168.1.1", "private"),
    ("127.0.0.1", "loopback"),
    ("127.255.0.9", "loopback"),
    ("169.254.169.254", "link-local"),
    ("100.64.0.1", "cgnat"),
    ("100.127.255.254", "cgnat"),
    ("192.0.2.10", "documentation"),
    ("198.51.100.7", "documentation"),
    ("203.0.113.99", "documentation"),
    ("224.0.0.251", "multicast"),
    ("239.255.255.250", "multicast"),
    ("0.0.0.0", "reserved"),
    ("240.0.0.1", "reserved"),
    ("255.255.255.255", "reserved"),
    ("198.18.0.1", "reserved"),
    ("192.0.0.8", "reserved"),
    ("::1", "loopback"),
    ("::", "reserved"),
    ("fc00::1", "private"),
    ("fd12:3456::1", "private"),
    ("fe80::1", "link-local"),
    ("2001:db8::1", "documentation"),
    ("3fff::1", "documentation"),
    ("ff02::1", "multicast"),
    ("100::1", "reserved"),
    ("2001::1", "reserved"),  # Teredo, inside the IETF protocol block
    ("::ffff:127.0.0.1", "loopback"),  # IPv4-mapped: classified as the IPv4 address
    ("::ffff:10.0.0.1", "private"),
    ("64:ff9b::a00:1", "private"),  # NAT64 of 10.0.0.1
    ("2002:a00:1::1", "private"),  # 6to4 of 10.0.0.1
    ("4000::1", "reserved"),  # outside global unicast 2000::/3
]
PUBLIC = ["8.8.8.8", "1.1.1.1", "100.63.255.255", "100.128.0.0", "172.32.0.1", "2606:4700::1111"]


@pytest.mark.parametrize(("address", "category"), REFUSED)
def test_refused_address_classes(address: str, category: str) -> None:
    assert classify(ipaddress.ip_address(address)) == category


@pytest.mark.parametrize("address", PUBLIC)
def test_public_addresses_pass(address: str) -> None:
    assert classify(ipaddress.ip_address(address)) is None


def test_host_allowlist_exact_and_suffix_without_apex() -> None:
    allow = ("api.openai.com", "*.example.com")
    assert host_allowed("api.openai.com", allow)
    assert host_allowed("API.OpenAI.com.", allow)
    assert host_allowed("a.example.com", allow) and host_allowed("a.b.example.com", allow)
    assert not host_allowed("example.com", allow)  # the apex is not a subdomain
    assert not host_allowed("evilexample.com", allow)
    assert not host_allowed("example.com.evil.net", allow)
    assert not host_allowed("openai.com", allow)
    assert not host_allowed("anything.com", ())  # an empty allowlist admits nothing


def test_check_url_schemes_userinfo_and_ports() -> None:
    policy = EgressPolicy(allowlist=("api.example.com",), schemes=("https",))
    assert check_url("https://api.example.com/v1", policy).port == 443
    for url, words in [
        ("http://api.example.com/", "allowedSchemes"),
        ("ftp://api.example.com/", "allowedSchemes"),
        ("https://user:pw@api.example.com/", "userinfo"),
        ("https://other.example.com/", "networkAllowlist"),
        ("https://api.example.com:0/", "allowedPorts"),
    ]:
        with pytest.raises(NetworkPolicyError, match=words):
            check_url(url, policy)
    # empty allowedPorts: the URL's explicit port is permitted (the original's rule)
    assert check_url("https://api.example.com:8443/", policy).port == 8443
    ported = EgressPolicy(allowlist=("api.example.com",), ports=(8443,))
    assert check_url("https://api.example.com:8443/", ported).port == 8443
    with pytest.raises(NetworkPolicyError, match="allowedPorts"):
        check_url("https://api.example.com/", ported)  # listed ports replace the default


def _resolver(table: dict[str, list[str]]):  # type: ignore[no-untyped-def]
    calls: list[str] = []

    async def resolve(host: str, port: int) -> list[str]:
        calls.append(host)
        if host not in table:
            raise OSError(-2, "Name or service not known")
        return table[host]

    resolve.calls = calls  # type: ignore[attr-defined]
    return resolve


async def test_one_private_address_refuses_the_whole_answer() -> None:
    policy = EgressPolicy(allowlist=("mixed.test",))
    target = check_url("https://mixed.test/", policy)
    resolve = _resolver({"mixed.test": ["93.184.216.34", "10.0.0.5"]})
    with pytest.raises(NetworkPolicyError, match=r"10\.0\.0\.5 \(private\)"):
        await resolve_checked(target, policy, resolve)
    allowed = EgressPolicy(allowlist=("mixed.test",), allow_private=True)
    pinned = await resolve_checked(target, allowed, resolve)
    assert pinned == ("10.0.0.5", "93.184.216.34")  # sorted, de-duplicated


async def test_resolution_failure_is_a_dns_error() -> None:
    policy = EgressPolicy(allowlist=("nowhere.test",))
    with pytest.raises(DnsError, match=r"nowhere\.test"):
        await resolve_checked(check_url("https://nowhere.test/", policy), policy, _resolver({}))


def _policy(server: FixtureServer, *names: str, **extra: object) -> EgressPolicy:
    hosts = names or ("127.0.0.1",)
    return EgressPolicy(allowlist=hosts, ports=(server.port,), allow_private=True, **extra)  # type: ignore[arg-type]


async def test_connection_is_pinned_and_keeps_the_name(server: FixtureServer) -> None:
    server.script(Reply(body={"ok": True}))
    resolve = _resolver({"api.fixture.test": ["127.0.0.1"]})
    url = server.url("/v1/x", host="api.fixture.test")
    route = await check_route(url, _policy(server, "api.fixture.test"), resolve)
    async with egress_client(route, read_timeout=10) as client:
        response = await client.get(url)
        assert response.json() == {"ok": True}
        with pytest.raises(NetworkPolicyError, match="not checked"):
            await client.get(server.url("/other"))  # another origin was never checked
    assert resolve.calls == ["api.fixture.test"]  # type: ignore[attr-defined]
    assert server.seen[0].headers["host"] == f"api.fixture.test:{server.port}"
    assert len(server.seen) == 1 and route.tracker.sent


async def test_a_name_with_its_trailing_dot_is_the_name_checked(server: FixtureServer) -> None:
    # `api.fixture.test.` (an FQDN) is the name the policy allowed and pinned: the worker's
    # connection takes it, as the pre-flight did, instead of "was not checked by policy".
    server.script(Reply(body={"ok": True}))
    resolve = _resolver({"api.fixture.test": ["127.0.0.1"]})
    url = server.url("/v1/x", host="api.fixture.test.")
    route = await check_route(url, _policy(server, "api.fixture.test"), resolve)
    async with egress_client(route, read_timeout=10) as client:
        response = await client.get(url)
        assert response.json() == {"ok": True}
    assert len(server.seen) == 1


async def test_loopback_refused_without_allow_private(server: FixtureServer) -> None:
    policy = EgressPolicy(allowlist=("127.0.0.1",), ports=(server.port,))
    with pytest.raises(NetworkPolicyError, match="loopback"):
        await check_route(server.url("/"), policy)
    assert server.seen == []


async def test_redirect_is_refused_naming_the_location(server: FixtureServer) -> None:
    server.script(Reply(status=307, headers={"Location": "http://127.0.0.1:9/elsewhere"}))
    route = await check_route(server.url("/"), _policy(server))
    async with egress_client(route, read_timeout=10) as client:
        with pytest.raises(NetworkPolicyError, match=r"307 redirecting to http://127\.0\.0\.1:9/"):
            await client.post(server.url("/"), json={})
    assert len(server.seen) == 1


async def test_response_cap_by_length_and_while_streaming(server: FixtureServer) -> None:
    server.script(
        Reply(raw=b"x" * 5000),
        Reply(events=[{"type": "chunk", "data": "y" * 400} for _ in range(20)]),
        Reply(raw=b"z" * 100),
    )
    route = await check_route(server.url("/"), _policy(server, max_response_bytes=1000))
    async with egress_client(route, read_timeout=10) as client:
        with pytest.raises(ResponseTooLargeError, match="1000 bytes"):
            await client.get(server.url("/"))
        with pytest.raises(ResponseTooLargeError):  # no Content-Length: counted as read
            async with client.stream("GET", server.url("/")) as response:
                async for _ in response.aiter_bytes():
                    pass
        assert (await client.get(server.url("/"))).content == b"z" * 100
    assert server.seen[0].headers["accept-encoding"] == "identity"


async def test_environment_proxies_are_ignored(
    server: FixtureServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")  # the discard port: nothing listens
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    server.script(Reply(body={"direct": True}))
    route = await check_route(server.url("/"), _policy(server))
    assert route.proxy is None
    async with egress_client(route, read_timeout=10) as client:
        assert (await client.get(server.url("/"))).json() == {"direct": True}
    proxied = await check_route(server.url("/"), _policy(server, allow_proxy=True))
    assert proxied.proxy == "http://127.0.0.1:9"  # only allowProxy takes it
    async with egress_client(proxied, read_timeout=10) as client:
        with pytest.raises(httpx2.ConnectError):
            await client.get(server.url("/"))
    assert not proxied.tracker.sent and len(server.seen) == 1


async def test_connect_refused_sends_nothing(server: FixtureServer) -> None:
    port = server.port
    server.close()  # nothing listens on the port any more
    policy = EgressPolicy(allowlist=("127.0.0.1",), ports=(port,), allow_private=True)
    route = await check_route(f"http://127.0.0.1:{port}/", policy)
    async with egress_client(route, read_timeout=10) as client:
        with pytest.raises(httpx2.ConnectError):
            await client.get(f"http://127.0.0.1:{port}/")
    assert not route.tracker.sent
