"""What one execution of ``a2a.delegate`` said on the wire, as protocol evidence.

One ``A2aWire`` per execution. Its session is the peer as this execution reached it: opened on
the card URL, then bound to the JSON-RPC URL the card named, with the card's own name and
version and the remote context id. Its calls are ``GetAgentCard`` (the HTTP GET of the card —
A2A gives it no method name), ``SendMessage`` (at most one; its ``remoteId`` is the task id) and
the ``GetTask`` polls.

Invariants:
- the session key is ``delegate`` for an execution that sends the message and ``observe-<id>``,
  fresh per execution, for one that only observes a known task (resume, ``effects
  continue-remote``), so an observation adds rows beside the first execution's, never over them;
- rows stay bounded whatever ``maxPolls`` is: consecutive polls with the same outcome (the same
  task state, or the same failure) are one row whose detail names the polls it covers, and at
  most ``MAX_POLL_ROWS`` poll rows are kept per session (later polls fold into the last one);
- evidence carries no header value (remote text is redacted of them, then bounded).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from agentctl.core.jsonvalue import JsonObject
from agentctl.core.protocols import (
    CallStatus,
    ProtocolCall,
    ProtocolEvidence,
    ProtocolSession,
    bounded,
)
from agentctl.core.redact import Redactor
from agentctl.mailbox.requests import A2aDelegateRequest

MAX_POLL_ROWS = 16  # GetTask rows per session; more polls fold into the last row
GET_TASK = "GetTask"


@dataclass
class _Call:
    """One A2A call of a session, as it goes into the evidence."""

    method: str
    target: str | None
    status: CallStatus = "started"
    remote_id: str | None = None
    detail: str | None = None
    first_poll: int = 0  # GetTask rows: the polls they cover (1-based, inclusive)
    last_poll: int = 0


class A2aWire:
    """The evidence of one execution, collected while it runs."""

    def __init__(self, req: A2aDelegateRequest) -> None:
        self.request = req
        self.redactor = Redactor(list(req.headers.values()))
        self.peer = req.peer
        self.protocol_version = req.protocol_version
        observing = req.continue_task_id is not None
        self.key = f"observe-{uuid.uuid4().hex[:12]}" if observing else "delegate"
        self.endpoint = req.card_url
        self.peer_info: JsonObject = {}
        self.context_id: str | None = None
        self.calls: list[_Call] = []
        self.message: _Call | None = None  # the SendMessage call, once dispatched
        self.polls = 0

    def call(self, method: str, target: str | None) -> _Call:
        """A request handed to the transport, its answer still to come."""
        sent = _Call(method, target)
        self.calls.append(sent)
        return sent

    def settle(
        self,
        call: _Call,
        status: CallStatus,
        detail: str | None = None,
        remote_id: str | None = None,
    ) -> None:
        call.status, call.detail = status, self._text(detail)
        call.remote_id = bounded(remote_id) if remote_id else call.remote_id

    def bound(self, rpc_url: str, name: str, version: str) -> None:
        """The card was read: the session now speaks to its JSON-RPC interface."""
        self.endpoint = rpc_url
        self.peer_info = {"name": bounded(name), "version": bounded(version)}

    def poll(self, task_id: str, status: CallStatus, outcome: str) -> None:
        """One ``GetTask`` answered (or lost): a new row, or the last one extended."""
        self.polls += 1
        outcome = self._text(outcome) or ""
        rows = [c for c in self.calls if c.method == GET_TASK]
        last = rows[-1] if rows else None
        same = last is not None and (last.status, last.detail) == (status, outcome)
        if last is None or (not same and len(rows) < MAX_POLL_ROWS):
            last = self.call(GET_TASK, task_id)
            last.first_poll = self.polls
        last.status, last.remote_id, last.detail = status, task_id, outcome
        last.last_poll = self.polls

    def unanswered(self, status: CallStatus, why: str) -> None:
        """The execution ended with calls still open: ``failed`` when they cannot have left,
        ``uncertain`` when their answers were lost (timeout, cancellation)."""
        for sent in self.calls:
            if sent.status == "started":
                self.settle(sent, status, why)

    def evidence(self) -> ProtocolEvidence:
        session = ProtocolSession(
            key=self.key,
            protocol="a2a",
            peer=self.peer,
            endpoint=self.endpoint,
            protocol_version=self.protocol_version,
            remote_session_id=self.context_id,
            peer_info=dict(self.peer_info),
        )
        return ProtocolEvidence(sessions=[session], calls=[self._row(c) for c in self.calls])

    def _row(self, sent: _Call) -> ProtocolCall:
        detail = sent.detail
        if sent.method == GET_TASK:
            polls = f"poll {sent.first_poll}"
            if sent.last_poll != sent.first_poll:
                polls = f"polls {sent.first_poll}-{sent.last_poll}"
            detail = f"{polls}: {detail}"
        return ProtocolCall(
            session_key=self.key,
            protocol="a2a",
            peer=self.peer,
            method=sent.method,
            target=sent.target,
            remote_id=sent.remote_id,
            status=sent.status,
            detail=detail,
        )

    def _text(self, text: str | None) -> str | None:
        return bounded(self.redactor.redact_text(text)) if text else None
