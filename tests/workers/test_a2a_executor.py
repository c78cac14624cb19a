"""The ``a2a.delegate`` executor in a real worker, frame by frame, against the a2a-sdk peer.

The test plays the coordinator: it answers (or refuses) the worker's mid-effect
``RemoteHandle`` and watches what the peer received.
"""

from __future__ import annotations

from pathlib import Path

from agentctl.mailbox.messages import Execute, Failure, RemoteHandle, RemoteHandleAck, Result
from agentctl.mailbox.requests import A2aDelegateRequest, EgressSettings
from tests.a2a_peer_process import Peer, running_peer
from tests.worker_process import Worker, open_worker


def _execute(peer: Peer, effect_id: str, continue_task_id: str | None = None) -> Execute:
    request = A2aDelegateRequest(
        peer="reviewer",
        card_url=f"http://127.0.0.1:{peer.port}/.well-known/agent-card.json",
        message="check the notes",
        egress=EgressSettings(
            network_allowlist=["127.0.0.1"], allowed_ports=[peer.port], allow_private=True
        ),
        poll_interval_ms=20,
        max_polls=1000,
        continue_task_id=continue_task_id,
    )
    return Execute(
        effect_id=effect_id,
        run_id="run-1",
        task_id="ask",
        attempt=1,
        operation="a2a.delegate",
        request=request.model_dump(by_alias=True),
        timeout_seconds=60,
    )


async def _handle(worker: Worker, msg: Execute) -> RemoteHandle:
    await worker.channel.send(msg)
    frame = await worker.channel.receive()
    assert isinstance(frame, RemoteHandle), frame
    return frame


async def _ack(worker: Worker, handle: RemoteHandle, **given: object) -> Result | Failure:
    ack = RemoteHandleAck(effect_id=handle.effect_id, persisted=True).model_copy(update=given)
    await worker.channel.send(ack)
    reply = await worker.channel.receive()
    assert isinstance(reply, Result | Failure)
    return reply


async def test_the_worker_polls_only_once_the_handle_is_durable(tmp_path: Path) -> None:
    with running_peer(tmp_path, delay=0.1) as peer:
        async with open_worker() as worker:
            handle = await _handle(worker, _execute(peer, "e" * 64))
            assert (handle.protocol, handle.peer) == ("a2a", "reviewer")
            reply = await _ack(worker, handle, persisted=False, error="disk full")
            posts = [r for r in Peer.lines(peer.requests) if r["method"] == "POST"]
    assert isinstance(reply, Failure) and reply.uncertain
    assert handle.remote_task_id in reply.error.message and "disk full" in reply.error.message
    assert len(posts) == 1  # SendMessage only: no GetTask without a durable handle


async def test_a_known_task_is_observed_without_sending_again(tmp_path: Path) -> None:
    with running_peer(tmp_path, delay=0.1) as peer:
        async with open_worker() as worker:
            handle = await _handle(worker, _execute(peer, "a" * 64))
            first = await _ack(worker, handle)
            again = await worker.call(_execute(peer, "b" * 64, handle.remote_task_id))
        received = Peer.lines(peer.received)
    assert isinstance(first, Result) and isinstance(again, Result)
    assert first.output["taskId"] == again.output["taskId"] == handle.remote_task_id
    assert again.output["text"] == "reviewed: check the notes"
    assert received == [{"messageId": "a" * 64}]  # the effect id, sent once


async def test_a_denied_card_url_sends_nothing(tmp_path: Path) -> None:
    with running_peer(tmp_path, delay=0.1) as peer:
        msg = _execute(peer, "c" * 64)
        denied = dict(msg.request, egress={"networkAllowlist": ["peer.example.com"]})
        async with open_worker() as worker:
            reply = await worker.call(msg.model_copy(update={"request": denied}))
        assert Peer.lines(peer.requests) == []
    assert isinstance(reply, Failure) and not reply.uncertain
    assert reply.error.type == "NetworkPolicyError"


async def test_a_timeout_while_polling_reports_what_was_said(tmp_path: Path) -> None:
    with running_peer(tmp_path, delay=0.0, hold=True) as peer:  # the task never ends
        msg = _execute(peer, "d" * 64).model_copy(update={"timeout_seconds": 5})
        async with open_worker() as worker:
            handle = await _handle(worker, msg)
            reply = await _ack(worker, handle)
    # The handle came with what was said before it: the card fetch and the message.
    assert handle.protocol_evidence is not None
    sent = [(c.method, c.status) for c in handle.protocol_evidence.calls]
    assert sent == [("GetAgentCard", "succeeded"), ("SendMessage", "succeeded")]
    # The worker's timeout cut the polling short: uncertain, with every call so far.
    assert isinstance(reply, Failure) and reply.uncertain
    assert "timeout or cancellation" in reply.error.message
    assert reply.protocol is not None
    (session,) = reply.protocol.sessions
    assert (session.key, session.peer_info) == (
        "delegate",
        {"name": "reviewer", "version": "1.0.0"},
    )
    calls = reply.protocol.calls
    assert [c.method for c in calls[:2]] == ["GetAgentCard", "SendMessage"]
    assert calls[1].remote_id == handle.remote_task_id
    assert {c.method for c in calls[2:]} <= {"GetTask"}
    assert all(c.status != "started" for c in calls)  # nothing left open
