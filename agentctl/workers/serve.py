"""The worker main loop: handshake, then run each ``Execute`` in the task that read it (an
effect that blocks hands the reading over to a new task; one answered at once does not).

Invariants:
- the first frame a worker sends is ``Hello``; afterwards exactly one ``Result`` or
  ``Failure`` per ``Execute`` (unless the worker dies, which the coordinator treats as loss),
  preceded by any ``RemoteHandle`` frames the effect sent mid-way (``workers.remote``);
- effects run concurrently in the worker's nursery; an effect that blocks runs under its
  own cancel scope (its reader task's, taken over when it blocks), so ``Cancel`` stops
  exactly one effect (reported uncertain: it had started — unless its executor reported that
  its request never left, ``watch_dispatch``: then ``cancelled_unsent``, a definitive
  failure); effects answered at once share their reader's scope, which nothing can cancel
  while they run (no frame is read then);
- socket EOF or a protocol error cancels every effect — killing their process trees — and the
  worker exits; ``Shutdown`` stops reading, lets running effects finish, then exits;
- an executor bug never kills the worker: it becomes an uncertain ``Failure``;
- an effect's ``timeout_seconds`` starts once its executor is loaded; when it expires the
  effect is uncertain, unless its executor reported that its request never left
  (``executors.watch_dispatch``): then it failed, retryably; the error names the owner the
  executor reported, if any, and says the seconds as every error does (``seconds_text``);
- each effect has its own stream sink (``stream.py``): a ``StreamAck`` wakes the effect whose
  fragment it answers, and only that one.
"""

from __future__ import annotations

import importlib
import math
import os
import socket
import types
from collections.abc import Callable, Coroutine, Generator
from typing import Any, TypeVar

import trio

from agentctl.core.timeouts import seconds_text
from agentctl.crashpoints import CrashPoint, crash_point
from agentctl.errors import AgentctlError, CancelledRunError, RunFailedError
from agentctl.mailbox.frames import FrameChannel, FrameTooLargeError, ProtocolError
from agentctl.mailbox.messages import (
    PROTOCOL_VERSION,
    Cancel,
    Execute,
    Failure,
    Hello,
    RemoteHandleAck,
    Result,
    Shutdown,
    StreamAck,
    cancelled_unsent,
    failure_from_error,
)
from agentctl.workers.executors import (
    CURRENT_DISPATCH,
    Dispatch,
    FailedEffect,
    UncertainEffect,
    executor_for,
)
from agentctl.workers.remote import CURRENT_LINK, HandleLink
from agentctl.workers.stream import CURRENT_SINK_SOURCE, StreamSink
from agentctl.workers.tracecontext import CURRENT_SPAN

T = TypeVar("T")


class _Effect(Dispatch):
    """One ``Execute`` being run: its deadline once its executor is loaded, what its executor
    reported about its request (it is the effect's ``Dispatch``), and its stream sink, made
    when the executor first asks for it (it is the effect's ``SinkSource``)."""

    def __init__(self, msg: Execute, worker: _Worker):
        self._sent = None  # ``Dispatch``'s fields, set here: no ``super()`` call per effect
        self.owner = None
        self.closers = None
        self.msg = msg
        self.clock = worker.clock
        self.deadline = math.inf
        self._channel = worker.channel
        self._sinks = worker.sinks  # the worker's, so that a StreamAck finds the sink

    def sink(self) -> StreamSink:
        made = self._sinks.get(self.msg.effect_id)
        if made is None:
            made = self._sinks[self.msg.effect_id] = StreamSink(self._channel, self.msg.effect_id)
        return made


async def _attempt(effect: _Effect) -> Result | Failure:
    """Run ``effect``'s executor and turn what it returns or raises into the reply.

    Cancellation passes through: the reader task's scope that runs the effect catches it, and
    ``_interrupted`` then says what it means. The timeout is counted from when the executor is
    loaded (it bounds the effect, not the worker's first import of its executor).
    """
    msg = effect.msg
    # Bound for the rest of this task, each effect its own (set directly: no Python call).
    CURRENT_DISPATCH.set(effect)
    CURRENT_SPAN.set(msg)
    CURRENT_SINK_SOURCE.set(effect)
    try:
        executor = executor_for(msg)
        effect.deadline = effect.clock.current_time() + msg.timeout_seconds
        outcome = await executor(msg)
        return Result(
            effect_id=msg.effect_id,
            output=outcome.output,
            usage=outcome.usage,
            artifacts=outcome.artifacts,
            protocol=outcome.protocol,
        )
    except UncertainEffect as exc:
        wire = exc.error.to_wire()
        return failure_from_error(msg.effect_id, wire, uncertain=True, protocol=exc.protocol)
    except FailedEffect as exc:
        return exc.reply(msg.effect_id)
    except AgentctlError as exc:
        return failure_from_error(msg.effect_id, exc.to_wire())
    except Exception as exc:  # an executor bug: the effect may have half-happened
        err = AgentctlError(f"internal worker error: {type(exc).__name__}: {exc}")
        return failure_from_error(msg.effect_id, err.to_wire(), uncertain=True)


