"""Length-prefixed JSON frames over a trio byte stream.

A frame is a 4-byte big-endian unsigned length followed by that many bytes of UTF-8 JSON
holding one ``Message``. Invariants:
- no frame is larger than ``MAX_FRAME_BYTES``; a larger announced length is refused before
  any of its body is read, so a hostile or broken peer cannot make us allocate it;
- ``receive`` returns ``None`` only on a clean EOF at a frame boundary; EOF inside a frame,
  bad JSON, an unknown message or a broken socket raise ``ProtocolError`` — the caller drops
  that connection and carries on (it never crashes the process);
- a frame is written whole or under the send lock, so concurrent effect tasks can share one
  channel without interleaving frames.

Speed (a frame round trip is on every effect's path): over a ``trio.SocketStream`` the
channel works on the socket's descriptor directly — it tries the non-blocking ``read`` /
``write`` first and parks in ``wait_readable`` / ``wait_writable`` only when the kernel has
nothing for it, so a frame that goes out (or is already there) costs no pass of the trio
scheduler. A send that finds the lock free and the socket buffer roomy never takes the lock:
nothing can interleave with a write that does not await. ``send_nowait`` is that write
without the coroutine (and without a checkpoint), for a caller that checkpoints next anyway;
what it cannot write at once it hands back for ``send_rest``, holding the lock for it.

Before it parks for a lone awaited answer from a quick peer, ``receive`` may poll its socket
for a bounded time (``_spin``, ADR 0014): on an idle machine waking a parked process costs
more than such an answer. Only while trio has nothing runnable or due, with back-off when a
spin does not pay, never on one CPU; a spun receive is still a cancellation point, and spun
receives give trio a scheduling pass at least every ``_PASS_NS`` so that tasks waiting on
other descriptors are not starved.
"""

from __future__ import annotations

import functools
import os
import select
import struct
import time
from collections.abc import Callable

import pydantic
import trio

from agentctl.envknobs import frame_spin_us
from agentctl.errors import AgentctlError
from agentctl.mailbox.messages import Message

MAX_FRAME_BYTES = 16 * 1024 * 1024
_HEADER = struct.Struct(">I")
# What one read asks for when the frame's size is not known yet. Kept well below glibc's
# mmap threshold (128 KiB): ``os.read(fd, n)`` allocates n bytes before it shrinks them to
# what came, and an allocation above the threshold is an mmap + munmap with fresh pages —
# ~16 µs for 256 KiB against ~3 µs for 64 KiB, on each side of every round trip. A frame
# larger than this is still read in one call once its header announced it (``missing``).
_READ_CHUNK = 64 * 1024
_LOST = (trio.BrokenResourceError, trio.ClosedResourceError, OSError)


def _spin_limit_ns() -> int:
    """How long a receive may poll before it parks (``AGENTCTL_FRAME_SPIN_US``, µs; 0: never).
    Never on one CPU: the peer cannot run while we poll, so it could not answer."""
    return frame_spin_us() * 1000 if len(os.sched_getaffinity(0)) > 1 else 0


# A peer is "quick" while the estimate of its answers stays below this many spin limits: a
# parked wait's measure includes the wake-ups (ours, and the peer's when it parked too) that
# the spin saves, so a peer measured at ~110 µs parked answers in ~15 µs once both sides spin.
_QUICK_LIMITS = 4
# A poll and a ``sched_yield`` take ~0.5 µs on an idle CPU; one that took longer than this
# gave the CPU to another process: spinning only takes turns with it (the other CPU is busy
# too, or the peer is on ours). Such a spin, or one that found nothing within the limit (the
# peer is queued behind another process: our spinning CPU keeps it from being moved to us),
# did not pay: the channel parks for its next waits, twice as many as after the last spin
# that did not pay, up to this many, until a spin finds its frame again.
_SHARED_NS = 10_000
_MAX_BACKOFF = 256
# Spun receives, which give trio no pass of their own, give it one at least this often (a pass
# after every spin would cost ~40% of a spun round trip: ~0.029 → ~0.042 ms).
_PASS_NS = 1_000_000


