"""Frames round-trip over a real socketpair; malformed input raises ProtocolError."""

from __future__ import annotations

import json
import socket
import struct

import pytest
import trio
import trio.testing

from agentctl.mailbox import (
    MAX_FRAME_BYTES,
    Cancel,
    EffectRequest,
    Execute,
    Failure,
    FrameChannel,
    Go,
    Hello,
    Message,
    ProtocolError,
    Result,
    Shutdown,
    StreamAck,
    StreamFragment,
    WireError,
)
from agentctl.mailbox.frames import FrameUnsentError, encode_frame


async def _pair(send_buffer: int | None = None) -> tuple[FrameChannel, trio.SocketStream]:
    a, b = trio.socket.socketpair()
    if send_buffer is not None:  # a known capacity, whatever the host's defaults
        a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, send_buffer)
    return FrameChannel(trio.SocketStream(a)), trio.SocketStream(b)


SAMPLES: list[Message] = [
    Hello(pid=42),
    Execute(
        effect_id="e" * 64,
        run_id="run-1",
        task_id="t",
        attempt=1,
        operation="builtin.write",
        request={"path": "out/ä.txt", "nested": {"x": [1, None, True]}},
        timeout_seconds=5,
    ),
    Result(effect_id="e1", output={"status": "changed"}, usage={"n": 3}, artifacts=["out/a"]),
    Failure(
        effect_id="e2",
        error=WireError(type="RunFailedError", message="boom", retryable=False),
        uncertain=True,
    ),
    Cancel(effect_id="e3"),
    Shutdown(),
    EffectRequest(parent_effect_id="e4", ordinal=1, operation="model", request={}),
    Go(parent_effect_id="e4", ordinal=1, effect_id="e5"),
    StreamFragment(effect_id="e6", index=0, kind="text", text="Hel", provider_sequence=3),
    StreamAck(effect_id="e6", index=0, accepted=False, error="disk full"),
]


async def test_every_message_round_trips_in_order() -> None:
    left, right_stream = await _pair()
    right = FrameChannel(right_stream)
    for msg in SAMPLES:
        await left.send(msg)
    for msg in SAMPLES:
        assert await right.receive() == msg
    await left.aclose()
    assert await right.receive() is None  # clean EOF at a frame boundary


def test_wire_keys_are_camel_case_and_versioned() -> None:
    frame = encode_frame(
        Execute(
            effect_id="e",
            run_id="r",
            task_id="t",
            attempt=1,
            operation="op",
            request={},
            timeout_seconds=1,
        )
    )
    body = json.loads(frame[4:])
    assert body["type"] == "execute" and body["v"] == 1
    assert {"effectId", "runId", "taskId", "timeoutSeconds"} <= set(body)
    assert struct.unpack(">I", frame[:4])[0] == len(frame) - 4


async def _receive_raw(raw: bytes) -> None:
    chan, peer = await _pair()
    await peer.send_all(raw)
    await peer.aclose()
    await chan.receive()


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(struct.pack(">I", 10) + b"{}", id="truncated-body"),
        pytest.param(b"\x00\x00", id="truncated-header"),
        pytest.param(struct.pack(">I", MAX_FRAME_BYTES + 1), id="oversized"),
        pytest.param(struct.pack(">I", 5) + b"nope!", id="not-json"),
        pytest.param(struct.pack(">I", 2) + b"{}", id="no-type"),
        pytest.param(struct.pack(">I", 2) + b"\xff\xfe", id="not-utf8"),
    ],
)
async def test_bad_frames_raise_protocol_error(raw: bytes) -> None:
    with pytest.raises(ProtocolError):
        await _receive_raw(raw)


@pytest.mark.parametrize(
    "body",
    [
        {"type": "hello", "v": 2, "pid": 1, "protocol": 1},
        {"type": "launch", "v": 1},
        {"type": "cancel", "v": 1, "effectId": "e", "surprise": 1},
    ],
    ids=["future-version", "unknown-type", "unknown-key"],
)
async def test_invalid_messages_raise_protocol_error(body: dict[str, object]) -> None:
    data = json.dumps(body).encode()
    with pytest.raises(ProtocolError):
        await _receive_raw(struct.pack(">I", len(data)) + data)


