"""Executing one started effect: in a worker or in the coordinator, then its outcome.

The driver hands this module a ``StartedEffect`` (its ``started`` row is durable) and gets back
a ``Settled`` task result. Worker effects go to the pool; effects on state the coordinator owns
run through ``local.LOCAL_OPERATIONS``. A confirmed mutation's files are ingested into the
artifact store (``ingest.Ingester``, shared with agents' tool calls) before the task can
complete.

Invariants:
- each outcome becomes durable exactly once: either at once through the group committer (so a
  confirmed result survives a crash of the rest of the batch), or — for a batch of one effect —
  deferred into ``Settled.outcome`` and committed with the task's completion; a crash between
  the two leaves a confirmed outcome whose task ``resume`` completes (``settle_recorded``),
  a write's file referenced as it would have been (``ingest``'s invariants);
- resolved secret values are redacted from the output and error before anything is recorded;
- a remote handle a worker reports mid-effect (an A2A task id) is committed before the worker
  is told to go on (``_handle_sink``), so what was started remotely is never forgotten;
- a task's own write that found its disk full (``TaskDiskFullError``) is a failed effect — it
  did not happen — but not a failed task: the settled step stops the run, which ``resume``
  continues with a fresh attempt once space is freed;
- a result that breaks the task's output contract fails the task (the effect still succeeded);
  so do files over the run's ``maxArtifactBytes``: refused before they are stored, the
  effect stays succeeded (it happened) while the task and the run fail.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agentctl.coordinator.clock import Clock
from agentctl.coordinator.ingest import Ingester, written_file
from agentctl.coordinator.local import LOCAL_OPERATIONS, LocalResult, recorded_delta
from agentctl.coordinator.poolref import workers
from agentctl.coordinator.steps import Settled, StartedEffect
from agentctl.coordinator.store import GroupCommitter, Store
from agentctl.core import evaluate as ev
from agentctl.core import registry
from agentctl.core.jsonvalue import JsonObject, JsonValue
from agentctl.core.longterm import Candidate
from agentctl.core.plan import PlannedTask
from agentctl.core.redact import Redactor
from agentctl.crashpoints import CrashPoint, crash_point
from agentctl.errors import TaskDiskFullError
from agentctl.ledger.artifacts.refs import ArtifactRef
from agentctl.ledger.budget import BudgetRefusedError
from agentctl.ledger.effects import EffectRecord
from agentctl.ledger.model import EffectOutcome, MemoryEntry, MemoryPut
from agentctl.ledger.remote import RemoteHandleRecord

if TYPE_CHECKING:  # a pure run imports neither the pool nor its wire (``poolref``)
    from agentctl.coordinator.workerpool import HandleSink, WorkerPool
    from agentctl.core.protocols import ProtocolEvidence
    from agentctl.mailbox.messages import Execute, Failure, RemoteHandle, Result


@dataclass(frozen=True)
class Execution:
    """What executing an effect produced, before it is recorded."""

    status: str  # succeeded | failed | uncertain
    output: JsonValue = None
    error: str | None = None
    retryable: bool = False
    usage: Mapping[str, int] | None = None
    memory_delta: JsonObject | None = None
    long_term_put: MemoryPut | None = None
    artifacts: tuple[ArtifactRef, ...] = ()
    lease_ids: tuple[str, ...] = ()
    # The effect succeeded but the task fails anyway (its artifacts exceed the budget).
    task_error: str | None = None
    protocol: ProtocolEvidence | None = None  # what a remote-protocol effect said on the wire
    # The effect failed for want of disk space where the task writes: the run stops, resumable.
    stops_run: bool = False


@dataclass(frozen=True)
class _Local:
    """``local.LocalHost`` for one effect: the batch's memory snapshot and ledger lookups."""

    store: Store
    clock: Clock
    memory: Mapping[str, JsonValue]

    async def long_term_get(self, namespace: str, key: str) -> MemoryEntry:
        return await self.store.long_term_get(namespace, key, self.clock.now())

    async def long_term_candidates(self, namespace: str) -> Sequence[Candidate]:
        return await self.store.long_term_candidates(namespace, self.clock.now())


