"""``LedgerService``: ``RunLedger``'s methods, the same for every backend (DESIGN.md §5).

Each method runs exactly one transaction through the backend's ``Transactions`` runner
(``ledger/runner.py``: ``run_write`` for writes, ``run_read`` for one snapshot) and one
composition of the private ``*_txn`` functions inside it. How a transaction is opened,
retried and committed is the backend's alone (``SqliteLedger``: ``BEGIN IMMEDIATE``;
``PgLedger``: SERIALIZABLE, retried). The artifact store (the content-addressed directory the
runner names) is opened lazily, with its crash recovery, on first use.
Invariant: no driver object, row or connection is returned to the caller.
"""

from __future__ import annotations

import uuid
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Self

import agentctl.ledger.budget as budget
import agentctl.ledger.effects as effects
import agentctl.ledger.held_calls as held_calls
import agentctl.ledger.leases as leases
import agentctl.ledger.lifecycle as lifecycle
import agentctl.ledger.longterm as longterm
import agentctl.ledger.protocols as protocols
import agentctl.ledger.reconcile as reconcile
import agentctl.ledger.remote as remote
import agentctl.ledger.runs as runs
import agentctl.ledger.steps as steps
import agentctl.ledger.streams as streams
import agentctl.ledger.tasks as tasks
from agentctl.core.jsonvalue import JsonObject, JsonValue
from agentctl.core.longterm import Candidate, EmbeddingIdentity
from agentctl.ledger.artifacts.store import (
    ArtifactStore,
    IngestOwner,
    IngestResult,
    blob_problem,
    open_artifact_store,
)
from agentctl.ledger.audit import AuditEvent, list_audit
from agentctl.ledger.migrations import MigrationResult
from agentctl.ledger.model import (
    ApprovalDecision,
    BatchCommit,
    BudgetDenial,
    CallRecord,
    CancelRun,
    DerivedRun,
    EffectOutcome,
    EffectStartBatch,
    GcRequest,
    IngestRequest,
    LiveState,
    MemoryEntry,
    MemoryPut,
    Owner,
    ProtocolReport,
    ReconcileRequest,
    RequestBatch,
    ResumeClaim,
    SettleRun,
    SourceSnapshot,
    TaskStartBatch,
)
from agentctl.ledger.reconcile import ReconciliationRecord
from agentctl.ledger.runner import Transactions
from agentctl.ledger.runs import NewRun, RunRecord
from agentctl.ledger.sql import Db

if TYPE_CHECKING:  # loaded by the methods that use them: a run needs none of these
    import agentctl.ledger.encryption as encryption
    import agentctl.ledger.queue as queue
    import agentctl.ledger.stats as stats
    from agentctl.core.protocols import ProtocolEvidence
    from agentctl.ledger.approvals import ApprovalRecord
    from agentctl.ledger.housekeeping import GarbageCollection
    from agentctl.ledger.report import RunReport
    from agentctl.ledger.upgrade import RunUpgrade


