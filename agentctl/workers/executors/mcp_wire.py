"""What one MCP session said on the wire, seen from ``httpx2`` event hooks.

The ``mcp`` client hides its JSON-RPC ids and the ``Mcp-Session-Id`` it was given; the hooks
on the HTTP client it is handed see both. They also mark the uncertainty boundary of a tool
call: ``call_sent`` turns true when the ``tools/call`` request is handed to the transport,
before any of its bytes leave.

Invariants: hooks only observe (they never change a request or answer); a body that is not
a JSON-RPC request is ignored; evidence is bounded and carries no header values (a detail
quoting one, even from the server, is redacted); once a request was sent, the evidence holds
the session, negotiated or not; the HTTP status an error reports is the one of the POST that
carried the latest request, never another exchange's (the SDK's GET stream, which a server
may refuse with 405, or a notification's).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import httpx2
from pydantic_core import ValidationError

from agentctl.core.jsonvalue import JsonValue
from agentctl.core.protocols import (
    CallStatus,
    ProtocolCall,
    ProtocolEvidence,
    ProtocolSession,
    bounded,
)
from agentctl.core.redact import Redactor
from agentctl.errors import AgentctlError
from agentctl.mailbox.requests import McpRequest
from agentctl.workers.egress_http import SendTracker
from agentctl.workers.foreign import (
    Problem,
    foreign_text,
    one_line,
    problems_in_text,
    problems_of,
    problems_text,
)

SESSION_HEADER = "mcp-session-id"
SESSION_KEY = "s1"  # an effect opens one session


@dataclass
class _Sent:
    """One MCP request of a session, as it goes into the evidence."""

    method: str
    remote_id: str
    status: CallStatus = "started"
    detail: str | None = None
    http_status: int | None = None  # of the POST that carried it, once answered


class Wire:
    """The evidence of one session, collected while it runs."""

    def __init__(self, req: McpRequest, tracker: SendTracker) -> None:
        self.redactor = Redactor(list(req.headers.values()))
        self.server = req.server
        self.tool = req.tool
        self.url = req.url
        self.tracker = tracker
        self.session: ProtocolSession | None = None
        self.remote_session_id: str | None = None
        self.sent: list[_Sent] = []
        self.call_sent = False

    async def on_request(self, request: httpx2.Request) -> None:
        message = _json_rpc(request)
        if message is None or "id" not in message or not isinstance(message.get("method"), str):
            return
        method = str(message["method"])
        self.sent.append(_Sent(method, str(message["id"])))
        if method == "tools/call":
            self.call_sent = True

    async def on_response(self, response: httpx2.Response) -> None:
        given = response.headers.get(SESSION_HEADER)
        if given and self.remote_session_id is None:
            self.remote_session_id = bounded(given)
        message = _json_rpc(response.request)
        if message is None or "id" not in message:
            return  # the GET stream, a notification, the closing DELETE
        for sent in reversed(self.sent):
            if sent.remote_id == str(message["id"]):
                sent.http_status = response.status_code
                return

    @property
    def refusal(self) -> str | None:
        """The HTTP error status of the latest request's POST, which the SDK hides."""
        code = self.sent[-1].http_status if self.sent else None
        return f"HTTP {code}" if code is not None and code >= 400 else None

    def opened(self, session: ProtocolSession) -> None:
        self.session = session

    def settle(self, method: str, status: CallStatus, detail: str | None = None) -> None:
        """Record the answer to the requests of ``method`` still open (``*``: all of them)."""
        for sent in self.sent:
            if sent.status == "started" and method in ("*", sent.method):
                sent.status = status
                sent.detail = bounded(self.redactor.redact_text(detail)) if detail else None

    @property
    def has_evidence(self) -> bool:
        return self.session is not None or bool(self.sent)

    def evidence(self) -> ProtocolEvidence:
        session = self.session
        if session is None and self.sent:
            # A request left but no session was negotiated (refused, failed initialize): the
            # session is still on record, one per effect, with nothing negotiated in it.
            found = self.remote_session_id
            session = ProtocolSession(
                key=SESSION_KEY, protocol="mcp", peer=self.server, endpoint=self.url
            ).model_copy(update={"remote_session_id": found})
        key = session.key if session is not None else None
        calls = [
            ProtocolCall(
                session_key=key,
                protocol="mcp",
                peer=self.server,
                method=sent.method,
                target=self.tool if sent.method == "tools/call" else None,
                remote_id=sent.remote_id,
                status=sent.status,
                detail=sent.detail,
            )
            for sent in self.sent
        ]
        sessions = [session] if session is not None else []
        return ProtocolEvidence(sessions=sessions, calls=calls)

    def describe(self, exc: BaseException) -> str:
        """A one-line account of a foreign failure (exception groups unwrapped), in our
        words: no SDK class name, no pydantic layout."""
        leaf = innermost(exc)
        method = self.sent[-1].method if self.sent else "the"
        if isinstance(leaf, ValidationError):
            said = f"the {method} answer is malformed: {problems_text(problems_of(leaf))}"
        else:
            said = _sdk_said(leaf, method) or foreign_text(leaf)
        refusal = self.refusal
        if refusal is not None and said == _ERROR_STATUS:
            return f"the server answered {refusal}"
        # Redacted before the cut: a header value the cut splits is never shown in part.
        return bounded(self.redactor.redact_text(f"{said} ({refusal})" if refusal else said))


