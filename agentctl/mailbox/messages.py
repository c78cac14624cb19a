"""The versioned messages exchanged between the coordinator and its worker processes.

One discriminated union (field ``type``) covers every frame. Invariants:
- every message carries ``v: 1``; a frame of another version is rejected, never guessed at;
- JSON keys are camelCase on the wire (``effectId``), snake_case in Python;
- messages are frozen and reject unknown keys, so a peer built from other code fails loudly;
- errors travel as data in the ``AgentctlError.to_wire()`` shape, never pickled.

``EffectRequest`` / ``Go`` are the multi-effect handshake of DESIGN.md §3.3 (an agent asks the
coordinator to record an effect and waits for the go-ahead); they are defined so the union is
stable, though the built-in executors do not use them yet.

``StreamFragment`` / ``StreamAck`` are the durable-streaming handshake: a worker streaming a
model answer sends each delta and waits for its acknowledgement before reading on.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Literal, TypeGuard

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter
from pydantic.alias_generators import to_camel

from agentctl.core.jsonvalue import JsonValue
from agentctl.core.protocols import ProtocolEvidence

PROTOCOL_VERSION = 1


class WireModel(BaseModel):
    """Base of every wire model: camelCase aliases, strict keys, immutable.

    ``defer_build``: a model's validator is built when it is first used, not at import — a
    worker builds only the few messages and the one request model its effects use, which
    keeps its start-up (on the path of a run's first effect) short.
    """

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
        defer_build=True,
    )


class WireError(WireModel):
    """An error as data: the ``AgentctlError.to_wire()`` shape."""

    type: str
    message: str
    retryable: bool = False


class Hello(WireModel):
    type: Literal["hello"] = "hello"
    v: Literal[1] = 1
    pid: int
    protocol: int = PROTOCOL_VERSION


class Execute(WireModel):
    type: Literal["execute"] = "execute"
    v: Literal[1] = 1
    effect_id: str
    run_id: str
    task_id: str
    attempt: int
    operation: str  # action kind, e.g. "builtin.write"
    request: dict[str, Any]  # operation-specific; see agentctl.mailbox.requests
    timeout_seconds: float = Field(gt=0)
    # "module:function" of the executor (from the coordinator's registry); absent: the worker
    # looks the operation up in its own registry.
    executor: str | None = None
    # The coordinator invocation's trace id, sent on as W3C ``traceparent`` (workers/tracecontext).
    trace_id: str | None = None


class Result(WireModel):
    type: Literal["result"] = "result"
    v: Literal[1] = 1
    effect_id: str
    output: dict[str, Any]
    usage: dict[str, int] = Field(default_factory=dict)
    artifacts: list[str] = Field(default_factory=list)  # workspace-relative paths written
    protocol: ProtocolEvidence | None = None  # what a remote-protocol effect did on the wire


class Failure(WireModel):
    type: Literal["failure"] = "failure"
    v: Literal[1] = 1
    effect_id: str
    error: WireError
    # True when the effect may have happened (timeout, cancel or loss after it started).
    uncertain: bool = False
    protocol: ProtocolEvidence | None = None
    # What a definitive failure still produced for the record (a process that exited non-zero:
    # its exit code and redacted output), and what it used; None/empty for every other failure.
    output: dict[str, Any] | None = None
    usage: dict[str, int] = Field(default_factory=dict)


class Cancel(WireModel):
    """Stop one running effect. The worker answers its ``Execute`` with an uncertain
    ``Failure`` (the effect had started), or with ``cancelled_unsent``'s when the effect's
    executor knew its request had not left the worker: then nothing happened."""

    type: Literal["cancel"] = "cancel"
    v: Literal[1] = 1
    effect_id: str


class Shutdown(WireModel):
    type: Literal["shutdown"] = "shutdown"
    v: Literal[1] = 1


class EffectRequest(WireModel):
    """Worker → coordinator: record a further effect of a running task, then wait for Go."""

    type: Literal["effect_request"] = "effect_request"
    v: Literal[1] = 1
    parent_effect_id: str
    ordinal: int
    operation: str
    request: dict[str, Any]


class Go(WireModel):
    """Coordinator → worker: the effect asked for is durably ``started``; execute it."""

    type: Literal["go"] = "go"
    v: Literal[1] = 1
    parent_effect_id: str
    ordinal: int
    effect_id: str


# A fragment's text travels whole (the coordinator bounds what it stores); this keeps one frame
# far below MAX_FRAME_BYTES whatever a provider sends in one delta.
MAX_FRAGMENT_CHARS = 1024 * 1024
FragmentKind = Literal["text", "refusal", "tool_arguments", "reasoning"]


class StreamFragment(WireModel):
    """Worker → coordinator, while a model call streams: one delta of its answer.

    The worker sends it and waits for the matching ``StreamAck`` before it reads more of the
    provider's answer, so every fragment is durable (or refused) before the next one exists.
    """

    type: Literal["stream_fragment"] = "stream_fragment"
    v: Literal[1] = 1
    effect_id: str
    index: int = Field(ge=0)  # 0-based, in order, within the effect
    kind: FragmentKind
    text: str = Field(max_length=MAX_FRAGMENT_CHARS)
    provider_sequence: int | None = None  # the provider's own event number, when it has one


class StreamAck(WireModel):
    """Coordinator → worker: fragment ``index`` of ``effect_id`` is persisted (``accepted``),
    or could not be (the worker then fails the call as uncertain: it was already sent)."""

    type: Literal["stream_ack"] = "stream_ack"
    v: Literal[1] = 1
    effect_id: str
    index: int
    accepted: bool = True
    error: str | None = None


class RemoteHandle(WireModel):
    """Worker → coordinator, mid-effect: the remote work this effect started has an identity.

    Sent as soon as a peer names it (an A2A task id), before the worker observes it further;
    the worker waits for ``RemoteHandleAck`` so the handle is durable before it goes on. A
    coordinator that resumes the run observes the same remote work instead of repeating it.
    """

    type: Literal["remote_handle"] = "remote_handle"
    v: Literal[1] = 1
    effect_id: str
    protocol: Literal["a2a"]
    peer: str
    remote_task_id: str = Field(min_length=1)
    context_id: str | None = None
    # What the effect said on the wire so far (the card, the message), committed with the id.
    protocol_evidence: ProtocolEvidence | None = None


class RemoteHandleAck(WireModel):
    """Coordinator → worker: the handle is committed (``persisted``), or why it is not."""

    type: Literal["remote_handle_ack"] = "remote_handle_ack"
    v: Literal[1] = 1
    effect_id: str
    persisted: bool
    error: str | None = None


Message = Annotated[
    Hello
    | Execute
    | Result
    | Failure
    | Cancel
    | Shutdown
    | EffectRequest
    | Go
    | StreamFragment
    | StreamAck
    | RemoteHandle
    | RemoteHandleAck,
    Field(discriminator="type"),
]


def failure_from_error(
    effect_id: str,
    error: Mapping[str, JsonValue],
    *,
    uncertain: bool = False,
    protocol: ProtocolEvidence | None = None,
    output: Mapping[str, JsonValue] | None = None,
    usage: dict[str, int] | None = None,
) -> Failure:
    """A Failure reply from an ``AgentctlError.to_wire()`` payload."""
    # One validation: the payload becomes the nested ``WireError`` inside it (a ``WireError``
    # built first cost a second model's Python ``__init__`` on every failure reply).
    fields = {"effect_id": effect_id, "error": error, "uncertain": uncertain, "protocol": protocol}
    if output is not None:
        fields.update(output=output, usage=usage or {})
    return _failure_validator()(fields)


@functools.cache
def _failure_validator() -> Callable[[object], Failure]:
    # Built on first use (the models defer their builds); called directly, as the frame
    # decoder's: ``model_validate`` only wraps it in a Python call passing its defaults on.
    validate: Callable[[object], Failure] = TypeAdapter(Failure).validator.validate_python
    return validate


# The error type of a definitive answer to a ``Cancel``: the effect's request never left.
CANCELLED_UNSENT = "CancelledRunError"


def cancelled_unsent(effect_id: str, message: str) -> Failure:
    """A cancelled effect's answer when its request never left the worker: it did not happen
    (a definitive failure; trying again repeats nothing)."""
    error: dict[str, JsonValue] = {"type": CANCELLED_UNSENT, "message": message, "retryable": True}
    return failure_from_error(effect_id, error)


def is_cancelled_unsent(reply: Result | Failure) -> TypeGuard[Failure]:
    """Whether ``reply`` says its effect was cancelled before its request left the worker."""
    return (
        isinstance(reply, Failure) and not reply.uncertain and reply.error.type == CANCELLED_UNSENT
    )
