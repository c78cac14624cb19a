"""The A2A 1.0 calls of ``a2a.delegate``, made with the official ``a2a-sdk`` client parts.

The SDK's ``A2ACardResolver`` fetches the Agent Card and its ``JsonRpcTransport`` speaks
``SendMessage`` / ``GetTask``; both get an ``httpx`` client on the egress route
(``egress_httpx``), so the card URL and every call obey the run's network policy.

Invariants:
- the card URL is checked (allowlist, scheme, port, private addresses) before any request;
- the JSON-RPC interface used is one the card advertises for the declared protocol version,
  on the same scheme, host and port as the card URL (the route checked); anything else is
  refused before the message is sent;
- every call carries ``A2A-Version`` and the peer's resolved headers; cards, messages, parts
  and artifacts are untrusted data, turned into plain JSON and never interpreted;
- a JSON-RPC error answer is the peer's definitive word (``PeerRefusedError``); any other
  failure of a call is ``PeerUnreachableError``, and whether the message may have arrived is
  the executor's judgement (``SendTracker``);
- the card fetch is written to the execution's ``A2aWire`` (the executor records the rest);
  a fetch that fails is one line with the HTTP status when the peer answered, retryable when
  a new attempt may find the card (no answer; HTTP 408, 429, 5xx): it sends no message, so
  trying again repeats nothing; an answer that is not a card, or another 4xx, is not.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import httpx2
from a2a.client.card_resolver import A2ACardResolver
from a2a.client.errors import A2AClientError, AgentCardResolutionError
from a2a.client.transports.jsonrpc import JsonRpcTransport
from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import A2AError
from google.protobuf import json_format, struct_pb2
from google.protobuf.message import Message as ProtoMessage

from agentctl.core.jsonvalue import JsonObject
from agentctl.errors import AgentctlError, ProviderError
from agentctl.mailbox.requests import A2aDelegateRequest
from agentctl.workers.a2a_wire import A2aWire
from agentctl.workers.egress_http import EgressRoute
from agentctl.workers.egress_httpx import egress_httpx_client
from agentctl.workers.foreign import foreign_text, one_line

VERSION_HEADER = "A2A-Version"
CARD_METHOD = "GetAgentCard"  # as evidence: the HTTP GET of the card has no A2A method name


class PeerRefusedError(ProviderError):
    """The peer answered the call with a JSON-RPC error: it did not do what was asked."""


class PeerUnreachableError(ProviderError):
    """A call failed without the peer's answer (transport loss, timeout, HTTP error)."""


@dataclass(frozen=True)
class PeerSession:
    """One delegation's connection to its peer: the card read, the interface chosen."""

    name: str
    card: pb.AgentCard
    transport: JsonRpcTransport
    route: EgressRoute


@contextlib.asynccontextmanager
async def open_peer(
    req: A2aDelegateRequest, route: EgressRoute, wire: A2aWire
) -> AsyncIterator[PeerSession]:
    """Fetch the peer's Agent Card over ``route`` and bind its JSON-RPC interface."""
    # The header names the protocol's Major.Minor ("1.0"), whatever patch the workflow wrote.
    headers = {**req.headers, VERSION_HEADER: ".".join(_major_minor(req.protocol_version))}
    async with egress_httpx_client(
        route, read_timeout=req.request_timeout_seconds, headers=headers
    ) as http:
        card = await _fetch_card(http, req, wire)
        url = _rpc_url(card, req, route)
        wire.bound(url, card.name, card.version)
        yield PeerSession(req.peer, card, JsonRpcTransport(http, card, url, True), route)


async def _fetch_card(
    http: httpx.AsyncClient, req: A2aDelegateRequest, wire: A2aWire
) -> pb.AgentCard:
    fetch = wire.call(CARD_METHOD, req.card_url)
    try:
        card = await A2ACardResolver(http, req.card_url, "").get_agent_card()
    except (A2AError, httpx2.HTTPError, httpx.HTTPError) as exc:
        what, retryable = _card_failure(exc)
        error = ProviderError(
            f"A2A peer {req.peer}: cannot read its Agent Card at {req.card_url}: {what}",
            retryable=retryable,
        )
        wire.settle(fetch, "failed", error.message)
        raise error from exc
    wire.settle(fetch, "succeeded")
    return card


def _card_failure(exc: Exception) -> tuple[str, bool]:
    """Why the card could not be read, in one line, and whether a new attempt may find it.

    The SDK wraps the card's HTTP status and its own transport's failures (ours, on
    ``httpx2``, reach here bare) in texts that run over lines (httpx's "For more information
    check: …") and name its classes: only the status, or what went wrong in our words, is
    kept."""
    code = exc.status_code if isinstance(exc, AgentCardResolutionError) else None
    if code is not None:
        return f"HTTP {code}", code in (408, 429) or code >= 500
    cause = exc.__cause__ if isinstance(exc, AgentCardResolutionError) else exc
    if isinstance(cause, httpx2.HTTPError | httpx.HTTPError):  # no answer: refused, lost, late
        return foreign_text(cause), True
    if isinstance(cause, json.JSONDecodeError):  # an answer, but not an Agent Card
        return "the answer is not JSON", False
    if isinstance(cause, json_format.ParseError):
        return f"the answer is not a valid Agent Card: {_parse_problem(cause)}", False
    return one_line(str(exc)) or "the answer is not a valid Agent Card", False