@dataclass
class EffectRunner:
    """Executes started effects of one run and records their outcomes."""

    store: Store
    pool: WorkerPool | None
    clock: Clock
    run_id: str
    trace_id: str
    ingester: Ingester  # where confirmed mutations' files go (the run's artifact store)
    # Started effects a stop cut short before their request left the worker (the worker said
    # so), each with its error: the stop ends them ``cancelled``, not ``uncertain``.
    unsent: dict[str, str] = dataclasses.field(default_factory=dict)

    async def run(
        self, step: StartedEffect, memory: Mapping[str, JsonValue], committer: GroupCommitter | None
    ) -> Settled:
        """Execute ``step``; commit its outcome through ``committer``, or defer it (None)."""
        eff = step.effect
        if eff.in_process:
            done = _from_local(await self._local(step, memory))
        else:
            done = await self._remote(step)
        if eff.secrets:
            redactor = Redactor(eff.secrets)
            output, error = redactor.redact(done.output), redactor.redact(done.error)
            done = dataclasses.replace(done, output=output, error=error)
        outcome = self._outcome(step, done)
        if committer is None and not eff.in_process:
            # A lone worker effect parked until its reply (``WorkerPool.execute`` waits for the
            # worker's socket to turn readable; only a worker lost at the send answers at once,
            # delaying the next forced yield by one interval at most) or spun for it, and spun
            # receives give the scheduler a pass at least every millisecond (``FrameChannel``,
            # ADR 0014): no forced yield between the commit that carries this outcome and the
            # next ``Execute``.
            self.store.waited()
        if committer is not None:
            await committer.commit(outcome)
            crash_point(CrashPoint.AFTER_OUTCOME)
        return settle(step, done, None if committer is not None else outcome)

    def _outcome(self, step: StartedEffect, done: Execution) -> EffectOutcome:
        budget = step.effect.budget
        # An uncertain outcome settles nothing: what it spent is unknown, so its reservation
        # (an upper bound) stays active until an operator reconciles it (``budget_release``).
        known = budget and done.status != "uncertain"
        spent = {dim: (done.usage or {}).get(dim, 0) for dim in budget} if known else None
        # A row this drive inserted: the ledger audits its status change from these columns
        # (None: recorded by an earlier drive — the ledger reads them). Either way the event
        # names this drive's trace; the row keeps the requester's.
        fresh = step.fresh
        return EffectOutcome(
            self.run_id,
            step.effect.effect_id,
            done.status,
            self.clock.now(),
            done.output,
            done.error,
            spent,
            self.trace_id,
            done.long_term_put,
            protocol=done.protocol,
            task_id=step.task.id if fresh else None,
            attempt=step.attempt if fresh else 0,
            operation=step.effect.operation if fresh else None,
            held=budget if fresh and budget else None,
        )

    async def _local(self, step: StartedEffect, memory: Mapping[str, JsonValue]) -> LocalResult:
        local = LOCAL_OPERATIONS[step.effect.operation]
        return await local.execute(step.effect.request, _Local(self.store, self.clock, memory))

    async def _remote(self, step: StartedEffect) -> Execution:
        from agentctl.mailbox.messages import Execute, Result  # with the pool: a worker effect

        msg = Execute(
            effect_id=step.effect.effect_id,
            run_id=self.run_id,
            task_id=step.task.id,
            attempt=step.attempt,
            operation=step.effect.operation,
            request=step.effect.request,
            timeout_seconds=step.effect.timeout_s,
            # Named here, so the pool sends the message as built (no copy per effect).
            executor=registry.executor_for_operation(step.effect.operation),
            trace_id=self.trace_id,
        )
        reply = await self._dispatch(step, msg)
        crash_point(CrashPoint.AFTER_RESULT)
        wire = reply.protocol
        if not isinstance(reply, Result):
            return _failed(reply)
        output: JsonObject = dict(reply.output)
        if not reply.artifacts:  # a shell step's usual reply: no files
            return Execution("succeeded", output, usage=reply.usage, protocol=wire)
        try:
            files = await self.ingester.ingest(step.task.id, reply.artifacts, step.effect.effect_id)
        except BudgetRefusedError as exc:
            used = reply.usage
            return Execution("succeeded", output, usage=used, task_error=exc.message, protocol=wire)
        return Execution(
            "succeeded",
            output,
            usage=reply.usage,
            artifacts=files.refs,
            lease_ids=files.lease_ids,
            protocol=wire,
        )

    async def _dispatch(self, step: StartedEffect, msg: Execute) -> Result | Failure:
        """The worker's reply to ``msg``. A stop that cuts it short (the drive is cancelled)
        passes through; if the worker answered that its request never left, the effect is
        noted in ``unsent`` first, for the stop to record it as not done."""
        cut: list[Result | Failure] = []
        try:
            pool = workers(self.pool)
            return await pool.execute(msg, on_handle=self._handle_sink(), on_cut=cut.append)
        except BaseException:
            from agentctl.mailbox.messages import is_cancelled_unsent

            answer = cut[0] if cut else None
            if answer is not None and is_cancelled_unsent(answer):
                secrets, error = step.effect.secrets, answer.error.message
                self.unsent[msg.effect_id] = Redactor(secrets).redact(error) if secrets else error
            raise

    def _handle_sink(self) -> HandleSink:
        """Commits the remote handles an effect reports before its worker goes on."""

        async def persist(handle: RemoteHandle) -> None:
            record = RemoteHandleRecord(
                effect_id=handle.effect_id,
                run_id=self.run_id,
                protocol=handle.protocol,
                peer=handle.peer,
                remote_task_id=handle.remote_task_id,
                context_id=handle.context_id,
                created_at=self.clock.now(),
            )
            await self.store.record_remote_handle(record, handle.protocol_evidence)

        return persist