def test_oversized_outgoing_message_is_refused() -> None:
    big = Result(effect_id="e", output={"blob": "x" * (MAX_FRAME_BYTES + 1)})
    with pytest.raises(ProtocolError):
        encode_frame(big)


async def test_send_to_a_closed_peer_raises_protocol_error() -> None:
    chan, peer = await _pair()
    await peer.aclose()
    with pytest.raises(ProtocolError):
        for _ in range(64):  # the first send may still fit in the kernel buffer
            await chan.send(Result(effect_id="e", output={"x": "y" * 65536}))


async def test_only_a_frame_of_which_no_byte_left_is_reported_unsent() -> None:
    # The pool hands an effect to another worker only on FrameUnsentError (the worker died
    # idle): a frame the peer may have begun to read must never be reported so.
    chan, peer = await _pair()
    big = Result(effect_id="e", output={"blob": "x" * 1_000_000})  # beyond the kernel buffer

    async def read_a_little_then_close() -> None:
        await peer.receive_some(1024)
        await peer.aclose()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(read_a_little_then_close)
        with pytest.raises(ProtocolError) as cut:
            await chan.send(big)
    assert not isinstance(cut.value, FrameUnsentError)
    with pytest.raises(FrameUnsentError):
        await chan.send(Shutdown())


async def test_a_send_cancelled_mid_frame_tears_the_channel_and_one_before_any_byte_does_not() -> (
    None
):
    # Cut off after part of a frame left, the peer would read the next frame's bytes as the
    # rest of this one: the channel says it is torn and refuses to send again (the pool then
    # loses that worker instead of handing it the next effect).
    chan, _peer = await _pair()
    with trio.CancelScope() as scope:
        scope.cancel()
        await chan.send(Shutdown())
    assert not chan.torn  # cancelled at the send's checkpoint: nothing left
    big = Result(effect_id="e", output={"blob": "x" * 1_000_000})  # beyond the kernel buffer
    with trio.move_on_after(0.05):  # the peer never reads: the send parks mid-frame
        await chan.send(big)
    assert chan.torn
    with pytest.raises(ProtocolError, match="cut off"):
        await chan.send(Shutdown())


async def test_a_sender_waiting_for_the_lock_behind_a_cut_frame_sends_nothing() -> None:
    # The waiter checked the channel before the frame ahead of it was cut: once the lock is
    # its own it must look again, or its bytes would be read as the rest of the cut frame.
    chan, peer = await _pair()
    big = Result(effect_id="e", output={"blob": "x" * 1_000_000})  # beyond the kernel buffer
    ahead = trio.CancelScope()
    outcome: list[str] = []

    async def send_big() -> None:
        with ahead:  # the peer does not read: the send parks mid-frame, holding the lock
            await chan.send(big)

    async def wait_behind() -> None:
        try:
            await chan.send(Shutdown())
        except ProtocolError as exc:
            outcome.append(str(exc))

    # Bounded: a waiter that wrote behind the cut frame would park, the peer never reading.
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(send_big)
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(wait_behind)
            await trio.testing.wait_all_tasks_blocked()
            ahead.cancel()
    assert chan.torn
    assert outcome and "cut off" in outcome[0]
    got = b""
    with trio.move_on_after(0.3):
        while chunk := await peer.receive_some(1 << 20):
            got += chunk
    assert 0 < len(got) < len(encode_frame(big))
    assert set(got[len(got) - 64 :]) == {ord("x")}  # the cut frame's bytes, nothing after


