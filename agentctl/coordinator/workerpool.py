"""The coordinator's pool of worker processes and its supervision of them.

Invariants:
- workers start lazily, on the first ``execute`` that finds no idle worker (or on ``warm``),
  up to ``size``, adopting prestarted ones first (``workerproc``); each gets one AF_UNIX
  socketpair (the child end inherited as ``--fd N``) and must say ``Hello`` before it is
  used (else, or if cancelled first, it is killed); effects go to the least-loaded live one;
- a worker's mid-effect ``RemoteHandle`` is persisted through the effect's ``on_handle`` and
  acknowledged (``RemoteHandleAck``) only after it returned, so the worker goes on only once
  the handle is durable;
- every ``execute`` resolves exactly once: with the worker's ``Result``/``Failure`` or — when
  the worker dies, its socket fails or it breaks the protocol — with an uncertain
  ``Failure`` of type ``WorkerLost`` (the effect may have happened); that worker's tree is
  SIGKILLed and the next ``execute`` starts a fresh one;
- on exit: ``Shutdown`` to every worker, a short grace, then SIGTERM → grace → SIGKILL of each
  worker tree and session, so no worker or grandchild outlives the pool (a reaped worker's own
  pid is never signalled: only its session); one closing after ``Shutdown`` is not lost;
- no task reads a worker's socket for the pool: the callers waiting on a worker take turns,
  one reading at a time (``_await_reply``), so a lone effect's reply reaches its caller in
  the pass that read it; while any effect is pending exactly one caller reads or has been
  woken to, replies for other callers resolve them, and a reply nobody waits for (its caller
  was cancelled; one given ``on_cut`` waits a grace for it) is dropped; a worker that died
  idle is found at the first write of an ``Execute`` (``FrameUnsentError``: no byte left):
  it is lost, the effect goes to another;
- ``execute`` picks an idle worker without the pool lock (no await between choosing and
  recording the effect); the lock serialises starting workers;
- a ``StreamFragment`` from a worker goes to the sink its effect's ``execute`` was given, and
  the worker gets its ``StreamAck`` only after that sink returned (the fragment is durable);
  a fragment nobody listens for, or one the sink could not keep, is refused;
- with a ``registry_path`` the live workers' (pid, create time) are kept in a small JSON file,
  so a later coordinator can kill a dead one's workers (``workerproc.kill_stale_workers``),
  matching pid AND create time so that a recycled pid is never hit.
"""

from __future__ import annotations

import contextlib
import math
import signal
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field

import trio

from agentctl.coordinator.poolwait import (
    CutSink,
    FragmentSink,
    HangWatch,
    PendingReply,
    lost_failure,
    oversized_failure,
    unsent_failure,
)
from agentctl.coordinator.poolwait import HandleSink as HandleSink  # part of the pool's API
from agentctl.coordinator.workerproc import (
    ChildProcess,
    launch_worker,
    signal_tree,
    signal_worker,
    wait_all,
    write_worker_registry,
)
from agentctl.coordinator.workerstart import Prestarted
from agentctl.core import registry
from agentctl.envknobs import answer_grace_s
from agentctl.errors import AgentctlError, InvalidOperationError, PersistenceError
from agentctl.ledger.owners import start_time_for_record
from agentctl.mailbox import frames, wirecache
from agentctl.mailbox.frames import FrameChannel, FrameUnsentError, ProtocolError
from agentctl.mailbox.messages import (
    Cancel,
    Execute,
    Failure,
    Hello,
    Message,
    RemoteHandle,
    RemoteHandleAck,
    Result,
    Shutdown,
    StreamAck,
    StreamFragment,
)

HELLO_TIMEOUT_S = 60.0
SHUTDOWN_GRACE_S = 2.0
TERM_GRACE_S = 1.0
# How long a cancelled call waits for its worker to answer the ``Cancel`` (stopping the
# effect: killing its process tree) before it counts as unanswered (the effect uncertain).
CUT_ANSWER_GRACE_S = 2.0


@dataclass
class _Worker:
    """One worker process of the pool: its channel and the replies it still owes."""

    proc: ChildProcess
    channel: FrameChannel
    create_time: float
    pending: dict[str, PendingReply] = field(default_factory=dict)
    lost: bool = False
    reading: bool = False  # one waiting ``execute`` is reading the socket

    @property
    def pid(self) -> int:
        return self.proc.pid


