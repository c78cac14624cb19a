"""MCP over Streamable HTTP: ``mcp.call``, an agent's MCP tools and their ``tools/list``.

Each effect opens one session with one server through the official ``mcp`` package's client
(anyio, which runs under trio): ``initialize`` (handshake-era protocol, offered as
2025-11-25), then either ``tools/list`` or ``tools/call``, then the session ends.

Invariants:
- the egress policy is applied before anything is sent (``check_route``: allowlist, ports,
  private addresses, one resolution); the SDK is given an ``httpx2`` client bound to the
  checked addresses that follows no redirect and ignores environment proxies;
- a negotiated protocol version other than the server's configured ``protocolVersion`` fails
  the effect before any tool is called;
- a ``keyed`` call (``McpRequest.keyed``) carries the effect id as
  ``params._meta["agentctl.dev/idempotency-key"]`` (``IDEMPOTENCY_META_KEY``), for a server
  whose contract honours the key; any other call sends no ``_meta``;
- once the ``tools/call`` request was handed to the transport, a timeout, a lost connection or
  a cancellation leaves the effect uncertain: nothing here reconnects or sends it again;
- tool annotations and descriptions are the server's claims: reported, never acted on;
- every outcome, success or failure, carries the session and calls as protocol evidence;
- no header value appears in an error or in the evidence (values are redacted);
- the SDK's own log lines (warnings, tracebacks of its background tasks) never reach the
  user's terminal: what matters is in the effect's outcome and evidence.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

import httpx2
import trio

from agentctl.core.effects import EffectId, idempotency_key
from agentctl.core.jsonvalue import JsonObject, JsonValue, as_list
from agentctl.core.protocols import ProtocolSession, bounded
from agentctl.core.redact import Redactor
from agentctl.errors import AgentctlError, RunFailedError
from agentctl.mailbox.messages import Execute
from agentctl.mailbox.requests import McpRequest
from agentctl.workers.egress import EgressPolicy
from agentctl.workers.egress_http import check_route, egress_client
from agentctl.workers.executors import (
    ExecOutcome,
    FailedEffect,
    UncertainEffect,
    parse_request,
    watch_dispatch,
)
from agentctl.workers.executors.mcp_wire import SESSION_KEY, Wire, innermost, own_error

if TYPE_CHECKING:  # the SDK is an optional dependency, imported when a call needs it
    from mcp import Client
    from mcp.client import Transport
    from mcp_types import Tool

IDEMPOTENCY_META_KEY = "agentctl.dev/idempotency-key"  # the original's name for it
MAX_LIST_PAGES = 16  # a tools/list longer than this many pages is cut (and says so)
# A handler of its own keeps the SDK's records from Python's last-resort stderr handler.
logging.getLogger("mcp").addHandler(logging.NullHandler())
logging.getLogger("mcp").propagate = False


async def execute_mcp(msg: Execute) -> ExecOutcome:
    req = parse_request(McpRequest, msg)
    policy = EgressPolicy.from_json(req.egress.model_dump(by_alias=True))
    try:
        route = await check_route(req.url, policy)
    except AgentctlError as exc:
        redact = Redactor(list(req.headers.values())).redact_text
        raise type(exc)(redact(exc.message), retryable=exc.retryable) from None
    wire = Wire(req, route.tracker)
    # The worker's timeout, too, fails a call definitively until tools/call left (nothing
    # ran), and a listing until its first byte left.
    calls = req.method == "tools/call"
    watch_dispatch(
        lambda: wire.call_sent if calls else route.tracker.sent, f"MCP server {req.server}"
    )
    client = egress_client(route, read_timeout=req.timeout_seconds)
    client.headers.update(req.headers)
    client.event_hooks = {"request": [wire.on_request], "response": [wire.on_response]}
    try:
        key = idempotency_key(EffectId(msg.effect_id)) if req.keyed else None
        output = await _session(req, client, wire, key)
    except Exception as exc:
        raise _translate(exc, wire) from None
    finally:
        with trio.CancelScope(shield=True):
            await client.aclose()
    return ExecOutcome(output, usage=_usage(req), protocol=wire.evidence())


def _sdk() -> tuple[type[Client], Callable[..., Transport]]:
    """The ``mcp`` package's client and transport (an optional dependency)."""
    try:
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client
    except ImportError as exc:
        raise RunFailedError(
            "MCP needs the `mcp` package: pip install 'agentctl[protocols]'"
        ) from exc
    return Client, streamable_http_client


async def _session(
    req: McpRequest, client: httpx2.AsyncClient, wire: Wire, key: str | None
) -> JsonObject:
    """One session: initialize, then the listing or the call (``key``: a keyed call's
    idempotency key)."""
    client_class, transport_for = _sdk()
    # No per-event cap of the SDK's own (1 MiB): ``client`` caps the whole answer at
    # policy.network.maxResponseBytes, as for every other peer, and a bigger tool result
    # refused after the tool ran would leave the call uncertain for nothing.
    transport = transport_for(req.url, http_client=client, max_sse_event_size=None)
    # "legacy" is the initialize handshake; no response cache: every call reaches the server.
    async with client_class(
        transport, mode="legacy", cache=None, read_timeout_seconds=req.timeout_seconds
    ) as mcp_client:
        wire.settle("initialize", "succeeded")
        wire.opened(_session_evidence(req, mcp_client, wire))
        if mcp_client.protocol_version != req.protocol_version:
            raise RunFailedError(
                f"MCP server {req.server} negotiated protocol {mcp_client.protocol_version}, "
                f"not the configured {req.protocol_version}"
            )
        if req.method == "tools/list":
            return await _list_tools(req, mcp_client, wire)
        return await _call_tool(req, mcp_client, wire, key)