def _failed(reply: Failure) -> Execution:
    """A worker's failure reply: uncertain or failed, with what a failed one still produced
    (a process's exit code and output: recorded as the effect's result and the task's
    output). An uncertain reply never carries an output: nothing it says is confirmed."""
    if reply.uncertain:
        error, retryable = reply.error.message, reply.error.retryable
        return Execution("uncertain", error=error, retryable=retryable, protocol=reply.protocol)
    full = reply.error.type == TaskDiskFullError.__name__
    return Execution(
        "failed",
        None if reply.output is None else dict(reply.output),
        reply.error.message,
        retryable=reply.error.retryable,
        usage=reply.usage or None,
        protocol=reply.protocol,
        stops_run=full,
    )


def _from_local(local: LocalResult) -> Execution:
    return Execution(
        local.status,
        local.output,
        local.error,
        memory_delta=local.memory_delta,
        long_term_put=local.long_term_put,
    )


def settle(step: StartedEffect, done: Execution, outcome: EffectOutcome | None) -> Settled:
    """The task's result from its effect's execution (the output contract checked here)."""
    state, output, error = _judged(step, done)
    return Settled(
        step.task,
        step.attempt,
        state,
        output,
        error,
        decision=step.decision,
        input_digest=step.input_digest,
        retryable=done.retryable,
        memory_delta=done.memory_delta,
        artifacts=done.artifacts,
        lease_ids=done.lease_ids,
        effect_id=step.effect.effect_id,
        outcome=outcome,
        stops_run=done.stops_run,
    )


def settle_recorded(
    task: PlannedTask, attempt: int, effect: EffectRecord, result: JsonValue
) -> Settled:
    """A task found mid-flight on resume whose effect's outcome is on record: the effect's own
    result, or an operator's ``applied`` one. Either is held to the task's output contract as a
    live outcome is (``_judged``): what an operator vouched for is what the effect did, and the
    task delivers it only if the contract holds. A write's file (``written``) is referenced by
    the completion as the live run's would have been (``Ingester.recovered``)."""
    try:
        ev.check_contract(task, result)
    except ev.TaskFailure as exc:
        return Settled(task, attempt, "failed", None, exc.message, effect_id=effect.effect_id)
    delta = recorded_delta(effect.operation, effect.request)
    eid, written = effect.effect_id, written_file(effect.operation, result)
    return Settled(
        task, attempt, "succeeded", result, memory_delta=delta, effect_id=eid, written=written
    )


def _judged(step: StartedEffect, done: Execution) -> tuple[str, JsonValue, str | None]:
    if done.status == "uncertain":
        return "waiting_for_effect", None, f"effect outcome uncertain: {done.error}"
    if done.status != "succeeded":
        # A failed effect's output (a process that exited non-zero) is the failed task's
        # output, unchecked: the contract is for what a task delivers, not for its failures.
        return "failed", done.output, done.error
    if done.task_error is not None:
        return "failed", None, f"task {step.task.id}: {done.task_error}"
    try:
        ev.check_contract(step.task, done.output)
    except ev.TaskFailure as exc:
        return "failed", None, exc.message
    return "succeeded", done.output, None