def _parse_problem(exc: Exception) -> str:
    """protobuf's account of a JSON value it could not read, said as ``field X: …``."""
    said = one_line(str(exc)).removesuffix(".")
    if said.startswith("Failed to load JSON"):
        return "the result is not a JSON object"
    field = re.match(r"Failed to parse (\S+) field: (.*)", said)
    if field is not None:
        return f"field {field.group(1)}: {field.group(2)}"
    return said or "it does not have the expected shape"


def _same_origin(url: str, route: EgressRoute) -> bool:
    parsed = httpx.URL(url)
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    target = route.target
    return (parsed.scheme, (parsed.host or "").lower(), port) == (
        target.scheme,
        target.host.lower(),
        target.port,
    )


def _rpc_url(card: pb.AgentCard, req: A2aDelegateRequest, route: EgressRoute) -> str:
    offered = []
    for iface in card.supported_interfaces:
        offered.append(f"{iface.protocol_binding} {iface.protocol_version} at {iface.url}")
        if (
            iface.protocol_binding.upper() == "JSONRPC"
            and _major_minor(iface.protocol_version) == _major_minor(req.protocol_version)
            and _same_origin(iface.url, route)
        ):
            return str(iface.url)
    raise ProviderError(
        f"A2A peer {req.peer}: its card offers no JSON-RPC interface for protocol "
        f"{req.protocol_version} on the card's own origin; it offers: "
        f"{'; '.join(offered) or 'nothing'}"
    )


def _major_minor(version: str) -> tuple[str, ...]:
    return tuple(version.strip().split(".")[:2])


def outbound(req: A2aDelegateRequest, message_id: str) -> pb.SendMessageRequest:
    """The message as sent: text becomes a text part, any other JSON one data part."""
    if isinstance(req.message, str):
        part = pb.Part(text=req.message)
    else:
        part = pb.Part(data=json_format.ParseDict(req.message, struct_pb2.Value()))
    message = pb.Message(message_id=message_id, role=pb.ROLE_USER, parts=[part])
    config = pb.SendMessageConfiguration(return_immediately=True)
    return pb.SendMessageRequest(message=message, configuration=config)


async def send_message(session: PeerSession, request: pb.SendMessageRequest) -> Any:
    """``SendMessage``: the peer's ``Task`` or its direct ``Message`` reply (untyped, not the
    protobuf union: the executor tells them apart with ``is_task`` and reads either's fields)."""
    with _translated(session.name, "SendMessage"):
        answer = await session.transport.send_message(request)
    if answer.HasField("task"):
        return _known_state(session.name, "SendMessage", answer.task)
    if answer.HasField("message"):
        return answer.message
    raise PeerRefusedError(f"A2A peer {session.name}: SendMessage answered neither task nor reply")


async def get_task(session: PeerSession, task_id: str) -> pb.Task:
    with _translated(session.name, "GetTask"):
        task = await session.transport.get_task(pb.GetTaskRequest(id=task_id))
    return _known_state(session.name, "GetTask", task)


@contextlib.contextmanager
def _translated(peer: str, call: str) -> Iterator[None]:
    try:
        yield
    except AgentctlError:
        raise
    except A2AClientError as exc:
        raise PeerUnreachableError(
            f"A2A peer {peer}: {call} failed: {_client_failure(exc)}"
        ) from exc
    except A2AError as exc:
        raise PeerRefusedError(f"A2A peer {peer}: {call} refused: {one_line(str(exc))}") from exc
    except json_format.ParseError as exc:  # JSON, but not the A2A object the call answers
        said = _parse_problem(exc)
        raise PeerUnreachableError(f"A2A peer {peer}: {call} answered malformed: {said}") from exc
    except (httpx2.HTTPError, httpx.HTTPError, OSError) as exc:
        raise PeerUnreachableError(f"A2A peer {peer}: {call} failed: {foreign_text(exc)}") from exc


def _client_failure(exc: A2AClientError) -> str:
    """The SDK's client failure in our words: it keeps what it wraps as the cause."""
    cause = exc.__cause__
    if isinstance(cause, httpx.HTTPStatusError):
        return f"HTTP {cause.response.status_code}"
    if isinstance(cause, json.JSONDecodeError):
        return "the answer is not JSON"
    if isinstance(cause, httpx2.HTTPError | httpx.HTTPError):
        return foreign_text(cause)
    return one_line(str(exc)) or "the answer was not a JSON-RPC response"


def as_json(message: ProtoMessage) -> JsonObject:
    """A protobuf message as plain camelCase JSON (untrusted data, never interpreted)."""
    return json_format.MessageToDict(message)


def task_state(task: pb.Task) -> str:
    """The task's state name (``TASK_STATE_WORKING``, …); empty when it has no status."""
    return str(pb.TaskState.Name(task.status.state)) if task.HasField("status") else ""


def _known_state(peer: str, call: str, task: pb.Task) -> pb.Task:
    """``task``, once its state is one A2A 1.0 names (protobuf keeps any number it read)."""
    if task.HasField("status") and task.status.state not in pb.TaskState.values():
        raise PeerUnreachableError(
            f"A2A peer {peer}: {call} answered malformed: unknown task state {task.status.state}"
        )
    return task


def is_task(answer: object) -> bool:
    return isinstance(answer, pb.Task)


def texts(parts: Iterable[pb.Part]) -> list[str]:
    return [p.text for p in parts if p.HasField("text")]