async def test_concurrent_large_frames_never_interleave() -> None:
    # Each frame is larger than a socketpair's kernel buffer, so every send is written in
    # parts while other tasks want to send too; the reader must still get whole frames.
    left, right_stream = await _pair()
    right = FrameChannel(right_stream)
    sent = [
        Result(effect_id=f"e{sender}-{k}", output={"blob": chr(65 + sender) * 600_000})
        for sender in range(4)
        for k in range(3)
    ]

    async def send_all(sender: int) -> None:
        for msg in sent[sender * 3 : sender * 3 + 3]:
            await left.send(msg)

    received: list[Message] = []
    async with trio.open_nursery() as nursery:
        for sender in range(4):
            nursery.start_soon(send_all, sender)
        for _ in sent:
            msg = await right.receive()
            assert msg is not None
            received.append(msg)
    assert sorted(received, key=lambda m: getattr(m, "effect_id", "")) == sent


async def test_frames_started_without_waiting_stay_whole_among_concurrent_sends() -> None:
    # A frame larger than the kernel buffer goes partly at once (``send_nowait``), the rest
    # later (``send_rest``, holding the lock); one started while another task's frame holds
    # the lock writes nothing at once. Small ones go whole at once. The reader sees whole
    # frames, each sender's in its order. A 64 KiB socket buffer, whatever the host's default.
    left, right_stream = await _pair(send_buffer=64 * 1024)
    right = FrameChannel(right_stream)
    big = [Result(effect_id=f"b{k}", output={"blob": "x" * 600_000}) for k in range(3)]
    small = Cancel(effect_id="s")
    assert left.send_nowait(small) is None  # an empty buffer takes a small frame whole
    rests: list[bool] = []

    async def send_big_nowait() -> None:
        for msg in big:
            rest = left.send_nowait(msg)
            rests.append(rest is not None)
            if rest is not None:
                await left.send_rest(rest)

    async def send_concurrently() -> None:
        for k in range(3):
            await left.send(Result(effect_id=f"c{k}", output={"blob": "y" * 600_000}))

    received: list[Message] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(send_big_nowait)
        nursery.start_soon(send_concurrently)
        for _ in range(7):
            msg = await right.receive()
            assert msg is not None
            received.append(msg)
    assert rests == [True, True, True]  # none fitted at once
    ids = [getattr(m, "effect_id", "") for m in received]
    assert ids[0] == "s"
    assert [i for i in ids if i.startswith("b")] == ["b0", "b1", "b2"]
    assert [i for i in ids if i.startswith("c")] == ["c0", "c1", "c2"]
    assert all(
        m in big or (isinstance(m, Result) and m.output["blob"] == "y" * 600_000)
        for m in received[1:]
    )


async def test_a_closed_channel_refuses_to_send_or_receive() -> None:
    chan, peer = await _pair()
    await chan.aclose()
    with pytest.raises(ProtocolError):
        await chan.send(Shutdown())
    with pytest.raises(ProtocolError):
        await chan.receive()
    await peer.aclose()


async def test_frames_cut_anywhere_between_reads_arrive_whole_and_in_order() -> None:
    # The reader decodes a read holding exactly one frame in place and buffers anything else:
    # a frame and a half in one read, a header cut in two, a body cut in two.
    channel, raw = await _pair()
    wire = b"".join(encode_frame(m) for m in SAMPLES[:4])
    first, second = len(encode_frame(SAMPLES[0])), len(encode_frame(SAMPLES[1]))
    cuts = [first + second // 2, first + second + 2, len(wire) - 5, len(wire)]
    got: list[Message | None] = []
    start = 0
    for cut in cuts:
        await raw.send_all(wire[start:cut])
        start = cut
        while len(got) < 4 and _complete_before(wire, cut, len(got)):
            got.append(await channel.receive())
    assert got == SAMPLES[:4]


def _complete_before(wire: bytes, end: int, taken: int) -> bool:
    """Whether frame number ``taken`` of ``wire`` lies wholly in ``wire[:end]``."""
    at = 0
    for _ in range(taken + 1):
        if at + 4 > end:
            return False
        at += 4 + struct.unpack(">I", wire[at : at + 4])[0]
    return at <= end
