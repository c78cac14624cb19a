"""The coordinator's async door to the ledger: one ``RunLedger``, one thread at a time.

Invariants: every threaded ledger call holds a capacity-1 limiter and an inline one runs only
while no threaded call is in flight, so the one ledger connection is never used concurrently;
each call is one ledger transaction, and it is not abandoned when the caller is cancelled (a
commit in flight finishes, so what the ledger says is always what happened).

Reads and long steps run in a worker thread. The short transactions of the effect protocol
(``_run_short``) run on the trio thread itself when the connection is free: a thread hop costs
about half a WAL commit, and these calls are on every effect's path (ADR 0011). They keep the
thread path's cancellation semantics — a caller cancelled before the call starts nothing, one
cancelled during it still gets its commit — and yield to the scheduler afterwards at least
every ``YIELD_EVERY_S``, so the cancel watcher, signal handlers and a serve's other drives run
within milliseconds. Not after every call: a scheduler pass (an ``epoll`` poll, the run queue,
resuming the drive's whole coroutine stack) costs ~30k instructions and a system call, and a
memory.write chain step makes one such call. A drive that parked since (``waited``: a lone
effect's wait for its worker's reply) has let everything else run, so the interval restarts.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

import trio

from agentctl.coordinator.events import EventTap
from agentctl.core.jsonvalue import JsonObject, JsonValue
from agentctl.core.longterm import Candidate
from agentctl.ledger.artifacts.store import IngestResult
from agentctl.ledger.audit import AuditEvent
from agentctl.ledger.effects import EffectRecord
from agentctl.ledger.held_calls import CallGate, GatedCall
from agentctl.ledger.interface import RunLedger
from agentctl.ledger.model import (
    BatchCommit,
    BudgetDenial,
    CallRecord,
    CancelRun,
    EffectOutcome,
    EffectStartBatch,
    IngestRequest,
    LiveState,
    MemoryEntry,
    ProtocolReport,
    RequestBatch,
    SettleRun,
    TaskStartBatch,
)
from agentctl.ledger.remote import RemoteHandleRecord
from agentctl.ledger.runs import RunRecord
from agentctl.ledger.streams import NewStreamEvent, StreamEventRecord

# Evidence appears in signatures only: its models load with the remote-protocol effects.
if TYPE_CHECKING:
    from agentctl.core.protocols import ProtocolEvidence

T = TypeVar("T")

# The longest a run of inline ledger calls goes without yielding to the trio scheduler.
YIELD_EVERY_S = 0.002


class Store:
    """Async facade over ``RunLedger``: the same steps, awaited in the ledger's thread."""

    def __init__(self, ledger: RunLedger, tap: EventTap | None = None) -> None:
        self.ledger = ledger
        self._limiter = trio.CapacityLimiter(1)
        # ``_run`` calls in flight (waiting for the limiter or in their thread): while there are
        # none, nothing else can touch the connection during an inline call, which never yields.
        self._threaded = 0
        self._tap = tap  # the live event stream's one hook: it reads what each call committed
        self._yield_at = 0.0  # ``time.monotonic()`` from which ``_run_short`` yields again

    async def _run(self, fn: Callable[[], T]) -> T:
        # abandon_on_cancel stays False: a cancelled caller still waits for its commit.
        self._threaded += 1
        try:
            if self._tap is None:
                return await trio.to_thread.run_sync(fn, limiter=self._limiter)
            result = await trio.to_thread.run_sync(
                self._tap.wrap(fn, self.ledger), limiter=self._limiter
            )
        finally:
            self._threaded -= 1
        self._tap.flush()
        return result

    async def _run_short(self, fn: Callable[[], T]) -> T:
        """``_run`` for a short write transaction: inline when no thread holds the connection."""
        if self._tap is not None:  # the event stream reads what each call committed, at once
            return await self._run(fn)
        await trio.lowlevel.checkpoint_if_cancelled()
        if self._threaded:  # a read (the cancel watcher's) is in its thread: wait for it
            return await self._run(fn)
        # No limiter taken: trio runs nothing else until ``fn`` returns, and no thread holds or
        # waits for the connection (taking and releasing the limiter cost ~15 calls a step).
        result = fn()
        now = time.monotonic()
        if now >= self._yield_at:
            self._yield_at = now + YIELD_EVERY_S
            await trio.lowlevel.cancel_shielded_checkpoint()
        return result

    def waited(self) -> None:
        """The caller has just come back from a real wait (parked until a worker's reply):
        everything else ran then, so the yield interval of the inline calls starts afresh.
        A shell chain step thus pays no scheduler pass between its commit and its ``Execute``
        — it parks for the reply right after sending it."""
        self._yield_at = time.monotonic() + YIELD_EVERY_S

    async def load_live(self, run_id: str) -> LiveState:
        return await self._run(lambda: self.ledger.load_live(run_id))

    async def read_outputs(
        self, run_id: str, task_ids: Sequence[str] | None
    ) -> dict[str, JsonValue]:
        return await self._run(lambda: self.ledger.read_outputs(run_id, task_ids))

    async def get_run(self, run_id: str) -> RunRecord:
        return await self._run(lambda: self.ledger.get_run(run_id))

    async def is_cancel_requested(self, run_id: str) -> bool:
        return await self._run(lambda: self.ledger.is_cancel_requested(run_id))

    async def cancel_run(self, stop: CancelRun) -> None:
        await self._run(lambda: self.ledger.cancel_run(stop))

    async def settle_run(self, settle: SettleRun) -> None:
        await self._run(lambda: self.ledger.settle_run(settle))

    async def record_requests(self, batch: RequestBatch) -> tuple[BudgetDenial, ...]:
        return await self._run_short(lambda: self.ledger.record_requests(batch))

    async def start_tasks(self, batch: TaskStartBatch) -> None:
        await self._run_short(lambda: self.ledger.start_tasks(batch))

    async def start_effects(self, batch: EffectStartBatch) -> None:
        await self._run_short(lambda: self.ledger.start_effects(batch))

    async def record_and_start_call(self, call: CallRecord) -> JsonObject | None:
        return await self._run_short(lambda: self.ledger.record_and_start_call(call))

    async def gate_call(self, gated: GatedCall) -> CallGate:
        return await self._run(lambda: self.ledger.gate_call(gated))

    async def audit_after(self, run_id: str, after: int) -> Sequence[AuditEvent]:
        return await self._run(lambda: self.ledger.audit_after(run_id, after))

    async def append_stream_event(self, event: NewStreamEvent) -> StreamEventRecord | None:
        return await self._run(lambda: self.ledger.append_stream_event(event))

    async def record_remote_handle(
        self, handle: RemoteHandleRecord, evidence: ProtocolEvidence | None = None
    ) -> None:
        await self._run(lambda: self.ledger.record_remote_handle(handle, evidence))

    async def finish_effects(self, outcomes: Sequence[EffectOutcome]) -> None:
        await self._run_short(lambda: self.ledger.finish_effects(outcomes))

    async def commit_batch(self, batch: BatchCommit) -> None:
        await self._run_short(lambda: self.ledger.commit_batch(batch))

    async def record_protocol(self, report: ProtocolReport) -> None:
        await self._run(lambda: self.ledger.record_protocol(report))

    async def recorded_result(self, effect_id: str) -> JsonValue:
        return await self._run(lambda: self.ledger.recorded_result(effect_id))

    async def call_at(
        self, run_id: str, task_id: str, attempt: int, ordinal: int
    ) -> EffectRecord | None:
        """The effect an attempt recorded at ``ordinal``, if any (whatever its identity)."""
        listed = await self._run(lambda: self.ledger.list_effects(run_id, task_id))
        found = (e for e in listed.effects if (e.attempt, e.ordinal) == (attempt, ordinal))
        return next(found, None)

    async def long_term_get(self, namespace: str, key: str, now: str) -> MemoryEntry:
        return await self._run(lambda: self.ledger.long_term_get(namespace, key, now))

    async def long_term_candidates(self, namespace: str, now: str) -> Sequence[Candidate]:
        return await self._run(lambda: self.ledger.long_term_candidates(namespace, now))

    async def open_artifacts(self) -> None:
        await self._run(self.ledger.open_artifacts)

    async def ingest_artifact(self, request: IngestRequest) -> IngestResult:
        return await self._run(lambda: self.ledger.ingest_artifact(request))


