"""``a2a.delegate``: send one message to an A2A peer, persist its task, poll it to an end.

Invariants:
- the message is sent at most once per execution, and never when the request names a task to
  continue (``continueTaskId``: resume or ``effects continue-remote``) — then only ``GetTask``;
- the remote task id is made durable (``workers.remote``) before the first poll, so a crash of
  anything after it leaves a task to observe, never a message to send again;
- a failure before any byte of the message left is a definitive failure; a lost or ambiguous
  ``SendMessage`` is uncertain; polling is bounded by ``maxPolls`` × ``pollIntervalMs`` and
  ending it on a task still working is uncertain too (the task goes on remotely);
- once a remote task id is known (``SendMessage`` answered with a task, or ``continueTaskId``)
  the message was accepted, so nothing but the task's own end is definitive: a card that cannot
  be read, a ``GetTask`` the peer refuses (a peer that forgot the task: "Task not found") or a
  lost poll makes the effect uncertain, naming the task — never failed, which ``retry
  --failed`` would send again;
- ``completed`` is the only success; ``failed``, ``rejected``, ``canceled`` and the interrupted
  states (input or auth required) fail the task with the peer's own words;
- every execution reports its protocol evidence (``workers.a2a_wire``): with the task id (the
  card fetch and ``SendMessage``), then with whatever outcome — a timeout or cancellation
  included, which is why ``trio.Cancelled`` is turned into this effect's own failure here.
"""

from __future__ import annotations

import trio
from a2a.types import a2a_pb2 as pb

from agentctl.core.jsonvalue import JsonArray, JsonObject
from agentctl.errors import AgentctlError, ProviderError, RunFailedError
from agentctl.mailbox.messages import Execute, RemoteHandle
from agentctl.mailbox.requests import A2aDelegateRequest
from agentctl.workers import a2a_client as peer
from agentctl.workers.a2a_wire import A2aWire
from agentctl.workers.egress import EgressPolicy
from agentctl.workers.egress_http import check_route
from agentctl.workers.executors import ExecOutcome, FailedEffect, UncertainEffect, parse_request
from agentctl.workers.remote import persist_remote_handle

_WORKING = frozenset({"TASK_STATE_SUBMITTED", "TASK_STATE_WORKING", "TASK_STATE_UNSPECIFIED"})


async def execute_delegate(msg: Execute) -> ExecOutcome:
    req = parse_request(A2aDelegateRequest, msg)
    policy = EgressPolicy.from_json(req.egress.model_dump(by_alias=True))
    wire = A2aWire(req)
    try:
        route = await check_route(req.card_url, policy)  # every denial happens here, unrecorded
    except AgentctlError as exc:
        if req.continue_task_id is None:
            raise  # nothing was sent: a definitive failure
        raise UncertainEffect(_unobserved(wire, req.continue_task_id, exc).error) from exc
    try:
        async with peer.open_peer(req, route, wire) as session:
            if req.continue_task_id is not None:
                task = await _observe(session, wire, req.continue_task_id, None)
            else:
                task = await _delegate(session, wire, msg.effect_id)
    except trio.Cancelled:
        # Timeout or cancellation: say so with the evidence (serve's generic report has none).
        raise _stopped(req, wire, route.tracker.sent) from None
    except UncertainEffect as exc:
        wire.unanswered("uncertain", exc.error.message)
        raise UncertainEffect(exc.error, wire.evidence()) from exc
    except AgentctlError as exc:
        if req.continue_task_id is not None:  # the known task could not be reached again
            raise _unobserved(wire, req.continue_task_id, exc) from exc
        wire.unanswered("failed", exc.message)
        raise FailedEffect(exc, wire.evidence()) from exc
    return ExecOutcome(task, protocol=wire.evidence())


async def _delegate(session: peer.PeerSession, wire: A2aWire, effect_id: str) -> JsonObject:
    req = wire.request
    message_id = req.message_id or effect_id
    request = peer.outbound(req, message_id)
    session.route.tracker.sent = False  # the card fetch sent bytes; the message has not yet
    wire.message = wire.call("SendMessage", message_id)
    try:
        answer = await peer.send_message(session, request)
    except peer.PeerRefusedError as exc:
        wire.settle(wire.message, "failed", exc.message)
        raise
    except AgentctlError as exc:
        if not session.route.tracker.sent:
            wire.settle(wire.message, "failed", exc.message)
            raise
        wire.settle(wire.message, "uncertain", exc.message)
        raise UncertainEffect(_lost(req, "SendMessage", exc)) from exc
    if not peer.is_task(answer):
        message: pb.Message = answer  # send_message gives a Task or this Message
        wire.settle(wire.message, "succeeded", "answered with a message", message.message_id)
        wire.context_id = message.context_id or None
        return _reply_output(req, message)
    task: pb.Task = answer
    wire.settle(wire.message, "succeeded", f"task {_short(_state(task))}", task.id)
    wire.context_id = task.context_id or None
    await persist_remote_handle(
        RemoteHandle(
            effect_id=effect_id,
            protocol="a2a",
            peer=req.peer,
            remote_task_id=task.id,
            context_id=task.context_id or None,
            protocol_evidence=wire.evidence(),  # the card and SendMessage, durable with the id
        )
    )
    return await _observe(session, wire, task.id, task)