def _interrupted(effect: _Effect) -> Failure:
    """The reply of an effect its scope stopped: a ``Cancel``, or its timeout."""
    effect_id = effect.msg.effect_id
    owner = f"{effect.owner}: " if effect.owner else ""
    if trio.current_time() < effect.deadline:
        if effect.known_unsent:  # nothing left this process: the effect did not happen
            why = f"{owner}effect cancelled before its request was sent"
            return cancelled_unsent(effect_id, why)
        cancelled = CancelledRunError("effect cancelled after it started")
        return failure_from_error(effect_id, cancelled.to_wire(), uncertain=True)
    expired = f"{owner}effect timed out after {seconds_text(effect.msg.timeout_seconds)} s"
    if effect.known_unsent:
        # Nothing left this process: the effect did not happen, so trying again is safe.
        err = RunFailedError(f"{expired}, before its request was sent", retryable=True)
        return failure_from_error(effect_id, err.to_wire())
    return failure_from_error(effect_id, RunFailedError(expired).to_wire(), uncertain=True)


class _Blocked:
    """The effect that blocked in a reader task (it owns that task's scope from then on) and,
    once it finished, its reply; None while the task only read and answered at once."""

    __slots__ = ("effect", "reply")

    def __init__(self) -> None:
        self.effect: _Effect | None = None
        self.reply: Result | Failure | None = None


class _Worker:
    def __init__(self, channel: FrameChannel, nursery: trio.Nursery) -> None:
        self.channel = channel
        self.nursery = nursery
        self.scopes: dict[str, trio.CancelScope] = {}
        self.sinks: dict[str, StreamSink] = {}
        self.link = HandleLink(channel)
        # The run's clock, asked directly for each effect's deadline (``trio.current_time()``
        # is three Python calls deep).
        self.clock = trio.lowlevel.current_clock()

    async def serve(self) -> None:
        """Read messages until EOF, error or Shutdown, running each ``Execute`` in this task.

        An effect starts in the scheduler pass that read its frame, inside this task's one
        cancel scope. Effects answered at once share it (nothing can cancel it while they
        run: a ``Cancel`` is read only when they have finished), so they cost no scope of
        their own; the first effect that blocks takes it over — its deadline becomes the
        effect's timeout, a new reader starts (``_run_handing_over``) and this task ends with
        the effect, sending its reply once outside the scope (a timeout never cuts a frame).
        """
        scope = trio.CancelScope()
        blocked = _Blocked()
        try:
            with scope:
                await self._read(scope, blocked)
            if blocked.effect is not None:
                reply = blocked.reply
                await self._reply(reply if reply is not None else _interrupted(blocked.effect))
        finally:
            if blocked.effect is not None and blocked.effect.closers is not None:
                blocked.effect.run_closers()  # after the reply, off its path

    async def _read(self, scope: trio.CancelScope, blocked: _Blocked) -> None:
        awaited = False  # answered, and nothing else runs here: the next frame comes later
        while True:
            try:
                msg = await self.channel.receive(awaited=awaited)
            except ProtocolError:
                msg = None
            if msg is None:
                self.nursery.cancel_scope.cancel()
                return
            if isinstance(msg, Shutdown):
                return
            awaited = False
            if isinstance(msg, Execute):
                if self._admit(msg, scope) and await self._run_here(msg, scope, blocked):
                    return
                awaited = not self.scopes
            elif isinstance(msg, Cancel) and msg.effect_id in self.scopes:
                self.scopes[msg.effect_id].cancel()
            elif isinstance(msg, StreamAck) and msg.effect_id in self.sinks:
                self.sinks[msg.effect_id].acknowledge_nowait(msg)
            elif isinstance(msg, RemoteHandleAck):
                self.link.acknowledge(msg)

    async def _run_here(self, msg: Execute, scope: trio.CancelScope, blocked: _Blocked) -> bool:
        """Run ``msg`` in this task; True if this task stopped reading (it blocked)."""
        effect = _Effect(msg, self)

        def on_block() -> None:
            blocked.effect = effect  # the scope is the effect's own from now on
            scope.deadline = effect.deadline  # set: loading the executor does not block
            self.nursery.start_soon(self.serve)

        try:
            try:
                reply = await _run_handing_over(_attempt(effect), on_block)
            finally:
                # Forget the effect before replying: once the reply is on the wire the
                # coordinator may legitimately send the same id again (a new execution).
                self.scopes.pop(msg.effect_id, None)
                self.sinks.pop(msg.effect_id, None)
            if blocked.effect is not None:
                blocked.reply = reply  # sent by ``serve`` once out of the scope
                return True
            return await self._answer_here(reply)
        finally:
            if effect.closers is not None and blocked.effect is not effect:
                effect.run_closers()  # (a blocked effect's: by ``serve``, after its reply)

    async def _answer_here(self, reply: Result | Failure) -> bool:
        """Send an effect's reply from this task; True if the send blocked (then a new reader
        started, as for an effect that blocks: this task cannot read meanwhile). The usual
        reply goes whole at once (``send_nowait``: no coroutine, no checkpoint — the read
        that follows is one)."""
        crash_point(CrashPoint.WORKER_BEFORE_RESULT)
        try:
            rest = self.channel.send_nowait(reply)
        except ProtocolError as exc:
            sending = self._refused(reply, exc)
        else:
            if rest is None:
                return False
            sending = self._send_rest(rest)
        handed_over = False

        def on_block() -> None:
            nonlocal handed_over
            handed_over = True
            self.nursery.start_soon(self.serve)

        await _run_handing_over(sending, on_block)
        return handed_over

    async def _reply(self, reply: Result | Failure) -> None:
        crash_point(CrashPoint.WORKER_BEFORE_RESULT)
        try:
            await self.channel.send(reply)
        except ProtocolError as exc:
            await self._refused(reply, exc)

    async def _refused(self, reply: Result | Failure, exc: ProtocolError) -> None:
        """After a reply's send failed: a result too large fails its effect, saying why (it was
        refused whole, before a byte went out); any other failure means the coordinator is
        gone — nobody can receive results any more."""
        try:
            if not (isinstance(reply, Result) and isinstance(exc, FrameTooLargeError)):
                raise exc
            err = RunFailedError(f"effect result too large to send: {exc.message}")
            await self.channel.send(failure_from_error(reply.effect_id, err.to_wire()))
        except ProtocolError:
            self.nursery.cancel_scope.cancel()

    async def _send_rest(self, rest: memoryview) -> None:
        try:
            await self.channel.send_rest(rest)
        except ProtocolError:
            self.nursery.cancel_scope.cancel()  # the coordinator is gone

    def _admit(self, msg: Execute, scope: trio.CancelScope) -> bool:
        """Record ``msg``'s effect as running here; False for a duplicate of a running one."""
        if msg.effect_id in self.scopes:
            return False
        crash_point(CrashPoint.WORKER_BEFORE_EXECUTE)
        self.scopes[msg.effect_id] = scope
        return True