class GroupCommitter:
    """Commits effect outcomes as they arrive, several to a transaction under load.

    Each ``commit`` returns only once its outcome is durable, so confirmed results stay as
    early as possible; outcomes that arrive while a commit is in flight share the next one.
    """

    def __init__(self, store: Store) -> None:
        self.store = store
        self._send, self._recv = trio.open_memory_channel[
            tuple[EffectOutcome, trio.Event, list[BaseException]]
        ](math.inf)

    async def commit(self, outcome: EffectOutcome) -> None:
        done, errors = trio.Event(), list[BaseException]()
        await self._send.send((outcome, done, errors))
        await done.wait()
        if errors:
            raise errors[0]

    def close(self) -> None:
        self._send.close()

    async def serve(self) -> None:
        async with self._recv:
            async for first in self._recv:
                group = [first]
                while True:
                    try:
                        group.append(self._recv.receive_nowait())
                    except (trio.WouldBlock, trio.EndOfChannel):
                        break
                try:
                    await self._write_group(group)
                finally:
                    for _outcome, done, _errors in group:
                        done.set()

    async def _write_group(
        self, group: list[tuple[EffectOutcome, trio.Event, list[BaseException]]]
    ) -> None:
        try:
            await self.store.finish_effects([outcome for outcome, _done, _errors in group])
        except BaseException as exc:
            for _outcome, _done, errors in group:
                errors.append(exc)
            if not isinstance(exc, Exception):
                raise