class ProtocolError(AgentctlError):
    """The peer broke the frame protocol or its connection failed.

    It lives here rather than in ``agentctl.errors`` because it never reaches a user: it only
    tells the owner of a channel to drop that peer. It is not a ``PersistenceError`` — nothing
    durable is wrong — so it keeps the generic runtime exit code.
    """


class FrameUnsentError(ProtocolError):
    """The connection was found lost at a frame's first write: no byte of it left, so the
    peer cannot have seen it (a peer that closed its end makes that write fail at once)."""


class FrameTooLargeError(ProtocolError):
    """A message to send encodes above ``MAX_FRAME_BYTES``: refused before any byte of it
    left, so the connection stays usable (the message, not the peer, is at fault)."""


def encode_frame(msg: Message) -> bytes:
    """The wire bytes of ``msg``; raises FrameTooLargeError above the frame limit."""
    # The model's built serializer, called directly: ``model_dump_json`` would wrap it in a
    # Python call, decode its bytes to ``str`` and leave us to encode them back (~2 against
    # ~6 µs for an ``Execute``, on both sides of every round trip). The bytes are the same.
    body = msg.__pydantic_serializer__.to_json(msg, by_alias=True)
    if len(body) > MAX_FRAME_BYTES:
        raise FrameTooLargeError(f"frame of {len(body)} bytes exceeds the {MAX_FRAME_BYTES} limit")
    return _HEADER.pack(len(body)) + body


_prebuilt_decoder: list[Callable[[bytes | bytearray], Message]] = []


def use_message_validator(validate: Callable[[bytes | bytearray], Message]) -> None:
    """Decode frames with ``validate`` (a validator of ``Message`` built elsewhere: from a
    stored core schema, ``mailbox.prebuilt``) unless a frame was already decoded."""
    if _message_validator.cache_info().currsize == 0:
        _prebuilt_decoder[:] = [validate]


@functools.cache
def _message_validator() -> Callable[[bytes | bytearray], Message]:
    # Built on the first frame received, not at import (messages defer their builds too):
    # a worker's start-up is on the path of a run's first effect. The adapter's built
    # validator is called directly: ``TypeAdapter.validate_json`` only wraps it in a Python
    # call that passes its defaults on (both sides of every round trip decode one frame).
    if _prebuilt_decoder:
        return _prebuilt_decoder[0]
    validate: Callable[[bytes | bytearray], Message] = pydantic.TypeAdapter(
        Message
    ).validator.validate_json
    return validate


def decode_body(body: bytes | bytearray) -> Message:
    """Parse one frame body; any malformation becomes ProtocolError."""
    try:
        return _message_validator()(body)
    except pydantic.ValidationError as exc:
        # The error text may quote the payload; keep only the first line of the summary.
        summary = str(exc).splitlines()[0]
        raise ProtocolError(f"malformed frame: {summary}") from exc


def _whole_frame(chunk: bytes | bytearray) -> bool:
    """Whether ``chunk`` is exactly one frame (its header and all of its body)."""
    if len(chunk) < _HEADER.size:
        return False
    length: int = _HEADER.unpack_from(chunk)[0]
    return len(chunk) == _HEADER.size + length and length <= MAX_FRAME_BYTES


def _closed() -> trio.ClosedResourceError:
    return trio.ClosedResourceError("the frame channel is closed")