def _sdk_said(exc: BaseException, method: str) -> str | None:
    """What the ``mcp`` client's own error (``MCPError``) means, or ``None`` for another
    exception. Its transport reports an unparsable answer as text that embeds pydantic's."""
    error = getattr(exc, "error", None)
    message = getattr(error, "message", None)
    if not type(exc).__module__.startswith("mcp.") or not isinstance(message, str):
        return None
    if message.startswith(_PARSE_FAILED):
        if "[type=json_invalid" in message:
            return f"the {method} answer is not JSON"
        return f"the {method} answer is not a JSON-RPC response: {_rpc_problem(message)}"
    if message.startswith(_CONTENT_TYPE):
        kind = message.removeprefix(_CONTENT_TYPE).strip()
        return f"the {method} answer has content type {kind}, not JSON or an event stream"
    if message == _ERROR_STATUS_SDK:
        return _ERROR_STATUS
    if message == f"Request {method!r} timed out":
        return f"the {method} request timed out without an answer"
    if message == "Connection closed":
        return "the connection closed"
    return f"the server answered error {getattr(error, 'code', '?')}: {one_line(message)}"


_PARSE_FAILED = "Failed to parse JSON response:"
_CONTENT_TYPE = "Unexpected content type:"
_ERROR_STATUS_SDK = "Server returned an error response"
_ERROR_STATUS = "the server answered with an HTTP error"


def _rpc_problem(message: str) -> str:
    """An answer that is JSON but no JSON-RPC message: the problems of the reading that fits
    it best (a response or an error: the one with the fewest fields missing)."""
    by_shape: dict[str, list[Problem]] = {}
    for problem in problems_in_text(message):
        shape = str(problem.loc[0]) if problem.loc else ""
        by_shape.setdefault(shape, []).append(Problem(problem.loc[1:], problem.kind, problem.said))
    answers = [by_shape[s] for s in ("JSONRPCResponse", "JSONRPCError") if s in by_shape]
    if not answers:
        return problems_text([])
    best = min(answers, key=lambda found: sum(p.kind == "missing" for p in found))
    return problems_text(best)


def _json_rpc(request: httpx2.Request) -> dict[str, JsonValue] | None:
    if request.method != "POST":
        return None
    try:
        value = json.loads(request.content)
    except (ValueError, httpx2.RequestNotRead):
        return None
    return value if isinstance(value, dict) else None


def innermost(exc: BaseException) -> BaseException:
    """The first non-group exception inside ``exc`` (anyio wraps task failures in groups)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def own_error(exc: BaseException) -> AgentctlError | None:
    """Ours, raised inside the transport (policy, size cap) and wrapped by the SDK or anyio."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, AgentctlError):
            return seen
        if isinstance(seen, BaseExceptionGroup):
            found = [own_error(inner) for inner in seen.exceptions]
            return next((e for e in found if e is not None), None)
        seen = seen.__cause__ or seen.__context__
    return None
