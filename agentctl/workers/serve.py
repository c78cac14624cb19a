"""The worker main loop: handshake, then run each ``Execute`` in its own task (the reading
task runs it and hands the reading over to a new task).

Invariants:
- the first frame a worker sends is ``Hello``; afterwards exactly one ``Result`` or
  ``Failure`` per ``Execute`` (unless the worker dies, which the coordinator treats as loss),
  preceded by any ``RemoteHandle`` frames the effect sent mid-way (``workers.remote``);
- effects run concurrently in the worker's nursery, each under its own cancel scope, so
  ``Cancel`` stops exactly one effect (reported uncertain: it had started);
- socket EOF or a protocol error cancels every effect — killing their process trees — and the
  worker exits; ``Shutdown`` stops reading, lets running effects finish, then exits;
- an executor bug never kills the worker: it becomes an uncertain ``Failure``;
- an effect's ``timeout_seconds`` starts once its executor is loaded; when it expires the
  effect is uncertain, unless its executor reported that its request never left
  (``executors.watch_dispatch``): then it failed, retryably;
- each effect has its own stream sink (``stream.py``): a ``StreamAck`` wakes the effect whose
  fragment it answers, and only that one.
"""

from __future__ import annotations

import importlib
import os
import socket

import trio

from agentctl.crashpoints import CrashPoint, crash_point
from agentctl.errors import AgentctlError, CancelledRunError, RunFailedError
from agentctl.mailbox.frames import FrameChannel, ProtocolError
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
    failure_from_error,
)
from agentctl.workers.executors import (
    CURRENT_DISPATCH,
    Dispatch,
    ExecOutcome,
    FailedEffect,
    UncertainEffect,
    executor_for,
)
from agentctl.workers.remote import CURRENT_LINK, HandleLink
from agentctl.workers.stream import StreamSink, bind_sink
from agentctl.workers.tracecontext import CURRENT_TRACEPARENT, traceparent


async def _execute(msg: Execute, scope: trio.CancelScope) -> ExecOutcome | None:
    """Run ``msg``'s executor under ``scope``; None if the scope cancelled it.

    One scope per effect serves both ways it can end early: a ``Cancel`` from the coordinator
    cancels it, and its deadline is the effect's timeout, set once the executor is loaded (the
    timeout bounds the effect, not the worker's first import of its executor).
    """
    with scope:
        executor = executor_for(msg)
        scope.deadline = trio.current_time() + msg.timeout_seconds
        return await executor(msg)
    return None


async def _reply_for(msg: Execute, scope: trio.CancelScope) -> Result | Failure:
    dispatch = Dispatch()
    CURRENT_DISPATCH.set(dispatch)
    CURRENT_TRACEPARENT.set(traceparent(msg.trace_id, msg.effect_id))
    try:
        outcome = await _execute(msg, scope)
        if outcome is not None:
            return Result(
                effect_id=msg.effect_id,
                output=outcome.output,
                usage=outcome.usage,
                artifacts=outcome.artifacts,
                protocol=outcome.protocol,
            )
        if trio.current_time() < scope.deadline:
            cancelled = CancelledRunError("effect cancelled after it started")
            return failure_from_error(msg.effect_id, cancelled.to_wire(), uncertain=True)
        expired = f"effect timed out after {msg.timeout_seconds} s"
        if dispatch.known_unsent:
            # Nothing left this process: the effect did not happen, so trying again is safe.
            raise RunFailedError(f"{expired}, before its request was sent", retryable=True)
        raise UncertainEffect(RunFailedError(expired))
    except UncertainEffect as exc:
        wire = exc.error.to_wire()
        return failure_from_error(msg.effect_id, wire, uncertain=True, protocol=exc.protocol)
    except FailedEffect as exc:
        return failure_from_error(msg.effect_id, exc.error.to_wire(), protocol=exc.protocol)
    except AgentctlError as exc:
        return failure_from_error(msg.effect_id, exc.to_wire())
    except Exception as exc:  # an executor bug: the effect may have half-happened
        err = AgentctlError(f"internal worker error: {type(exc).__name__}: {exc}")
        return failure_from_error(msg.effect_id, err.to_wire(), uncertain=True)


class _Worker:
    def __init__(self, channel: FrameChannel, nursery: trio.Nursery) -> None:
        self.channel = channel
        self.nursery = nursery
        self.scopes: dict[str, trio.CancelScope] = {}
        self.sinks: dict[str, StreamSink] = {}
        self.link = HandleLink(channel)

    async def run_effect(self, msg: Execute) -> None:
        scope = self.scopes[msg.effect_id]
        sink = self.sinks[msg.effect_id] = StreamSink(self.channel, msg.effect_id)
        bind_sink(sink)
        try:
            reply = await _reply_for(msg, scope)
        finally:
            # Forget the effect before replying: once the reply is on the wire the
            # coordinator may legitimately send the same id again (a new execution).
            self.scopes.pop(msg.effect_id, None)
            self.sinks.pop(msg.effect_id, None)
        crash_point(CrashPoint.WORKER_BEFORE_RESULT)
        try:
            await self._send(reply)
        except ProtocolError:
            # The coordinator is gone: nobody can receive results any more.
            self.nursery.cancel_scope.cancel()

    async def _send(self, reply: Result | Failure) -> None:
        try:
            await self.channel.send(reply)
        except ProtocolError as exc:
            if isinstance(reply, Result) and "exceeds" in exc.message:
                err = RunFailedError(f"effect result too large to send: {exc.message}")
                await self.channel.send(failure_from_error(reply.effect_id, err.to_wire()))
            else:
                raise

    async def serve(self) -> None:
        """Read messages until EOF, error or Shutdown, or until an ``Execute``: this task then
        runs that effect itself and a new task takes over the reading.

        So an effect starts in the scheduler pass that read its frame (a fast one is answered
        in it), and the new reader's start is off the effect's path. Only one task reads at a
        time: this one reads nothing more once it has handed over.
        """
        while True:
            try:
                msg = await self.channel.receive()
            except ProtocolError:
                msg = None
            if msg is None:
                self.nursery.cancel_scope.cancel()
                return
            if isinstance(msg, Shutdown):
                return
            if isinstance(msg, Execute):
                if self._admit(msg):
                    self.nursery.start_soon(self.serve)
                    await self.run_effect(msg)
                    return
            elif isinstance(msg, Cancel) and msg.effect_id in self.scopes:
                self.scopes[msg.effect_id].cancel()
            elif isinstance(msg, StreamAck) and msg.effect_id in self.sinks:
                self.sinks[msg.effect_id].acknowledge_nowait(msg)
            elif isinstance(msg, RemoteHandleAck):
                self.link.acknowledge(msg)

    def _admit(self, msg: Execute) -> bool:
        """Record ``msg``'s effect as running here; False for a duplicate of a running one."""
        if msg.effect_id in self.scopes:
            return False
        crash_point(CrashPoint.WORKER_BEFORE_EXECUTE)
        self.scopes[msg.effect_id] = trio.CancelScope()
        return True


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
