"""``SqliteLedger``: the SQLite implementation of ``RunLedger`` (DESIGN.md §5).

Each method opens exactly one transaction on the one connection (``BEGIN IMMEDIATE`` for
writes, a deferred snapshot for reads) and runs one composition of the private ``*_txn``
functions inside it. The artifact store (CAS beside the database file) is opened lazily, with
its crash recovery, on first use.
Invariants: no ``sqlite3`` object, row or connection is returned to the caller; a ledger
opened with a ``queue.Fence`` (a ``serve`` drive) checks the fence in every write
transaction, first (``_write``).
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path

import agentctl.ledger.approvals as approvals
import agentctl.ledger.budget as budget
import agentctl.ledger.effects as effects
import agentctl.ledger.encryption as encryption
import agentctl.ledger.held_calls as held_calls
import agentctl.ledger.lifecycle as lifecycle
import agentctl.ledger.longterm as longterm
import agentctl.ledger.protocols as protocols
import agentctl.ledger.queue as queue
import agentctl.ledger.reconcile as reconcile
import agentctl.ledger.remote as remote
import agentctl.ledger.runs as runs
import agentctl.ledger.stats as stats
import agentctl.ledger.steps as steps
import agentctl.ledger.streams as streams
import agentctl.ledger.tasks as tasks
from agentctl.core.jsonvalue import JsonObject, JsonValue
from agentctl.core.longterm import Candidate, EmbeddingIdentity
from agentctl.core.protocols import ProtocolEvidence
from agentctl.ledger.approvals import ApprovalRecord
from agentctl.ledger.artifacts.gc import run_gc
from agentctl.ledger.artifacts.store import (
    ArtifactStore,
    IngestOwner,
    IngestResult,
    blob_problem,
    open_artifact_store,
)
from agentctl.ledger.audit import AuditEvent, list_audit
from agentctl.ledger.connection import (
    DEFAULT_BUSY_TIMEOUT_MS,
    Database,
    open_database,
    open_sibling,
)
from agentctl.ledger.housekeeping import GarbageCollection, collect_garbage
from agentctl.ledger.migrations import MigrationResult
from agentctl.ledger.model import (
    ApprovalDecision,
    BatchCommit,
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
    SettleRun,
    SourceSnapshot,
    TaskStartBatch,
)
from agentctl.ledger.reconcile import ReconciliationRecord
from agentctl.ledger.report import RunReport, run_report
from agentctl.ledger.runs import NewRun, RunHead, RunRecord
from agentctl.ledger.sql import Db
from agentctl.ledger.upgrade import RunUpgrade, upgrade_run_txn


class SqliteLedger:
    """``RunLedger`` over one SQLite connection; one caller (thread) at a time."""

    def __init__(self, db: Database, fence: queue.Fence | None = None) -> None:
        self._db = db
        self._cas: ArtifactStore | None = None
        # A ledger opened for a run a ``serve`` claimed: every write checks the claim's token.
        self._fence = fence

    @contextlib.contextmanager
    def _write(self) -> Iterator[Db]:
        """The one write-transaction runner: with a fence, the token check comes first, in
        the same transaction, so a coordinator whose lease was taken over commits nothing."""
        with self._db.transaction() as conn:
            if self._fence is not None:
                queue.check_fence(conn, self._fence)
            yield conn

    @property
    def location(self) -> Path:
        return self._db.path

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> SqliteLedger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------- run lifecycle

    def create_run(self, run: NewRun, task_order: Sequence[str], owner: Owner, now: str) -> None:
        with self._write() as conn:
            lifecycle.create_run_txn(conn, run, tuple(task_order), owner, now)

    def create_derived_run(self, derived: DerivedRun) -> None:
        with self._write() as conn:
            lifecycle.create_derived_run_txn(conn, derived)

    def claim_for_resume(self, run_ref: str, owner: Owner, now: str) -> RunHead:
        with self._write() as conn:
            return lifecycle.claim_for_resume_txn(conn, run_ref, owner, now)

    def acquire_lease(self, run_id: str, owner: Owner, now: str) -> None:
        with self._write() as conn:
            runs.acquire_run_lease_txn(conn, run_id, owner.pid, owner.create_time, now)

    def release_lease(self, run_id: str, pid: int, now: str) -> None:
        with self._write() as conn:
            runs.release_run_lease_txn(conn, run_id, pid, now)

    # ---------------------------------------------------------------- the run queue

    def submit_run(self, run: NewRun, task_order: Sequence[str], now: str) -> None:
        with self._write() as conn:
            runs.create_run_txn(conn, run, tuple(task_order), now)
            queue.mark_queued_txn(conn, run.run_id, now)

    def open_fenced(self, fence: queue.Fence) -> SqliteLedger:
        """A second ledger on this database whose every write checks ``fence`` first."""
        return SqliteLedger(open_sibling(self._db), fence)

    def claim_runs(self, claim: queue.ClaimRequest) -> tuple[queue.ClaimedRun, ...]:
        with self._write() as conn:
            return queue.claim_runs_txn(conn, claim)

    def heartbeat(self, beat: queue.Heartbeat) -> tuple[str, ...]:
        with self._write() as conn:
            return queue.heartbeat_txn(conn, beat)

    def queue_busy(self, now: str) -> bool:
        with self._db.read() as conn:
            return queue.queue_busy(conn, now)

    def set_run_state(self, run_id: str, state: str, now: str) -> None:
        with self._write() as conn:
            runs.set_run_state_txn(conn, run_id, state, now)

    def request_cancel(self, run_ref: str, now: str) -> RunRecord:
        with self._write() as conn:
            return lifecycle.request_cancel_txn(conn, run_ref, now)

    def is_cancel_requested(self, run_id: str) -> bool:
        with self._db.read() as conn:
            return runs.is_cancel_requested(conn, run_id)

    def cancel_run(self, stop: CancelRun) -> None:
        with self._write() as conn:
            lifecycle.cancel_run_txn(conn, stop)

    def settle_run(self, settle: SettleRun) -> None:
        with self._write() as conn:
            lifecycle.settle_run_txn(conn, settle)

    def upgrade_run(self, upgrade: RunUpgrade) -> None:
        with self._write() as conn:
            upgrade_run_txn(conn, upgrade)

    def load_live(self, run_id: str) -> LiveState:
        with self._db.read() as conn:
            return lifecycle.read_live(conn, run_id)

    def read_outputs(self, run_id: str, task_ids: Sequence[str] | None) -> dict[str, JsonValue]:
        with self._db.read() as conn:
            return tasks.read_outputs(conn, run_id, task_ids)

    # ---------------------------------------------------------------- the effect protocol

    def record_requests(self, batch: RequestBatch) -> tuple[str, ...]:
        with self._write() as conn:
            return steps.record_requests_txn(conn, batch)

    def start_tasks(self, batch: TaskStartBatch) -> None:
        with self._write() as conn:
            steps.start_tasks_txn(conn, batch)

    def start_effects(self, batch: EffectStartBatch) -> None:
        with self._write() as conn:
            steps.start_effects_txn(conn, batch)

    def record_and_start_call(self, call: CallRecord) -> JsonObject | None:
        with self._write() as conn:
            return steps.record_and_start_call_txn(conn, call)

    def gate_call(self, gated: held_calls.GatedCall) -> held_calls.CallGate:
        with self._write() as conn:
            return held_calls.gate_call_txn(conn, gated)

    def append_stream_event(
        self, event: streams.NewStreamEvent
    ) -> streams.StreamEventRecord | None:
        with self._write() as conn:
            return streams.append_stream_event_txn(conn, event)

    def audit_after(self, run_id: str, after: int) -> Sequence[AuditEvent]:
        with self._db.read() as conn:
            return list_audit(conn, run_id, after)

    def finish_effects(self, outcomes: Sequence[EffectOutcome]) -> None:
        with self._write() as conn:
            steps.finish_effects_txn(conn, outcomes)

    def commit_batch(self, batch: BatchCommit) -> None:
        with self._write() as conn:
            steps.commit_batch_txn(conn, batch)

    def record_protocol(self, report: ProtocolReport) -> None:
        with self._write() as conn:
            protocols.record_protocol_txn(conn, report.effect_id, report.evidence, report.now)

    def recorded_result(self, effect_id: str) -> JsonValue:
        with self._db.read() as conn:
            return lifecycle.read_recorded_result(conn, effect_id)

    def long_term_get(self, namespace: str, key: str, now: str) -> MemoryEntry:
        with self._db.read() as conn:
            return lifecycle.read_memory(conn, namespace, key, now)

    def long_term_candidates(self, namespace: str, now: str) -> Sequence[Candidate]:
        with self._db.read() as conn:
            return longterm.candidates(conn, namespace, now)

    def long_term_put(self, put: MemoryPut, now: str) -> None:
        with self._write() as conn:
            longterm.put_txn(conn, put, now)

    def long_term_reindex(self, namespace: str, identity: EmbeddingIdentity, now: str) -> int:
        with self._write() as conn:
            return longterm.reindex_txn(conn, namespace, identity, now)

    def record_remote_handle(
        self, handle: remote.RemoteHandleRecord, evidence: ProtocolEvidence | None = None
    ) -> None:
        with self._write() as conn:
            remote.record_handle_txn(conn, handle)
            if evidence is not None:
                protocols.record_protocol_txn(conn, handle.effect_id, evidence, handle.created_at)

    def remote_handle(self, effect_id: str) -> remote.RemoteHandleRecord | None:
        with self._db.read() as conn:
            return remote.get_handle(conn, effect_id)

    # ---------------------------------------------------------------- operators

    def list_approvals(self, run_ref: str) -> stats.ApprovalList:
        with self._db.read() as conn:
            return stats.approval_list(conn, runs.find_run(conn, run_ref).run_id)

    def get_approval(self, approval_id: str) -> ApprovalRecord:
        with self._db.read() as conn:
            return approvals.get_approval(conn, approval_id)

    def resolve_approval(self, decision: ApprovalDecision) -> ApprovalRecord:
        d = decision
        with self._write() as conn:
            return approvals.resolve_approval_txn(
                conn, d.approval_id, d.approve, d.actor, d.reason, d.now, trace_id=d.trace_id
            )

    def reconcile_effect(self, request: ReconcileRequest) -> ReconciliationRecord:
        r = request
        with self._write() as conn:
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
            )

    def unresolved_effects(self, run_id: str) -> tuple[effects.EffectRecord, ...]:
        with self._db.read() as conn:
            return tuple(reconcile.unresolved_effects(conn, run_id))

    # ---------------------------------------------------------------- reads

    def get_run(self, run_id: str) -> RunRecord:
        with self._db.read() as conn:
            return runs.get_run(conn, run_id)

    def find_run(self, run_ref: str) -> RunRecord:
        with self._db.read() as conn:
            return runs.find_run(conn, run_ref)

    def list_runs(
        self, state: str | None = None, limit: int | None = None, workflow: str | None = None
    ) -> stats.RunList:
        with self._db.read() as conn:
            found = runs.list_runs(conn, state=state, limit=limit, workflow=workflow)
            return stats.RunList(tuple(found))

    def run_report(self, run_ref: str) -> RunReport:
        with self._db.read() as conn:
            return run_report(conn, runs.find_run(conn, run_ref).run_id)

    def inspect_run(self, run_ref: str) -> stats.RunInspection:
        with self._db.read() as conn:
            return stats.run_inspection(conn, runs.find_run(conn, run_ref).run_id)

    def list_effects(self, run_ref: str, task_id: str | None = None) -> stats.EffectList:
        with self._db.read() as conn:
            return stats.effect_list(conn, runs.find_run(conn, run_ref).run_id, task_id)

    def inspect_effect(self, effect_id: str) -> stats.EffectInspection:
        with self._db.read() as conn:
            return stats.effect_inspection(conn, effect_id)

    def load_source(self, run_ref: str) -> SourceSnapshot:
        with self._db.read() as conn:
            return lifecycle.read_source(conn, run_ref)

    def database_stats(self) -> stats.DatabaseStats:
        with self._db.read() as conn:
            return stats.database_stats(conn, self._db.path)

    def migration(self) -> MigrationResult:
        return self._db.migration

    def encryption_inventory(self) -> encryption.EncryptionReport:
        with self._db.read() as conn:
            return encryption.inventory(conn)

    def change_encryption(self, change: encryption.EncryptionChange) -> encryption.EncryptionReport:
        return encryption.change_encryption(self._db, change)

    # ---------------------------------------------------------------- artifacts

    def _store(self) -> ArtifactStore:
        if self._cas is None:
            self._cas = open_artifact_store(self._db)
        return self._cas

    def open_artifacts(self) -> None:
        self._store()

    def ingest_artifact(self, request: IngestRequest) -> IngestResult:
        """Meter the file's bytes as ``artifactBytes`` (refused over the limit), then store it."""
        r = request
        lease = f"ingest-{uuid.uuid4()}"
        refused: list[JsonObject] = []

        def meter(conn: Db, size: int) -> bool:
            if self._fence is not None:  # the ingest's own transaction writes for the run too
                queue.check_fence(conn, self._fence)
            # Reserved and settled with the blob row: one transaction per file, not three.
            amounts = {"artifactBytes": size}
            got = budget.reserve_budget_txn(conn, r.run_id, lease, amounts, r.now)
            if not got.granted:  # the overrun commits; the bytes are not kept
                refused.append(got.exceeded or {"dimension": "artifactBytes"})
                return False
            budget.settle_budget_txn(conn, r.run_id, lease, amounts, r.now)
            return True

        owner = IngestOwner(r.run_id, r.task_id, lease)
        stored = self._store().ingest_metered(r.path, r.now, owner, meter)
        if stored is None:
            raise budget.BudgetRefusedError(refused[0])
        return stored

    def blob_intact(self, digest: str, size_bytes: int) -> bool:
        return blob_problem(self._store().blob_path(digest), digest, size_bytes) is None

    def list_artifacts(
        self, run_ref: str | None = None, task_id: str | None = None
    ) -> stats.ArtifactList:
        with self._db.read() as conn:
            run_id = runs.find_run(conn, run_ref).run_id if run_ref else None
            return stats.artifact_list(conn, run_id, task_id)

    def inspect_artifact(self, digest: str) -> stats.ArtifactInspection:
        with self._db.read() as conn:
            return stats.artifact_inspection(conn, digest)

    def verify_artifacts(self, now: str, digests: Sequence[str] | None = None) -> JsonObject:
        return self._store().verify(now, digests)

    def export_artifact(self, digest: str, destination: Path, overwrite: bool) -> JsonObject:
        return self._store().export(digest, destination, overwrite=overwrite)

    def collect_artifacts(self, request: GcRequest) -> JsonObject:
        r = request
        return run_gc(self._store(), r.now, older_than_days=r.older_than_days, dry_run=r.dry_run)

    def collect_garbage(self, request: GcRequest) -> GarbageCollection:
        r = request
        days, dry = r.older_than_days, r.dry_run
        return collect_garbage(self._store(), r.now, older_than_days=days, dry_run=dry)


def open_ledger(
    path: str | os.PathLike[str],
    *,
    busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS,
    target_version: int | None = None,
    verify: bool = True,
) -> SqliteLedger:
    """Open (creating and migrating as needed) the ledger at ``path``; use it as a context
    manager so the connection closes. ``verify`` (default) quick-checks the file before any
    write; read-only commands pass False. ``target_version`` is for tests of older schemas."""
    db = open_database(
        path, busy_timeout_ms=busy_timeout_ms, target_version=target_version, verify=verify
    )
    return SqliteLedger(db)