class WorkerPool:
    """Dispatches ``Execute`` messages to worker processes; see the module invariants."""

    def __init__(
        self,
        size: int,
        nursery: trio.Nursery,
        registry_path: str | None,
        env: Mapping[str, str] | None,
        preload: Sequence[str] = (),
        prestarted: Prestarted | None = None,
    ) -> None:
        if size < 1:
            raise InvalidOperationError(f"worker pool size must be at least 1, got {size}")
        self.size = size
        self._nursery = nursery
        self._registry_path = registry_path
        self._env = None if env is None else dict(env)
        self._preload = tuple(preload)
        self._prestarted = prestarted
        self._workers: list[_Worker] = []
        self._lock = trio.Lock()
        self._closed = False
        self._hang_watch = HangWatch(self._expire_hung)
        # Beyond an effect's timeout, before its worker counts as hung (read here, not at import)
        self.answer_grace_s = answer_grace_s()
        self.trace_id: str | None = None  # stamped on each Execute (the provider's traceparent)

    def worker_pids(self) -> list[int]:
        return [w.pid for w in self._workers if not w.lost]

    def _addressed(self, msg: Execute) -> Execute:
        """``msg`` with its executor named and the run's trace id, copied once at most."""
        update: dict[str, str] = {}
        # Name the executor from this process's registry, so a kind registered at run time
        # (not known to a fresh worker) still runs; an unknown kind is the worker's to refuse.
        executor = registry.executor_for_operation(msg.operation) if msg.executor is None else None
        if executor is not None:
            update["executor"] = executor
        if msg.trace_id is None and self.trace_id is not None:
            update["trace_id"] = self.trace_id
        return msg.model_copy(update=update) if update else msg

    async def execute(
        self,
        msg: Execute,
        *,
        on_fragment: FragmentSink | None = None,
        on_handle: HandleSink | None = None,
        on_cut: CutSink | None = None,
    ) -> Result | Failure:
        """Run one effect on a worker and return its reply (WorkerLost if the worker died).

        A worker that has not answered ``answer_grace_s`` after the effect's own timeout is
        hung: it is killed and the effect resolves as uncertain, so nothing waits forever.
        ``on_fragment`` receives the effect's stream fragments, one at a time, in order.
        ``on_handle`` persists the remote handles the effect reports on its way; the worker is
        acknowledged once it returns (a refusal tells the worker the handle is not durable).
        ``on_cut`` receives the worker's answer to a cancelled call (``_cut``).
        """
        if msg.executor is None or (msg.trace_id is None and self.trace_id is not None):
            msg = self._addressed(msg)  # (the coordinator's own messages need no copy)
        reply = PendingReply(on_fragment, on_handle, msg.timeout_seconds + self.answer_grace_s)
        worker = await self._send_execute(msg, reply)
        try:
            # The deadline is the pool's one timer's (``_expire_hung``): no scope per call.
            await self._await_reply(worker, reply)
        except BaseException:
            await self._cut(worker, msg.effect_id, reply, on_cut)
            raise
        assert reply.value is not None
        return reply.value

    async def _cut(
        self, worker: _Worker, effect_id: str, reply: PendingReply, on_cut: CutSink | None
    ) -> None:
        """``execute`` of ``effect_id`` was cancelled: have the worker stop it. With ``on_cut``,
        wait for the worker's answer (shielded, ``CUT_ANSWER_GRACE_S`` at most) and hand it
        over: one saying the request never left (``is_cancelled_unsent``) tells the caller
        the effect did not happen; without an answer, it may have."""
        with trio.CancelScope(shield=True):
            with trio.move_on_after(CUT_ANSWER_GRACE_S if on_cut else TERM_GRACE_S):
                if reply.value is None:
                    await self._send_or_lose(worker, Cancel(effect_id=effect_id))
                if on_cut is not None:
                    await self._await_reply(worker, reply)
            worker.pending.pop(effect_id, None)  # a later answer is dropped
        if on_cut is not None and reply.value is not None:
            on_cut(reply.value)

    async def _send_execute(self, msg: Execute, reply: PendingReply) -> _Worker:
        """Record ``msg``'s call on a worker and send it; the worker it went to. One found closed
        at the first write with only this call pending died idle: lost, the call tried elsewhere
        (``size`` times, then a plain failure: it never ran). Other failures: WorkerLost."""
        tries = 0
        while True:
            # Without the lock if a worker can take it now (no await between choosing and
            # recording the call; the lock is needed only to start a worker).
            worker = None if self._lock.locked() else self._choose(msg.effect_id)
            if worker is None:
                worker = await self._assign(msg.effect_id, reply)
            else:
                self._record(worker, msg.effect_id, reply)
            try:
                await worker.channel.send(msg)
            except FrameUnsentError as exc:
                if len(worker.pending) == 1:  # only this call: taken back before the loss
                    del worker.pending[msg.effect_id]
                    self._lose(worker, f"worker closed its socket ({exc.message})")
                    tries += 1
                    if tries <= self.size:
                        continue
                    reply.resolve(unsent_failure(msg.effect_id, exc.message))  # never ran
                    return worker
                self._lose(worker, exc.message)
            except frames.FrameTooLargeError as exc:  # nothing left: the worker stays
                worker.pending.pop(msg.effect_id, None)
                reply.resolve(oversized_failure(msg.effect_id, exc.message))  # never ran
            except ProtocolError as exc:
                self._lose(worker, exc.message)
            except BaseException:  # cancelled: nobody will wait for this call's reply
                worker.pending.pop(msg.effect_id, None)
                if worker.channel.torn:  # part of the frame left: the stream is unusable
                    self._lose(worker, "an Execute was cut off by cancellation")
                raise
            return worker

    async def _await_reply(self, worker: _Worker, reply: PendingReply) -> None:
        """Wait for ``reply``, reading the worker's frames while no other caller reads them.

        The caller that reads gets its own reply in the pass that read it (no reader task to
        wake it). Whoever stops reading — answered, cancelled or lost — wakes one other
        waiting caller to read on, so while any effect is pending somebody reads.
        """
        # A lone effect's reply cannot be there before the worker ran it: wait, then read. Lone
        # in the whole pool, not only on its worker: an awaited receive may spin (ADR 0014), and
        # callers waiting on several workers at once would spin one after another.
        awaited = len(worker.pending) == 1 and self._lone_pending()
        try:
            while reply.value is None:
                if worker.reading:
                    await reply.park()
                    awaited = False
                    continue
                worker.reading = True
                try:
                    msg = await worker.channel.receive(awaited=awaited)
                except ProtocolError as exc:
                    self._lose(worker, exc.message)
                    msg = None
                finally:
                    worker.reading = False
                if isinstance(msg, Result | Failure):  # the usual frame: a reply, delivered here
                    other = worker.pending.pop(msg.effect_id, None)
                    if other is not None:  # else its caller gave up: a late reply is dropped
                        other.resolve(msg)
                elif not worker.lost:
                    await self._deliver_other(worker, msg)
                awaited = False
        finally:
            if not worker.reading:
                for other in worker.pending.values():
                    if other is not reply:  # still pending itself when cancelled
                        other.nudge()  # one that is not parked re-checks before it parks
                        break

    async def cancel(self, effect_id: str) -> None:
        """Ask the worker running ``effect_id`` to cancel it; its reply resolves ``execute``."""
        for worker in self._workers:
            if effect_id in worker.pending and not worker.lost:
                await self._send_or_lose(worker, Cancel(effect_id=effect_id))

    async def _send_or_lose(
        self, worker: _Worker, msg: Cancel | Shutdown | RemoteHandleAck
    ) -> None:
        try:
            await worker.channel.send(msg)
        except ProtocolError as exc:
            self._lose(worker, exc.message)

    async def warm(self, wanted: int) -> None:
        """Start the workers ``wanted`` concurrent effects will use, all at once.

        Lazily, the first effects of a wide batch would start workers one after another (each
        waits for its Hello under the pool lock); starting them together pays that once.
        """
        async with self._lock:
            live = [w for w in self._workers if not w.lost]
            missing = min(wanted, self.size) - len(live)
            if missing <= 0 or self._closed:
                return
            async with trio.open_nursery() as nursery:
                for _ in range(missing):
                    nursery.start_soon(self._spawn)

    async def _assign(self, effect_id: str, reply: PendingReply) -> _Worker:
        """The worker ``reply``'s effect is recorded on, started under the lock if need be."""
        async with self._lock:
            worker = self._choose(effect_id)
            if worker is None:
                worker = await self._spawn()
            self._record(worker, effect_id, reply)
            return worker

    def _record(self, worker: _Worker, effect_id: str, reply: PendingReply) -> None:
        worker.pending[effect_id] = reply
        self._hang_watch.expect(reply, self._nursery)

    def _expire_hung(self, now: float) -> float:
        """Lose each worker with a call past its deadline; the earliest deadline left."""
        earliest = math.inf
        for worker in list(self._workers):
            for reply in worker.pending.values():
                if reply.deadline <= now:
                    self._lose(worker, f"no answer within {reply.limit:g}s")
                    break
                earliest = min(earliest, reply.deadline)
        return earliest

    def _lone_pending(self) -> bool:
        """Whether one reply, in the whole pool, is awaited."""
        return sum(len(worker.pending) for worker in self._workers) == 1

    def _choose(self, effect_id: str) -> _Worker | None:
        """An idle worker, else None if another may start, else the least loaded one."""
        if self._closed:
            raise InvalidOperationError("the worker pool is closed")
        for worker in self._workers:
            if effect_id in worker.pending:
                raise InvalidOperationError(f"effect {effect_id} is already executing")
        for worker in self._workers:
            # A worker that died idle is found at the effect's first write (``_send_execute``).
            if not worker.pending and not worker.lost:
                return worker
        live = [w for w in self._workers if not w.lost]
        if len(live) < self.size:
            return None  # start another (under the lock)
        return min(live, key=lambda w: len(w.pending))

    async def _spawn(self) -> _Worker:
        # A worker started before the run (same environment, same preload) is adopted first.
        taken = self._prestarted.take() if self._prestarted is not None else None
        if taken is None:
            proc, parent_sock = await launch_worker(self._preload, self._env)
        else:
            proc, parent_sock = taken
        channel = FrameChannel(trio.SocketStream(trio.socket.from_stdlib_socket(parent_sock)))
        worker = _Worker(proc, channel, start_time_for_record(proc.pid))
        await self._handshake(worker)
        self._workers.append(worker)
        self._write_registry()
        return worker

    async def _handshake(self, worker: _Worker) -> None:
        reason, greeted = "no Hello before the start-up timeout", False
        try:
            with trio.move_on_after(HELLO_TIMEOUT_S):
                try:
                    hello = await worker.channel.receive()
                    greeted = isinstance(hello, Hello)
                    reason = "it exited before its Hello" if hello is None else "no Hello first"
                except ProtocolError as exc:
                    reason = exc.message
        finally:
            if not greeted:  # cancelled too: a worker in no list yet is nobody else's to end
                signal_tree(worker.pid, signal.SIGKILL)
                await self._reap(worker)
        if not greeted:
            raise AgentctlError(f"worker process {worker.pid} failed to start: {reason}")

    async def _deliver_other(self, worker: _Worker, msg: Message | None) -> None:
        """Act on a frame of ``worker``'s that is not a reply (``_await_reply`` delivers those);
        None is its clean EOF. A broken worker is lost."""
        try:
            if isinstance(msg, StreamFragment):
                # Possibly another effect's fragment: the reading caller's cancellation must
                # not cut its sink short and leave the worker waiting for the ack.
                worker.reading = True  # the ack goes before any other caller reads on
                try:
                    with trio.CancelScope(shield=True):
                        await self._keep_fragment(worker, msg)
                finally:
                    worker.reading = False
            elif isinstance(msg, RemoteHandle):
                # Persisted aside: the reading goes on serving the worker's other effects.
                self._nursery.start_soon(self._persist_handle, worker, msg)
            elif msg is None:
                self._lose(worker, "worker closed its socket")
            else:
                self._lose(worker, f"unexpected {msg.type!r} frame from a worker")
        except ProtocolError as exc:
            self._lose(worker, exc.message)

    async def _keep_fragment(self, worker: _Worker, fragment: StreamFragment) -> None:
        """Hand a fragment to its effect's sink, then acknowledge it (refused if not kept).

        Awaited in the reader on purpose: fragments stay in order, and the worker — waiting
        for this acknowledgement — reads no more of its answer until the fragment is durable.
        """
        reply = worker.pending.get(fragment.effect_id)
        ack = StreamAck(effect_id=fragment.effect_id, index=fragment.index)
        if reply is None or reply.on_fragment is None:
            ack = ack.model_copy(update={"accepted": False, "error": "nobody keeps its stream"})
        else:
            try:
                await reply.on_fragment(fragment)
            except AgentctlError as exc:
                ack = ack.model_copy(update={"accepted": False, "error": exc.message})
        await worker.channel.send(ack)

    async def _persist_handle(self, worker: _Worker, handle: RemoteHandle) -> None:
        reply = worker.pending.get(handle.effect_id)
        ack = RemoteHandleAck(effect_id=handle.effect_id, persisted=False)
        if reply is None or reply.on_handle is None:
            ack = ack.model_copy(update={"error": "no running effect records remote handles"})
        else:
            try:
                await reply.on_handle(handle)
                ack = ack.model_copy(update={"persisted": True})
            except AgentctlError as exc:
                ack = ack.model_copy(update={"error": exc.message})
        await self._send_or_lose(worker, ack)

    def _lose(self, worker: _Worker, reason: str) -> None:
        """Resolve the worker's effects as WorkerLost, kill its tree, reap it in background."""
        if worker.lost:
            return
        worker.lost = True
        pending, worker.pending = worker.pending, {}
        for effect_id, reply in pending.items():
            reply.resolve(lost_failure(effect_id, worker.pid, reason))
        signal_worker(worker.proc, signal.SIGKILL)
        worker.channel.abandon()  # a caller reading or sending now returns at once
        self._workers = [w for w in self._workers if w is not worker]
        # Best effort, as at close: the hang timer loses workers too, and an error there would
        # end the pool's nursery; a stale entry is harmless (matched by pid and start time).
        with contextlib.suppress(PersistenceError):
            self._write_registry()
        self._nursery.start_soon(self._reap, worker)

    async def _reap(self, worker: _Worker) -> None:
        with trio.CancelScope(shield=True):
            await worker.proc.wait()
            await worker.channel.aclose()

    async def aclose(self) -> None:
        """Shutdown, grace, then SIGTERM → grace → SIGKILL (``_lose``) every worker tree."""
        async with self._lock:
            self._closed = True
        workers = [w for w in self._workers if not w.lost]
        for worker in workers:
            with trio.move_on_after(TERM_GRACE_S):
                await self._send_or_lose(worker, Shutdown())
        await wait_all([w.proc for w in workers], SHUTDOWN_GRACE_S)
        for worker in workers:
            signal_worker(worker.proc, signal.SIGTERM)
        await wait_all([w.proc for w in workers], TERM_GRACE_S)
        for worker in workers:  # its SIGKILL: what is left of the worker's tree and session
            self._lose(worker, "worker pool closed")
        await wait_all([w.proc for w in workers], None)  # beside ``_reap``: waits serialise
        # Best effort: every worker is dead now, and a stale entry is harmless (matched by pid
        # and start time); failing here (a full disk) must not mask why the pool closed.
        with contextlib.suppress(PersistenceError):
            self._write_registry()

    def _write_registry(self) -> None:
        if self._registry_path is not None:
            live = [(w.pid, w.create_time) for w in self._workers if not w.lost]
            write_worker_registry(self._registry_path, live)


@contextlib.asynccontextmanager
async def open_worker_pool(
    size: int,
    *,
    registry_path: str | None = None,
    env: Mapping[str, str] | None = None,
    preload: Sequence[str] = (),
    prestarted: Prestarted | None = None,
) -> AsyncIterator[WorkerPool]:
    """A worker pool of at most ``size`` processes, shut down and reaped on exit. Its workers
    import the ``preload`` modules as they start; ``prestarted`` ones are used first."""
    wirecache.prepare_wire_models()  # stored schemas before the first frame (ADR 0013 item 8)
    body_error: BaseException | None = None
    async with trio.open_nursery() as nursery:
        pool = WorkerPool(size, nursery, registry_path, env, preload, prestarted)
        try:
            yield pool
        except BaseException as exc:
            # Re-raised outside the nursery so callers see their own exception, not a group.
            body_error = exc
        finally:
            with trio.CancelScope(shield=True):
                await pool.aclose()
            nursery.cancel_scope.cancel()
    if body_error is not None:
        raise body_error
