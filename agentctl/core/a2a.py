"""``a2a.delegate`` requests: one message to a declared A2A peer, then its task observed.

The worker sends the message once and polls the remote task (``agentctl.workers.executors.a2a``);
this module builds what the ledger records and what the worker is sent.

Invariants:
- ``with.peer`` names an entry of ``spec.a2aPeers``; any other name fails the task before an
  effect row exists;
- the recorded input is what the delegation *is*: the peer, its card URL and protocol, the
  message id and the message. So the effect identity changes with any of them, and never
  with a polling bound or a secret value (headers are recorded as references only);
- ``messageId`` is optional: without one the worker uses the effect id, which is stable for
  this attempt and new for the next one, so a peer that de-duplicates by message id sees one
  message per attempt.
"""

from __future__ import annotations

from collections.abc import Mapping

from agentctl.core.builders import egress_settings, str_arg
from agentctl.core.jsonvalue import JsonObject, JsonValue, as_object
from agentctl.core.operations import (
    BuildInput,
    Built,
    Endpoint,
    ReachInput,
    named_endpoints,
    pointer,
)
from agentctl.errors import RunFailedError

PEER_OWNER = "A2A peer"  # how endpoints, pre-flights and errors name a peer


def _peer(b: BuildInput, name: str) -> JsonObject:
    peer = b.run.a2a_peers.get(name)
    if not isinstance(peer, dict):
        known = ", ".join(sorted(b.run.a2a_peers)) or "none declared"
        raise RunFailedError(
            f"task {b.task_id}: `with.peer` {name!r} is not in spec.a2aPeers ({known})"
        )
    return peer


def _message(b: BuildInput) -> JsonValue:
    args = b.args if isinstance(b.args, dict) else {}
    message = args.get("message")
    if message is None or message == "" or isinstance(message, bool | int | float):
        raise RunFailedError(
            f"task {b.task_id}: `with.message` must be text or a JSON object or list, "
            f"got {message!r}"
        )
    return message


def _message_id(b: BuildInput) -> str | None:
    args = b.args if isinstance(b.args, dict) else {}
    if args.get("messageId") is None:
        return None
    given = str_arg(b, "messageId")
    if not given.strip():
        raise RunFailedError(f"task {b.task_id}: `with.messageId` must not be empty")
    return given


def literal_delegate_problems(given: Mapping[str, JsonValue]) -> list[tuple[str, str]]:
    """What ``check`` can tell of an ``a2a.delegate``'s literal ``with`` values: the ones the
    builder would refuse when the task runs (a template is judged once rendered)."""
    literal = {k: v for k, v in given.items() if not (isinstance(v, str) and "${{" in v)}
    found: list[tuple[str, str]] = []
    if "peer" in literal and not isinstance(literal["peer"], str):
        found.append(("peer", f"must be a string, got {literal['peer']!r}"))
    message_id = literal.get("messageId")
    if message_id is not None and not (isinstance(message_id, str) and message_id.strip()):
        found.append(("messageId", f"must be a non-empty string, got {message_id!r}"))
    message = literal.get("message", "-")
    if message is None or message == "" or isinstance(message, bool | int | float):
        found.append(("message", f"must be text or a JSON object or list, got {message!r}"))
    return found


def build_delegate(b: BuildInput) -> Built:
    """``{peer, cardUrl, protocolVersion, headers (references), messageId, message}``."""
    name = str_arg(b, "peer")
    peer = _peer(b, name)
    headers = dict(sorted(as_object(peer.get("headers") or {}).items()))
    recorded: JsonObject = {
        "peer": name,
        "cardUrl": peer.get("cardUrl"),
        "protocolVersion": peer.get("protocolVersion"),
        "headers": dict(headers),
        "messageId": _message_id(b),
        "message": _message(b),
    }
    egress = egress_settings(b.run.policy)
    refs: dict[str, JsonValue] = {pointer("headers", h): ref for h, ref in headers.items()}
    if egress.get("customCa") is not None:
        refs[pointer("egress", "customCa")] = egress["customCa"]
    request: JsonObject = {
        **recorded,
        "headers": dict(headers),
        "egress": egress,
        "requestTimeoutSeconds": peer.get("timeoutSeconds"),
        "maxPolls": peer.get("maxPolls"),
        "pollIntervalMs": peer.get("pollIntervalMs"),
    }
    return Built(recorded, request, secret_refs=refs)


def reach_delegate(r: ReachInput) -> tuple[Endpoint, ...]:
    """The Agent Card URL of the peer ``with.peer`` names (every declared peer's when it is a
    template); the worker talks to the peer only on the card URL's own origin."""
    return named_endpoints(PEER_OWNER, as_object(r.with_).get("peer"), r.a2a_peers, "cardUrl")