class _SocketIO:
    """Non-blocking reads and writes on a trio socket's descriptor (see the module doc).

    The descriptor is kept (asking the socket costs two Python calls, several times per
    frame) and forgotten by ``close`` before the socket closes: only the channel closes its
    socket (``FrameChannel.aclose``), so a kept number never outlives it to name some other
    file reusing it.
    """

    def __init__(self, stream: trio.SocketStream) -> None:
        self._sock = stream.socket
        self.fileno = self._sock.fileno()

    def fd(self) -> int:
        fd = self.fileno
        if fd < 0:
            raise _closed()
        return fd

    def close(self) -> None:
        """Forget the descriptor: from now on every call raises as on a closed socket."""
        self.fileno = -1

    async def receive_some(self, max_bytes: int) -> bytes:
        # trio is given the number, not the socket (as in ``FrameChannel.receive``).
        await trio.lowlevel.checkpoint_if_cancelled()
        while True:
            fd = self.fd()  # asked again after each wait: it may have been closed meanwhile
            try:
                return os.read(fd, max_bytes)
            except BlockingIOError:
                await trio.lowlevel.wait_readable(fd)

    def write_nowait(self, data: bytes | memoryview) -> int:
        """Bytes of ``data`` the kernel took now (0 when its buffer is full)."""
        try:
            fd = self.fileno  # (``fd()`` inlined: a write is on every frame's path)
            if fd < 0:
                raise _closed()
            return os.write(fd, data)
        except BlockingIOError:
            return 0

    async def wait_writable(self) -> None:
        await trio.lowlevel.wait_writable(self.fd())

    def wake_waiters(self) -> None:
        if self.fileno >= 0:
            trio.lowlevel.notify_closing(self.fileno)


