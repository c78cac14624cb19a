"""Protocol evidence: what an effect spoken over a remote protocol (MCP, A2A) did on the wire.

A worker that talks to a remote peer reports, with its result or failure, the sessions it
opened and the calls it made (``ProtocolEvidence``); the coordinator commits them with the
effect's outcome and ``inspect`` shows them as ``protocolSessions`` and ``protocolCalls``.
The shapes are generic over the protocol: ``protocol`` names it (``mcp``, ``a2a``), ``peer``
the workflow's name for the remote side (an ``mcpServers`` or ``a2aPeers`` key), ``method``
the protocol's own method name (``initialize``, ``tools/call``, ``SendMessage``, ``GetTask``, …).

Invariants:
- evidence is pure data, frozen, camelCase on the wire, unknown keys rejected;
- a session is named by ``key``, unique within one effect's evidence; a call names the session
  it used by that key (the ledger turns keys into stored ids);
- evidence never carries a secret: headers are not part of it, and remote text is bounded by
  the worker before it is reported (``MAX_DETAIL``);
- a call's ``status`` is ``started`` (dispatched, no answer yet), ``succeeded``, ``failed``
  (the peer answered with an error) or ``uncertain`` (dispatched, then the answer was lost).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

CallStatus = Literal["started", "succeeded", "failed", "uncertain"]
MAX_DETAIL = 500  # characters of a remote error or description kept as evidence


class _Evidence(BaseModel):
    # Built on first use: only effects spoken over MCP or A2A have evidence, and the ledger,
    # which every run imports, names these classes in its signatures.
    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
        defer_build=True,
    )


class ProtocolSession(_Evidence):
    """One connection to a peer, as negotiated (MCP ``initialize``; an A2A card fetch)."""

    key: str
    protocol: str
    peer: str
    endpoint: str
    protocol_version: str | None = None
    remote_session_id: str | None = None
    # The peer's name and version, as it said (Any: pydantic cannot build the recursive alias).
    peer_info: dict[str, Any] = Field(default_factory=dict)


class ProtocolCall(_Evidence):
    """One request to a peer and what became of it."""

    session_key: str | None = None
    protocol: str
    peer: str
    method: str
    target: str | None = None  # what the method acted on: an MCP tool name, an A2A task
    remote_id: str | None = None  # the JSON-RPC request id, or the peer's own id for the work
    status: CallStatus
    detail: str | None = None  # the peer's error, or why the answer was lost


class ProtocolEvidence(_Evidence):
    """Everything one effect did over remote protocols, in order."""

    sessions: list[ProtocolSession] = Field(default_factory=list)
    calls: list[ProtocolCall] = Field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not self.sessions and not self.calls


def bounded(text: str) -> str:
    """Remote text cut to ``MAX_DETAIL`` characters (it is untrusted and may be huge)."""
    return text if len(text) <= MAX_DETAIL else text[: MAX_DETAIL - 1] + "…"