async def _observe(
    session: peer.PeerSession, wire: A2aWire, task_id: str, latest: pb.Task | None
) -> JsonObject:
    """Poll ``GetTask`` until the task ends, at most ``maxPolls`` times; the peer's refusal
    of a poll (the task forgotten, say) leaves the accepted message's outcome unknown."""
    try:
        latest = await _poll_to_end(session, wire, task_id, latest)
    except peer.PeerRefusedError as exc:
        raise _unobserved(wire, task_id, exc) from exc
    try:
        return _task_output(wire.request, latest)
    except ProviderError as exc:  # the peer's own word that the task ended otherwise
        raise FailedEffect(exc, wire.evidence()) from exc


async def _poll_to_end(
    session: peer.PeerSession, wire: A2aWire, task_id: str, latest: pb.Task | None
) -> pb.Task:
    req = wire.request
    polls = 0
    while latest is None or _state(latest) in _WORKING:
        if polls >= req.max_polls:
            state = _state(latest) if latest is not None else "unknown"
            raise UncertainEffect(
                ProviderError(
                    f"A2A peer {req.peer}: task {task_id} still {_short(state)} after "
                    f"{polls} polls (maxPolls); it may finish remotely — "
                    "`agentctl effects continue-remote EFFECT` observes it again"
                )
            )
        if latest is not None:
            await trio.sleep(req.poll_interval_ms / 1000)
        polls += 1
        try:
            latest = await _poll(session, wire, task_id)
        except peer.PeerUnreachableError as exc:
            # A read of a known task: safe to try again on the next poll, within the bound.
            if polls >= req.max_polls:
                raise UncertainEffect(_lost(req, "GetTask", exc)) from exc
    return latest


async def _poll(session: peer.PeerSession, wire: A2aWire, task_id: str) -> pb.Task:
    """One ``GetTask``, recorded: the task, or the peer's refusal or the lost answer raised."""
    try:
        task = await peer.get_task(session, task_id)
    except peer.PeerRefusedError as exc:
        wire.poll(task_id, "failed", exc.message)
        raise
    except peer.PeerUnreachableError as exc:
        wire.poll(task_id, "uncertain", exc.message)
        raise
    wire.poll(task_id, "succeeded", _short(_state(task)) or "no status")
    wire.context_id = task.context_id or wire.context_id
    return task


def _stopped(req: A2aDelegateRequest, wire: A2aWire, bytes_left: bool) -> Exception:
    """A timeout or cancellation: uncertain once the message may have left (or a task is known
    to exist), else definitive — nothing reached the peer."""
    known = req.continue_task_id is not None or (wire.message is not None and bytes_left)
    why = "stopped (timeout or cancellation) before the answer came"
    wire.unanswered("uncertain" if known else "failed", why)
    error = RunFailedError(f"A2A peer {req.peer}: delegation {why}")
    if known:
        return UncertainEffect(error, wire.evidence())
    return FailedEffect(error, wire.evidence())


def _state(task: pb.Task) -> str:
    return peer.task_state(task)


def _short(state: str) -> str:
    return state.removeprefix("TASK_STATE_").lower()


def _task_output(req: A2aDelegateRequest, task: pb.Task) -> JsonObject:
    state = _short(_state(task))
    said = peer.texts(task.status.message.parts) if task.status.HasField("message") else []
    if state != "completed":
        detail = " ".join(said) or "no message"
        raise ProviderError(f"A2A peer {req.peer}: task {task.id} ended {state}: {detail}")
    artifacts: JsonArray = [peer.as_json(a) for a in task.artifacts]
    text = [t for a in task.artifacts for t in peer.texts(a.parts)] or said
    return {
        "peer": req.peer,
        "taskId": task.id,
        "contextId": task.context_id or None,
        "state": state,
        "text": "\n".join(text),
        "artifacts": artifacts,
        "message": peer.as_json(task.status.message) if said else None,
    }


def _reply_output(req: A2aDelegateRequest, message: pb.Message) -> JsonObject:
    """A peer that answers with a message directly: no task, nothing to poll."""
    return {
        "peer": req.peer,
        "taskId": None,
        "contextId": message.context_id or None,
        "state": "completed",
        "text": "\n".join(peer.texts(message.parts)),
        "artifacts": [],
        "message": peer.as_json(message),
    }


def _unobserved(wire: A2aWire, task_id: str, exc: AgentctlError) -> UncertainEffect:
    """The peer accepted the message (its task id is known) but the task cannot be observed:
    it may have run, may still run — uncertain, for a reconciliation to settle, never resent."""
    wire.unanswered("uncertain", exc.message)
    error = AgentctlError(
        f"A2A peer {wire.peer}: remote task {task_id} was accepted but can no longer be "
        f"observed ({exc.message}); it may have run — reconcile it (`agentctl effects "
        "continue-remote EFFECT` or `agentctl effects reconcile`)"
    )
    return UncertainEffect(error, wire.evidence())


def _lost(req: A2aDelegateRequest, call: str, exc: AgentctlError) -> AgentctlError:
    return AgentctlError(
        f"A2A peer {req.peer}: {call} was sent but its answer was lost or unreadable "
        f"({exc.message}); the peer may have acted on it"
    )