class LedgerService(ABC):
    """The backend-neutral ``RunLedger`` methods over one ``Transactions`` runner.

    A backend subclasses it for ``location``, ``database_stats``, ``migration``, the
    encryption commands and ``open_fenced`` (a second connection), which differ by backend;
    one caller (thread) at a time. With a ``fence`` (a ``serve`` drive), the runner is
    ``FencedTransactions``: every write checks the claim's token first.
    """

    def __init__(self, tx: Transactions, fence: queue.Fence | None = None) -> None:
        self._tx: Transactions = tx
        if fence is not None:  # a serve drive only: the queue's statements load then
            from agentctl.ledger.fencing import FencedTransactions

            self._tx = FencedTransactions(tx, fence)
        self._cas: ArtifactStore | None = None

    @property
    @abstractmethod
    def location(self) -> Path: ...

    @abstractmethod
    def database_stats(self) -> stats.DatabaseStats: ...

    @abstractmethod
    def migration(self) -> MigrationResult: ...

    @abstractmethod
    def encryption_inventory(self) -> encryption.EncryptionReport: ...

    @abstractmethod
    def change_encryption(
        self, change: encryption.EncryptionChange
    ) -> encryption.EncryptionReport: ...

    @abstractmethod
    def open_fenced(self, fence: queue.Fence) -> Self:
        """Another ledger on the same database for one claimed run, its writes fenced."""

    def close(self) -> None:
        self._tx.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------- run lifecycle

    def create_run(self, run: NewRun, task_order: Sequence[str], owner: Owner, now: str) -> None:
        self._tx.run_write(
            lambda conn: lifecycle.create_run_txn(conn, run, tuple(task_order), owner, now)
        )

    def create_derived_run(self, derived: DerivedRun) -> None:
        self._tx.run_write(lambda conn: lifecycle.create_derived_run_txn(conn, derived))

    def claim_for_resume(
        self, run_ref: str, owner: Owner, now: str, *, trace_id: str | None = None
    ) -> ResumeClaim:
        return self._tx.run_write(
            lambda conn: lifecycle.claim_for_resume_txn(conn, run_ref, owner, now, trace_id)
        )

    def acquire_lease(self, run_id: str, owner: Owner, now: str) -> None:
        self._tx.run_write(
            lambda conn: leases.acquire_run_lease_txn(
                conn, run_id, owner.pid, owner.create_time, now
            )
        )

    def release_lease(self, run_id: str, pid: int, now: str) -> None:
        self._tx.run_write(lambda conn: leases.release_run_lease_txn(conn, run_id, pid, now))

    # ---------------------------------------------------------------- the run queue

    def submit_run(self, run: NewRun, task_order: Sequence[str], now: str) -> None:
        import agentctl.ledger.queue as queue

        def body(conn: Db) -> None:
            lifecycle.refuse_held_inverses_txn(conn, run, task_order)
            runs.create_run_txn(conn, run, tuple(task_order), now)
            queue.mark_queued_txn(conn, run.run_id, now)

        self._tx.run_write(body)

    def claim_runs(self, claim: queue.ClaimRequest) -> tuple[queue.ClaimedRun, ...]:
        import agentctl.ledger.queue as queue

        return self._tx.run_write(lambda conn: queue.claim_runs_txn(conn, claim))

    def heartbeat(self, beat: queue.Heartbeat) -> tuple[str, ...]:
        import agentctl.ledger.queue as queue

        return self._tx.run_write(lambda conn: queue.heartbeat_txn(conn, beat))

    def queue_busy(self, now: str) -> bool:
        import agentctl.ledger.queue as queue

        return self._tx.run_read(lambda conn: queue.queue_busy(conn, now))

    def set_run_state(
        self, run_id: str, state: str, now: str, *, trace_id: str | None = None
    ) -> None:
        self._tx.run_write(
            lambda conn: runs.set_run_state_txn(conn, run_id, state, now, trace_id=trace_id)
        )

    def request_cancel(self, run_ref: str, now: str, *, trace_id: str | None = None) -> RunRecord:
        # The flag first, in a write a busy coordinator cannot starve (its every step rewrites
        # the run's row); then its audit event and the cancellation of an undriven run.
        run_id = self._tx.run_flag_write(
            lambda conn: lifecycle.raise_cancel_flag_txn(conn, run_ref, now)
        )
        return self._tx.run_write(
            lambda conn: lifecycle.request_cancel_txn(conn, run_id, now, trace_id)
        )

    def is_cancel_requested(self, run_id: str) -> bool:
        return self._tx.run_read(lambda conn: runs.is_cancel_requested(conn, run_id))

    def cancel_run(self, stop: CancelRun) -> None:
        self._tx.run_write(lambda conn: lifecycle.cancel_run_txn(conn, stop))

    def settle_run(self, settle: SettleRun) -> None:
        self._tx.run_write(lambda conn: lifecycle.settle_run_txn(conn, settle))

    def upgrade_run(self, upgrade: RunUpgrade) -> None:
        from agentctl.ledger.upgrade import upgrade_run_txn

        self._tx.run_write(lambda conn: upgrade_run_txn(conn, upgrade))

    def load_live(self, run_id: str) -> LiveState:
        return self._tx.run_read(lambda conn: lifecycle.read_live(conn, run_id))

    def read_outputs(self, run_id: str, task_ids: Sequence[str] | None) -> dict[str, JsonValue]:
        return self._tx.run_read(lambda conn: tasks.read_outputs(conn, run_id, task_ids))

    # ---------------------------------------------------------------- the effect protocol

    def record_requests(self, batch: RequestBatch) -> tuple[BudgetDenial, ...]:
        return self._tx.run_write(lambda conn: steps.record_requests_txn(conn, batch))

    def start_tasks(self, batch: TaskStartBatch) -> None:
        self._tx.run_write(lambda conn: steps.start_tasks_txn(conn, batch))

    def start_effects(self, batch: EffectStartBatch) -> None:
        self._tx.run_write(lambda conn: steps.start_effects_txn(conn, batch))

    def record_and_start_call(self, call: CallRecord) -> JsonObject | None:
        return self._tx.run_write(lambda conn: steps.record_and_start_call_txn(conn, call))

    def gate_call(self, gated: held_calls.GatedCall) -> held_calls.CallGate:
        return self._tx.run_write(lambda conn: held_calls.gate_call_txn(conn, gated))

    def append_stream_event(
        self, event: streams.NewStreamEvent
    ) -> streams.StreamEventRecord | None:
        return self._tx.run_write(lambda conn: streams.append_stream_event_txn(conn, event))

    def audit_after(self, run_id: str, after: int) -> Sequence[AuditEvent]:
        return self._tx.run_read(lambda conn: list_audit(conn, run_id, after))

    def finish_effects(self, outcomes: Sequence[EffectOutcome]) -> None:
        self._tx.run_write(lambda conn: steps.finish_effects_txn(conn, outcomes))

    def commit_batch(self, batch: BatchCommit) -> None:
        self._tx.run_write(lambda conn: steps.commit_batch_txn(conn, batch))

    def record_protocol(self, report: ProtocolReport) -> None:
        self._tx.run_write(
            lambda conn: protocols.record_protocol_txn(
                conn, report.effect_id, report.evidence, report.now
            )
        )

    def recorded_result(self, effect_id: str) -> JsonValue:
        return self._tx.run_read(lambda conn: lifecycle.read_recorded_result(conn, effect_id))

    def long_term_get(self, namespace: str, key: str, now: str) -> MemoryEntry:
        return self._tx.run_read(lambda conn: lifecycle.read_memory(conn, namespace, key, now))

    def long_term_candidates(self, namespace: str, now: str) -> Sequence[Candidate]:
        return self._tx.run_read(lambda conn: longterm.candidates(conn, namespace, now))

    def long_term_put(self, put: MemoryPut, now: str) -> None:
        self._tx.run_write(lambda conn: longterm.put_txn(conn, put, now))

    def long_term_reindex(self, namespace: str, identity: EmbeddingIdentity, now: str) -> int:
        return self._tx.run_write(lambda conn: longterm.reindex_txn(conn, namespace, identity, now))

    def record_remote_handle(
        self, handle: remote.RemoteHandleRecord, evidence: ProtocolEvidence | None = None
    ) -> None:
        def body(conn: Db) -> None:
            remote.record_handle_txn(conn, handle)
            if evidence is not None:
                protocols.record_protocol_txn(conn, handle.effect_id, evidence, handle.created_at)

        return self._tx.run_write(body)

    def remote_handle(self, effect_id: str) -> remote.RemoteHandleRecord | None:
        return self._tx.run_read(lambda conn: remote.get_handle(conn, effect_id))

    # ---------------------------------------------------------------- operators

    def list_approvals(self, run_ref: str, status: str | None = "pending") -> stats.ApprovalList:
        import agentctl.ledger.stats as stats

        return self._tx.run_read(
            lambda conn: stats.approval_list(conn, runs.find_run(conn, run_ref).run_id, status)
        )

    def get_approval(self, approval_id: str) -> ApprovalRecord:
        import agentctl.ledger.approvals as approvals

        return self._tx.run_read(lambda conn: approvals.get_approval(conn, approval_id))

    def resolve_approval(self, decision: ApprovalDecision) -> ApprovalRecord:
        import agentctl.ledger.approvals as approvals

        d = decision

        def body(conn: Db) -> ApprovalRecord:
            return approvals.resolve_approval_txn(
                conn, d.approval_id, d.approve, d.actor, d.reason, d.now, trace_id=d.trace_id
            )

        return self._tx.run_write(body)

    def reconcile_effect(self, request: ReconcileRequest) -> ReconciliationRecord:
        r = request

        def body(conn: Db) -> ReconciliationRecord:
            return reconcile.reconcile_effect_txn(
                conn,
                r.effect_id,
                r.status,
                r.actor,
                r.reason,
                r.evidence,
                r.result,
                r.compensation_effect_id,
                r.now,
                reconciliation_id=r.reconciliation_id,
                trace_id=r.trace_id,
                grounds=reconcile.Grounds(r.authorization, r.result_schema),
                tool_output=r.tool_output,
                rates=r.model_rates,
            )

        return self._tx.run_write(body)

    def unresolved_effects(self, run_id: str) -> tuple[effects.EffectRecord, ...]:
        return self._tx.run_read(lambda conn: tuple(reconcile.unresolved_effects(conn, run_id)))

    def has_live_driver(self, run_id: str, now: str) -> bool:
        return self._tx.run_read(lambda conn: leases.has_live_owner(conn, run_id, now))

    # ---------------------------------------------------------------- reads

    def get_run(self, run_id: str) -> RunRecord:
        return self._tx.run_read(lambda conn: runs.get_run(conn, run_id))

    def find_run(self, run_ref: str) -> RunRecord:
        return self._tx.run_read(lambda conn: runs.find_run(conn, run_ref))

    def list_runs(
        self, state: str | None = None, limit: int | None = None, workflow: str | None = None
    ) -> stats.RunList:
        import agentctl.ledger.stats as stats

        def body(conn: Db) -> stats.RunList:
            found = runs.list_runs(conn, state=state, limit=limit, workflow=workflow)
            return stats.RunList(tuple(found))

        return self._tx.run_read(body)

    def run_report(self, run_ref: str) -> RunReport:
        from agentctl.ledger.report import run_report

        return self._tx.run_read(lambda conn: run_report(conn, runs.find_run(conn, run_ref).run_id))

    def inspect_run(self, run_ref: str) -> stats.RunInspection:
        import agentctl.ledger.stats as stats

        return self._tx.run_read(
            lambda conn: stats.run_inspection(conn, runs.find_run(conn, run_ref).run_id)
        )

    def list_effects(self, run_ref: str, task_id: str | None = None) -> stats.EffectList:
        import agentctl.ledger.stats as stats

        return self._tx.run_read(
            lambda conn: stats.effect_list(conn, runs.find_run(conn, run_ref).run_id, task_id)
        )

    def inspect_effect(self, effect_id: str) -> stats.EffectInspection:
        import agentctl.ledger.stats as stats

        return self._tx.run_read(lambda conn: stats.effect_inspection(conn, effect_id))

    def find_effect_id(self, effect_ref: str) -> str:
        return self._tx.run_read(lambda conn: effects.find_effect_id(conn, effect_ref))

    def load_source(self, run_ref: str) -> SourceSnapshot:
        return self._tx.run_read(lambda conn: lifecycle.read_source(conn, run_ref))

    # ---------------------------------------------------------------- artifacts

    def _store(self) -> ArtifactStore:
        if self._cas is None:
            self._cas = open_artifact_store(self._tx)
        return self._cas

    def _gc_store(self, dry_run: bool) -> ArtifactStore:
        """GC's store (not kept): it reports the ``tmp/`` leftovers it removes, so recovery
        keeps them; a dry run changes nothing, so no recovery at all."""
        if self._cas is not None:
            return self._cas
        return open_artifact_store(self._tx, recover=not dry_run, clear_tmp=False)

    def open_artifacts(self) -> None:
        self._store()

    def ingest_artifact(self, request: IngestRequest) -> IngestResult:
        """Meter the file's bytes as ``artifactBytes`` (refused over the limit), then store it
        (``written``: the still stored blob of those bytes is leased instead)."""
        r = request
        lease = r.lease_id or f"ingest-{uuid.uuid4()}"
        refused: list[JsonObject] = []

        def meter(conn: Db, size: int) -> bool:
            # Reserved and settled with the blob row: one transaction per file, not three.
            # A reservation id recorded before (this file's first ingestion) counts nothing.
            amounts = {"artifactBytes": size}
            refused.clear()  # a retried transaction decides afresh
            trace, task = r.trace_id, r.task_id  # audited under the task whose file it is
            got = budget.reserve_budget_txn(
                conn, r.run_id, lease, amounts, r.now, trace_id=trace, task_id=task
            )
            if not got.granted:  # the overrun commits; the bytes are not kept
                refused.append(got.exceeded or {"dimension": "artifactBytes"})
                return False
            budget.settle_budget_txn(
                conn, r.run_id, lease, amounts, r.now, trace_id=trace, task_id=task
            )
            return True

        owner = IngestOwner(r.run_id, r.task_id, lease)
        store = self._store()
        stored = None if r.written is None else store.lease_stored(r.written, r.now, owner, meter)
        if stored is None and not refused:
            stored = store.ingest_metered(r.path, r.now, owner, meter, r.written)
        if stored is None:
            raise budget.BudgetRefusedError(refused[0])
        return stored

    def blob_intact(self, digest: str, size_bytes: int) -> bool:
        return blob_problem(self._store().blob_path(digest), digest, size_bytes) is None

    def list_artifacts(
        self, run_ref: str | None = None, task_id: str | None = None
    ) -> stats.ArtifactList:
        import agentctl.ledger.stats as stats

        def body(conn: Db) -> stats.ArtifactList:
            # "" is a run id that matches nothing (not found), never "no --run filter"
            run_id = None if run_ref is None else runs.find_run(conn, run_ref).run_id
            return stats.artifact_list(conn, run_id, task_id)

        return self._tx.run_read(body)

    def inspect_artifact(self, digest: str) -> stats.ArtifactInspection:
        import agentctl.ledger.stats as stats

        return self._tx.run_read(lambda conn: stats.artifact_inspection(conn, digest))

    def find_artifact_digest(self, digest_ref: str) -> str:
        from agentctl.ledger.artifacts.refs import find_blob_digest

        return self._tx.run_read(lambda conn: find_blob_digest(conn, digest_ref))

    def verify_artifacts(self, now: str, digests: Sequence[str] | None = None) -> JsonObject:
        return self._store().verify(now, digests)

    def export_artifact(self, digest: str, destination: Path, overwrite: bool) -> JsonObject:
        return self._store().export(digest, destination, overwrite=overwrite)

    def refuse_own_state(self, destination: Path, doing: str) -> None:
        from agentctl.ledger.artifacts.destination import refuse_ledger_state

        tx = self._tx
        refuse_ledger_state(destination, tx.database_file, tx.artifacts_root, doing=doing)

    def own_state_paths(self) -> tuple[str, ...]:
        from agentctl.ledger.artifacts.destination import ledger_state_paths

        tx = self._tx
        return ledger_state_paths(tx.database_file, tx.artifacts_root, self.location)

    def collect_artifacts(self, request: GcRequest) -> JsonObject:
        from agentctl.ledger.artifacts.gc import run_gc

        r = request
        store = self._gc_store(r.dry_run)
        return run_gc(store, r.now, older_than_days=r.older_than_days, dry_run=r.dry_run)

    def collect_garbage(self, request: GcRequest) -> GarbageCollection:
        from agentctl.ledger.housekeeping import collect_garbage

        r = request
        days, dry = r.older_than_days, r.dry_run
        return collect_garbage(self._gc_store(dry), r.now, older_than_days=days, dry_run=dry)