class FrameChannel:
    """Frames over one ``trio.abc.Stream`` (usually a SocketStream on a socketpair)."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self._stream = stream
        self._io = _SocketIO(stream) if isinstance(stream, trio.SocketStream) else None
        self._buffer = bytearray()
        self._send_lock = trio.Lock()
        # The spin before parking (``_spin``): its limit (0: never) and an estimate, moving
        # with every wait, of how long this channel's peer takes to answer.
        self.spin_ns = _spin_limit_ns() if self._io is not None else 0
        self.answer_ns = 0
        self._poll: select.poll | None = None
        # Waits left to park without spinning, and how many the next shared CPU will cost.
        self._skip = self._backoff = 0
        self._pass_ns = 0  # when a paid spin next gives the scheduler a pass
        # A send interrupted once a byte of its frame left: the peer would read whatever comes
        # next as the rest of that frame, so nothing more may be sent (``send`` refuses).
        self.torn = False

    def _refuse_if_torn(self) -> None:
        """Checked before a frame starts, and again once the send lock is ours: a sender that
        waited for the lock may follow one whose frame was cut off."""
        if self.torn:
            raise ProtocolError("an earlier frame was cut off: the connection is unusable")

    async def send(self, msg: Message) -> None:
        data = encode_frame(msg)
        self._refuse_if_torn()
        try:
            if self._io is None:
                async with self._send_lock:
                    self._refuse_if_torn()  # the holder before us may have cut its frame
                    await self._stream.send_all(data)
                return
            await trio.lowlevel.checkpoint_if_cancelled()
            if self._send_lock.locked():
                async with self._send_lock:
                    self._refuse_if_torn()
                    await self._write_rest(memoryview(data), started=False)
                return
            try:
                sent = self._io.write_nowait(data)
            except _LOST as exc:
                raise FrameUnsentError(f"connection lost before sending: {exc}") from exc
            if sent < len(data):
                # The rest waits for room: hold the lock so no other frame cuts in.
                self._send_lock.acquire_nowait()
                try:
                    await self._write_rest(memoryview(data)[sent:], started=sent > 0)
                finally:
                    self._send_lock.release()
        except _LOST as exc:
            raise ProtocolError(f"connection lost while sending: {exc}") from exc

    def send_nowait(self, msg: Message) -> memoryview | None:
        """Write what of ``msg``'s frame goes at once, without waiting or a checkpoint: None
        when all of it went (the usual case), else the rest — all of it when nothing went — for
        ``send_rest``. The send lock is held for a rest when it was free, so no other frame
        cuts in. Raises as ``send``, holding nothing then. A rest must go to ``send_rest`` from
        the same task with no checkpoint in between: the lock it holds belongs to that task."""
        data = encode_frame(msg)
        self._refuse_if_torn()
        if self._io is None or self._send_lock.locked():
            return memoryview(data)
        try:
            sent = self._io.write_nowait(data)
        except _LOST as exc:
            raise FrameUnsentError(f"connection lost before sending: {exc}") from exc
        if sent == len(data):
            return None
        self._send_lock.acquire_nowait()
        return memoryview(data)[sent:]

    async def send_rest(self, rest: memoryview) -> None:
        """Send ``rest``, what ``send_nowait`` left of a frame, then release the lock it took."""
        started = rest.nbytes < memoryview(rest.obj).nbytes  # a byte of the frame left
        try:
            if self._send_lock.statistics().owner is not trio.lowlevel.current_task():
                async with self._send_lock:  # it was busy: nothing of the frame went yet
                    self._refuse_if_torn()
                    if self._io is None:
                        await self._stream.send_all(rest)
                    else:
                        await self._write_rest(rest, started=False)
                return
            try:
                await self._write_rest(rest, started=started)
            finally:
                self._send_lock.release()
        except _LOST as exc:
            raise ProtocolError(f"connection lost while sending: {exc}") from exc

    async def _write_rest(self, view: memoryview, *, started: bool) -> None:
        """Write ``view``, the rest of a frame; ``started``: a byte of it already left."""
        assert self._io is not None
        try:
            while view:
                sent = self._io.write_nowait(view)
                if not sent:
                    await self._io.wait_writable()
                started = started or sent > 0
                view = view[sent:]
        except _LOST:
            raise  # the connection is gone: the next send finds that out for itself
        except BaseException:  # cancelled (or interrupted) with the connection still up
            self.torn = self.torn or started
            raise

    async def receive(self, *, awaited: bool = False) -> Message | None:
        """The next frame (None at a clean EOF). ``awaited`` (a hint): the caller just sent what
        the peer must answer first — wait before reading (a read would fail), spin first."""
        io = self._io
        if self._buffer or io is None:
            return await self._receive_buffered()
        # The usual case, flat (a wake-up resumes every coroutine up to the caller): one read, one
        # frame. trio is given the number (``notify_closing`` finds the wait), checked each time.
        waited = 0  # when the wait began (0: no wait yet)
        # Spin for a lone answer awaited (not in a busy pool or worker) from a quick peer only.
        spin = awaited and self.answer_ns < self.spin_ns * _QUICK_LIMITS
        try:
            if not awaited:
                await trio.lowlevel.checkpoint_if_cancelled()  # (a wait is a checkpoint itself)
            while True:
                if (fd := io.fileno) < 0:  # (``fd()`` inlined)
                    raise _closed()
                if awaited:  # nothing can be there yet: park first, and save a read that fails
                    awaited = False
                    if not waited:
                        waited = time.perf_counter_ns()
                        if spin and (chunk := await self._spin(fd)):
                            break
                    await trio.lowlevel.wait_readable(fd)
                    continue
                try:
                    chunk = os.read(fd, _READ_CHUNK)
                    break
                except BlockingIOError:
                    awaited = True
        except _LOST as exc:
            raise ProtocolError(f"connection lost while receiving: {exc}") from exc
        if waited:  # (an estimate moving a quarter of the way to each new wait)
            self.answer_ns += (time.perf_counter_ns() - waited - self.answer_ns) >> 2
        if _whole_frame(chunk):
            return decode_body(chunk[_HEADER.size :])  # exactly one frame: no buffering
        if not chunk:
            return None  # a clean EOF, at a frame boundary
        self._buffer += chunk
        return await self._receive_buffered()

    async def _spin(self, fd: int) -> bytes:
        """The frame's first bytes if they come within the spin limit, polled for without
        parking (the caller found the peer quick of late); b"" (then park) unless it is likely
        to pay and cannot hurt: no back-off, and trio has nothing else to run or wake for
        meanwhile. Waking a parked process costs more than a quick answer on an idle machine."""
        limit = self.spin_ns
        if self._skip:
            self._skip -= 1
            return b""
        stats = trio.lowlevel.current_statistics()
        if (
            stats.tasks_runnable
            or stats.run_sync_soon_queue_size
            or stats.seconds_to_next_deadline * 1e9 < limit
        ):
            return b""
        await trio.lowlevel.checkpoint_if_cancelled()  # a receive that does not park checks
        if not self._poll_for(fd, limit):
            return b""
        try:
            chunk = os.read(fd, _READ_CHUNK)  # (b"" at EOF: the wait then finds it at once)
        except BlockingIOError:
            return b""
        if (now := time.perf_counter_ns()) >= self._pass_ns:
            # A paid spin is no scheduling point: tasks waiting on other descriptors become
            # runnable only when trio polls for I/O. Give it a pass at least every
            # ``_PASS_NS`` of spun receives (shielded: the frame in hand is not lost).
            self._pass_ns = now + _PASS_NS
            await trio.lowlevel.cancel_shielded_checkpoint()
        return chunk

    def _poll_for(self, fd: int, limit: int) -> bool:
        """Whether ``fd`` turned readable within ``limit`` ns of polling, yielding the CPU
        between polls; a poll that did not pay (see ``_SHARED_NS``) backs the channel off."""
        poll = self._poll
        if poll is None:
            poll = self._poll = select.poll()
            poll.register(fd, select.POLLIN)
        now = time.perf_counter_ns()
        until = now + limit
        paid = True
        while not poll.poll(0):
            if not paid:  # (after one more poll: the peer may have answered meanwhile)
                return False
            os.sched_yield()  # a loaded CPU: let a runnable process (the peer?) have it
            then, now = now, time.perf_counter_ns()
            if now >= until or now - then > _SHARED_NS:  # in vain, or it did: back off
                self._backoff = min(2 * self._backoff or 1, _MAX_BACKOFF)
                self._skip = self._backoff
                paid = False
        if paid:
            self._backoff = 0
        return True

    async def _receive_buffered(self) -> Message | None:
        """The next frame, out of the buffer and as many reads as it takes."""
        buffer = self._buffer
        while True:
            if len(buffer) >= _HEADER.size:
                (length,) = _HEADER.unpack_from(buffer)
                if length > MAX_FRAME_BYTES:
                    raise ProtocolError(f"announced frame of {length} bytes exceeds the limit")
                end = _HEADER.size + length
                if len(buffer) >= end:
                    body = bytes(buffer[_HEADER.size : end])
                    del buffer[:end]
                    return decode_body(body)
                missing = end - len(buffer)
            else:
                missing = _HEADER.size - len(buffer)
            chunk = await self._receive_some(missing)
            if not chunk:
                if not buffer:
                    return None  # a clean EOF, at a frame boundary
                raise ProtocolError("truncated frame: connection closed inside a frame")
            if not buffer and _whole_frame(chunk):
                return decode_body(chunk[_HEADER.size :])
            buffer += chunk

    def abandon(self) -> None:
        """Wake every task waiting to read or write this channel: each gets ``ProtocolError``
        as if the connection were lost. For an owner that has given the peer up (it is being
        killed); the socket itself stays open until ``aclose``. Nothing to do off a socket."""
        if self._io is not None:
            self._io.wake_waiters()

    async def aclose(self) -> None:
        if self._io is not None:
            self._io.close()  # first: the number must not be used once the socket closes
        await self._stream.aclose()

    async def _receive_some(self, count: int) -> bytes | bytearray:
        size = max(_READ_CHUNK, count)
        try:  # (the one-frame fast path in ``receive`` wraps its reads the same way)
            if self._io is not None:
                return await self._io.receive_some(size)
            return await self._stream.receive_some(size)
        except _LOST as exc:
            raise ProtocolError(f"connection lost while receiving: {exc}") from exc