@types.coroutine
def _run_handing_over(
    effect: Coroutine[Any, Any, T], on_block: Callable[[], None]
) -> Generator[Any, Any, T]:
    """Await ``effect`` in this task, calling ``on_block`` just before it first blocks.

    The same as ``await effect`` (whatever it yields to trio is trio's, sent back as it
    was), except that its first step is taken here: so ``on_block`` runs only for an effect
    that blocks — a new reader is started only then, since this task cannot read meanwhile.
    """
    # (``done.value`` is returned as it is: ``typing.cast`` is a Python call, twice per effect)
    value: T
    try:
        trap = effect.send(None)
    except StopIteration as done:
        value = done.value
        return value
    on_block()
    while True:
        try:
            sent = yield trap
        except GeneratorExit:
            effect.close()
            raise
        except BaseException as exc:  # thrown in by trio (e.g. KeyboardInterrupt): pass it on
            try:
                trap = effect.throw(exc)
            except StopIteration as done:
                value = done.value
                return value
        else:
            try:
                trap = effect.send(sent)
            except StopIteration as done:
                value = done.value
                return value


def _preload(modules: tuple[str, ...]) -> None:
    """Import the executors the run will use now, while the coordinator prepares its work."""
    for module in modules:
        try:
            importlib.import_module(module)
        except Exception:  # the effect that needs it reports the failure
            continue


async def serve_worker(channel: FrameChannel, preload: tuple[str, ...] = ()) -> None:
    """Handshake on ``channel``, import ``preload``, and serve it until EOF or Shutdown."""
    await channel.send(Hello(pid=os.getpid(), protocol=PROTOCOL_VERSION))
    _preload(preload)
    async with trio.open_nursery() as nursery:
        worker = _Worker(channel, nursery)
        # Readers and effects descend from this task, so they inherit the link (workers.remote).
        CURRENT_LINK.set(worker.link)
        await worker.serve()


async def run_worker(fd: int, preload: tuple[str, ...] = ()) -> None:
    """Serve the inherited AF_UNIX socket ``fd`` (we take ownership of it)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM, fileno=fd)
    stream = trio.SocketStream(trio.socket.from_stdlib_socket(sock))
    channel = FrameChannel(stream)
    try:
        await serve_worker(channel, preload)
    except ProtocolError:
        pass  # the coordinator vanished before the handshake; nothing ran
    finally:
        with trio.CancelScope(shield=True):
            await channel.aclose()
