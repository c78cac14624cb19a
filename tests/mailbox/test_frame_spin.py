"""The spin before parking (``FrameChannel._spin``) over a real socketpair: taken only when the
peer answered quickly of late and trio has nothing else to do; a receiver that parks after it
is still woken by cancellation and ``abandon``; never on one CPU or with a limit of 0.

Parks are counted by wrapping ``trio.lowlevel.wait_readable`` (the channel looks it up on each
wait). A frame already in the socket with ``receive(awaited=True)`` tells a spin from a park
without timing: without the spin the channel parks first, with it the first poll finds the frame.
"""

from __future__ import annotations

import functools
import os
import socket
import struct
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
import trio
import trio.testing

from agentctl.mailbox import Cancel, FrameChannel, ProtocolError
from agentctl.mailbox.frames import encode_frame

SPIN_NS = 50_000
Pair = tuple[FrameChannel, socket.socket]


@pytest.fixture
def parks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Each ``wait_readable`` the channel parks in, by descriptor."""
    seen: list[int] = []
    real: Callable[[int], Awaitable[None]] = trio.lowlevel.wait_readable

    async def counting(fd: int) -> None:
        seen.append(fd)
        await real(fd)

    monkeypatch.setattr(trio.lowlevel, "wait_readable", counting)
    return seen


@pytest.fixture
async def pair() -> AsyncIterator[Pair]:
    """A spinning channel and the plain blocking socket its peer writes with."""
    ours, theirs = trio.socket.socketpair()
    chan = FrameChannel(trio.SocketStream(ours))
    chan.spin_ns = SPIN_NS  # whatever this host's CPUs: the rule is tested, not the host
    yield chan, theirs._sock
    await chan.aclose()
    theirs.close()


async def _receive_sent_once_parked(
    chan: FrameChannel, peer: socket.socket, *, awaited: bool = True
) -> None:
    """Receive a frame the peer sends only once the receiver parked (spun in vain first)."""
    async with trio.open_nursery() as nursery:
        nursery.start_soon(functools.partial(chan.receive, awaited=awaited))
        await trio.testing.wait_all_tasks_blocked()
        peer.sendall(encode_frame(Cancel(effect_id="e")))


async def test_a_quick_peer_is_received_without_parking(pair: Pair, parks: list[int]) -> None:
    chan, peer = pair
    peer.sendall(encode_frame(Cancel(effect_id="e1")))
    assert await chan.receive(awaited=True) == Cancel(effect_id="e1")
    assert parks == []


async def test_no_spin_while_another_task_is_runnable(pair: Pair, parks: list[int]) -> None:
    chan, peer = pair
    peer.sendall(encode_frame(Cancel(effect_id="e1")))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio.sleep, 0)  # runnable now, in the run queue
        assert await chan.receive(awaited=True) == Cancel(effect_id="e1")
    assert len(parks) == 1


async def test_no_spin_with_a_callback_queued_from_a_thread(pair: Pair, parks: list[int]) -> None:
    chan, peer = pair
    peer.sendall(encode_frame(Cancel(effect_id="e1")))
    trio.lowlevel.current_trio_token().run_sync_soon(lambda: None)
    assert await chan.receive(awaited=True) == Cancel(effect_id="e1")
    assert len(parks) == 1


async def test_a_spin_that_finds_the_frame_still_honours_cancellation(pair: Pair) -> None:
    chan, peer = pair
    peer.sendall(encode_frame(Cancel(effect_id="e1")))
    with trio.CancelScope() as scope:
        scope.cancel()
        await chan.receive(awaited=True)
    assert scope.cancelled_caught
    assert await chan.receive(awaited=True) == Cancel(effect_id="e1")  # not lost


async def test_no_spin_with_a_deadline_due_within_the_limit(
    pair: Pair, parks: list[int], mock_clock: trio.testing.MockClock
) -> None:
    chan, peer = pair  # (the run's clock stands still: the deadline stays due)
    peer.sendall(encode_frame(Cancel(effect_id="e1")))
    with trio.move_on_at(trio.current_time() + SPIN_NS / 1e9 / 10):
        await chan.receive(awaited=True)
    assert len(parks) == 1


async def test_a_slow_peer_turns_the_spin_off(pair: Pair, parks: list[int]) -> None:
    chan, peer = pair

    async def answer_late() -> None:
        await trio.sleep(0.01)  # a wait of at least 10 ms: the estimate rises to >= 2.5 ms
        peer.sendall(encode_frame(Cancel(effect_id="late")))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(answer_late)
        assert await chan.receive(awaited=True) == Cancel(effect_id="late")
    assert chan.answer_ns >= 4 * SPIN_NS
    parks.clear()
    peer.sendall(encode_frame(Cancel(effect_id="e2")))  # there already, yet it parks first
    assert await chan.receive(awaited=True) == Cancel(effect_id="e2")
    assert len(parks) == 1


async def test_a_receiver_past_its_spin_is_woken_by_abandon_and_cancellation(pair: Pair) -> None:
    chan, _ = pair
    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(functools.partial(chan.receive, awaited=True))  # spins, parks
            await trio.testing.wait_all_tasks_blocked()
            scope.cancel()
    assert scope.cancelled_caught
    lost: list[ProtocolError] = []

    async def receive() -> None:
        try:
            await chan.receive(awaited=True)
        except ProtocolError as exc:
            lost.append(exc)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(receive)
        await trio.testing.wait_all_tasks_blocked()
        chan.abandon()
    assert len(lost) == 1


def test_one_cpu_or_a_limit_of_zero_never_spins(monkeypatch: pytest.MonkeyPatch) -> None:
    def spin_of_a_new_channel() -> int:
        a, b = socket.socketpair()
        with a, b:
            return FrameChannel(trio.SocketStream(trio.socket.from_stdlib_socket(a))).spin_ns

    cpus = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, {min(cpus)})
        assert spin_of_a_new_channel() == 0
    finally:
        os.sched_setaffinity(0, cpus)
    if len(cpus) > 1:
        assert spin_of_a_new_channel() > 0
        monkeypatch.setenv("AGENTCTL_FRAME_SPIN_US", "0")
        assert spin_of_a_new_channel() == 0


async def test_a_spin_that_gave_the_cpu_away_backs_off(
    pair: Pair, parks: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    chan, peer = pair
    chan.spin_ns = 10**9  # only the CPU's sharing may stop these spins
    yields: list[None] = []

    def shared_yield() -> None:  # another process ran meanwhile
        yields.append(None)
        time.sleep(0.001)

    monkeypatch.setattr(os, "sched_yield", shared_yield)

    async def receive_one() -> None:
        await _receive_sent_once_parked(chan, peer)

    async def receive_waiting() -> None:  # the frame is there: a spin finds it at once
        peer.sendall(encode_frame(Cancel(effect_id="e")))
        await chan.receive(awaited=True)

    yields_per_wait = []
    for receive in [receive_one] * 5 + [receive_waiting] + [receive_one] * 3:
        await receive()
        yields_per_wait.append(len(yields))
    # Each spin gives up at its first shared yield; then 1, 2, 4 … waits park without one,
    # until a spin runs alone (it found its frame): the next shared one costs one wait again.
    assert yields_per_wait == [1, 1, 2, 2, 2, 2, 3, 3, 4]
    assert len(parks) == 8


async def test_a_spin_that_found_nothing_backs_off(
    pair: Pair, parks: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    chan, peer = pair
    chan.spin_ns = 1  # every spin runs out before the frame is sent
    yields: list[None] = []
    monkeypatch.setattr(os, "sched_yield", lambda: yields.append(None))
    yields_per_wait = []
    for _ in range(4):
        chan.answer_ns = 0  # only the back-off may stop these spins
        await _receive_sent_once_parked(chan, peer)
        yields_per_wait.append(len(yields))
    assert yields_per_wait == [1, 1, 2, 2]  # a spin; a park; a spin; two parks …
    assert len(parks) == 4


async def test_a_receive_not_awaiting_a_lone_answer_never_spins(
    pair: Pair, parks: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    chan, peer = pair
    yields: list[None] = []
    monkeypatch.setattr(os, "sched_yield", lambda: yields.append(None))
    await _receive_sent_once_parked(chan, peer, awaited=False)  # a busy pool or worker
    assert yields == []
    assert len(parks) == 1


async def test_a_frame_sent_while_the_cpu_was_given_away_is_taken_without_parking(
    pair: Pair, parks: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    chan, peer = pair
    chan.spin_ns = 10**9  # only the CPU's sharing may stop this spin

    def peer_answers() -> None:  # the peer ran on our CPU meanwhile, and answered
        peer.sendall(encode_frame(Cancel(effect_id="e1")))
        time.sleep(0.001)

    monkeypatch.setattr(os, "sched_yield", peer_answers)
    received: list[object] = []

    async def receive() -> None:
        received.append(await chan.receive(awaited=True))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(receive)
        await trio.testing.wait_all_tasks_blocked()
        if not received:  # it parked (the rule failed): answer, so the test ends and says so
            peer.sendall(encode_frame(Cancel(effect_id="e1")))
    assert received == [Cancel(effect_id="e1")]
    assert parks == []
    monkeypatch.setattr(os, "sched_yield", lambda: None)
    await _receive_sent_once_parked(chan, peer)  # backed off all the same: parks at once
    assert len(parks) == 1


async def test_spun_receives_give_a_waiter_on_another_socket_its_turn(pair: Pair) -> None:
    """A paid spin is no scheduling point, and a task parked on another descriptor is not
    runnable until trio polls for I/O: spun receives give trio a pass now and then (at least
    every millisecond), so that task runs while they go on. Without it, it never would here."""
    chan, peer = pair
    mine, other = socket.socketpair()
    ran: list[bool] = []

    async def waiter() -> None:
        await trio.lowlevel.wait_readable(mine)
        ran.append(True)

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(waiter)
            await trio.testing.wait_all_tasks_blocked()
            other.send(b"x")  # readable now: only trio's poll for I/O can tell the waiter
            for _ in range(20_000):  # ≥ 1 ms however fast: each receive decodes a frame
                peer.sendall(encode_frame(Cancel(effect_id="e")))
                assert await chan.receive(awaited=True) == Cancel(effect_id="e")
                if ran:
                    break
            assert ran
    finally:
        mine.close()
        other.close()


@pytest.mark.parametrize("ending", ["eof", "reset", "cut"])
async def test_a_spin_meeting_the_end_of_the_connection_reports_it(pair: Pair, ending: str) -> None:
    """What a spin reads at the end is what a parked read would: a clean EOF is None, a reset
    connection and a frame cut off by the close are ``ProtocolError``."""
    chan, peer = pair
    if ending == "reset":  # an unread byte on our side makes the peer's close a reset
        await chan.send(Cancel(effect_id="e"))
        peer.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    if ending == "cut":
        peer.sendall(encode_frame(Cancel(effect_id="e"))[:-3])
    peer.close()
    if ending == "eof":
        assert await chan.receive(awaited=True) is None
    else:
        with pytest.raises(ProtocolError):
            await chan.receive(awaited=True)