def _session_evidence(req: McpRequest, mcp_client: Client, wire: Wire) -> ProtocolSession:
    info = mcp_client.server_info
    peer: JsonObject = {}
    if info is not None:
        peer = {"name": bounded(str(info.name)), "version": bounded(str(info.version or ""))}
    return ProtocolSession(
        key=SESSION_KEY,
        protocol="mcp",
        peer=req.server,
        endpoint=req.url,
        protocol_version=mcp_client.protocol_version,
        remote_session_id=wire.remote_session_id,
        peer_info=peer,
    )


async def _list_tools(req: McpRequest, mcp_client: Client, wire: Wire) -> JsonObject:
    wanted = set(req.tools)
    found: list[Tool] = []
    cursor: str | None = None
    for _page in range(MAX_LIST_PAGES):
        page = await mcp_client.list_tools(cursor=cursor, cache_mode="refresh")
        found.extend(t for t in page.tools if not wanted or t.name in wanted)
        cursor = page.next_cursor
        if cursor is None:
            break
    wire.settle("tools/list", "succeeded")
    tools: list[JsonValue] = [_tool_json(tool) for tool in found]
    return {"server": req.server, "tools": tools, "complete": cursor is None}


def _tool_json(tool: Tool) -> JsonObject:
    """A listed tool as the run keeps it; annotations are kept apart, as claims."""
    raw: JsonObject = tool.model_dump(by_alias=True, mode="json", exclude_none=True)
    kept: JsonObject = {
        "name": raw.get("name"),
        "description": bounded(str(raw.get("description") or "")),
        "inputSchema": raw.get("inputSchema") or {"type": "object"},
    }
    for key in ("outputSchema", "annotations"):
        if key in raw:
            kept[key] = raw[key]
    return kept


async def _call_tool(
    req: McpRequest, mcp_client: Client, wire: Wire, key: str | None
) -> JsonObject:
    from mcp_types import CallToolRequest, CallToolRequestParams, CallToolResult

    assert req.tool is not None, "a tools/call request names its tool"
    # One raw request: Client.call_tool may send it again (input rounds, re-listing) and
    # re-lists tools to check the answer; the workflow's own schemas check it instead.
    # ``_meta`` is the request params' own field (what Client.call_tool's ``meta`` fills).
    meta = None if key is None else {IDEMPOTENCY_META_KEY: key}
    params = CallToolRequestParams(name=req.tool, arguments=req.arguments, _meta=meta)
    result = await mcp_client.session.send_request(
        CallToolRequest(params=params),
        CallToolResult,
        request_read_timeout_seconds=req.timeout_seconds,
    )
    raw: JsonObject = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    output: JsonObject = {
        "server": req.server,
        "tool": req.tool,
        "content": raw.get("content") or [],
        "isError": raw.get("isError") is True,
    }
    if "structuredContent" in raw:
        output["structuredContent"] = raw["structuredContent"]
    if output["isError"] and req.fail_on_tool_error:
        detail = text_of(output["content"], wire.redactor)
        wire.settle("tools/call", "failed", detail)
        error = RunFailedError(f"MCP tool {req.server}/{req.tool} reported an error: {detail}")
        raise FailedEffect(error, wire.evidence())
    wire.settle("tools/call", "succeeded")
    return output


def text_of(content: JsonValue, redactor: Redactor) -> str:
    """A tool error's content as bounded, redacted text: redacted before it is cut, so a
    header value the cut splits is never shown in part."""
    texts = [str(c.get("text")) for c in as_list(content) if isinstance(c, dict) and c.get("text")]
    joined = " ".join(texts)
    if joined:
        return bounded(redactor.redact_text(joined))
    return redactor.redact_text(json.dumps(content))[:200]


def _usage(req: McpRequest) -> dict[str, int]:
    return {"toolCalls": 1} if req.method == "tools/call" else {}


def _translate(exc: BaseException, wire: Wire) -> Exception:
    """Ours for whatever the SDK raised: definitive before the call left, else uncertain."""
    leaf = innermost(exc)
    if isinstance(leaf, FailedEffect | UncertainEffect):
        return leaf
    own = own_error(exc)
    said = own.message if own is not None else wire.describe(exc)
    # An answer refused at the cap: the SDK reports only that its stream ended.
    what = wire.redactor.redact_text(wire.tracker.refused or said)
    if wire.call_sent:
        wire.settle("*", "uncertain", what)
        text = f"MCP server {wire.server}: tools/call was sent, then {what}; it may have run"
        return UncertainEffect(RunFailedError(text), wire.evidence())
    wire.settle("*", "failed", what)
    if own is not None:
        error: AgentctlError = type(own)(what, retryable=own.retryable)
    else:
        # Retryable only when not one byte left: then the server cannot have seen anything.
        retryable = not wire.tracker.sent
        error = RunFailedError(f"MCP server {wire.server}: {what}", retryable=retryable)
    return FailedEffect(error, wire.evidence()) if wire.has_evidence else error
