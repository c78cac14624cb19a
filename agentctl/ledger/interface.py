"""``RunLedger``: the one typed door to durable state, for the coordinator and the CLI.

One method per protocol step or read; each method is exactly one transaction (a write commits
before it returns, a read sees one snapshot). Values in and out are frozen dataclasses
(``ledger.model``, the record types of the ledger modules, ``ledger.stats`` read models) and
JSON values; no connection, cursor or row ever crosses this boundary. ``SqliteLedger`` is the
implementation today; a second backend implements this protocol and nothing else changes.

Errors: implementations raise ``agentctl.errors`` only (``NotFoundError``,
``InvalidOperationError``, ``OwnershipError``, ``PersistenceError``, ``LockTimeoutError``, …),
translated from their driver's errors at their own boundary.

Calls are blocking and not thread-safe: one caller at a time (the coordinator reaches the
ledger through ``coordinator.store.Store``, one worker thread behind a capacity-1 limiter).
The types are imported for the checker only: the protocol is never checked at run time, and
importing it must not load every statement module (a pure run uses few of them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from agentctl.core.jsonvalue import JsonObject, JsonValue
    from agentctl.core.longterm import Candidate, EmbeddingIdentity
    from agentctl.core.protocols import ProtocolEvidence
    from agentctl.ledger.approvals import ApprovalRecord
    from agentctl.ledger.artifacts.store import IngestResult
    from agentctl.ledger.audit import AuditEvent
    from agentctl.ledger.effects import EffectRecord
    from agentctl.ledger.encryption import EncryptionChange, EncryptionReport
    from agentctl.ledger.held_calls import CallGate, GatedCall
    from agentctl.ledger.housekeeping import GarbageCollection
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
    from agentctl.ledger.queue import ClaimedRun, ClaimRequest, Fence, Heartbeat
    from agentctl.ledger.reconcile import ReconciliationRecord
    from agentctl.ledger.remote import RemoteHandleRecord
    from agentctl.ledger.report import RunReport
    from agentctl.ledger.runs import NewRun, RunRecord
    from agentctl.ledger.stats import (
        ApprovalList,
        ArtifactInspection,
        ArtifactList,
        DatabaseStats,
        EffectInspection,
        EffectList,
        RunInspection,
        RunList,
    )
    from agentctl.ledger.streams import NewStreamEvent, StreamEventRecord
    from agentctl.ledger.upgrade import RunUpgrade


class RunLedger(Protocol):
    """Everything agentctl persists or reads about runs, effects, budgets and artifacts."""

    @property
    def location(self) -> Path:
        """A local path naming this ledger; per-ledger companions (worker registry) sit beside."""
        ...

    def close(self) -> None: ...

    # ---------------------------------------------------------------- run lifecycle

    def create_run(self, run: NewRun, task_order: Sequence[str], owner: Owner, now: str) -> None:
        """Create a run (pending tasks, budget, audit, checkpoint) with ``owner``'s lease."""
        ...

    def create_derived_run(self, derived: DerivedRun) -> None:
        """Materialise a retry/repair/replay run with its copied tasks (see ``DerivedRun``)."""
        ...

    def claim_for_resume(
        self, run_ref: str, owner: Owner, now: str, *, trace_id: str | None = None
    ) -> ResumeClaim:
        """Refuse terminal runs, turn started effects uncertain (audited with ``trace_id``,
        the resuming invocation's), and take the lease unless unresolved effects remain
        (a refused resume leaves the run row unchanged)."""
        ...

    def acquire_lease(self, run_id: str, owner: Owner, now: str) -> None:
        """Own the run unless a live other process does (``OwnershipError``)."""
        ...

    def release_lease(self, run_id: str, pid: int, now: str) -> None:
        """Drop the lease if ``pid`` holds it."""
        ...

    def submit_run(self, run: NewRun, task_order: Sequence[str], now: str) -> None:
        """Create the run ``queued`` (tasks, budget, audit, checkpoint), with no lease."""
        ...

    def open_fenced(self, fence: Fence) -> RunLedger:
        """Another ledger on the same database for one claimed run: every write transaction
        checks ``fence`` first (a lease taken over commits nothing). Close it when done."""
        ...

    def claim_runs(self, claim: ClaimRequest) -> tuple[ClaimedRun, ...]:
        """Claim queued or orphaned runs for a ``serve`` (``ledger.queue``)."""
        ...

    def heartbeat(self, beat: Heartbeat) -> tuple[str, ...]:
        """Extend the leases still held; returns the runs whose lease was lost."""
        ...

    def queue_busy(self, now: str) -> bool:
        """Whether a submitted run is claimable now or held by a live ``serve`` lease."""
        ...

    def set_run_state(
        self, run_id: str, state: str, now: str, *, trace_id: str | None = None
    ) -> None:
        """A legal run state change (e.g. paused → running on resume), audited with
        ``trace_id`` (the invocation's)."""
        ...

    def request_cancel(self, run_ref: str, now: str, *, trace_id: str | None = None) -> RunRecord:
        """Set the durable cancellation flag of a queued, running or paused run (a paused
        run's next drive honours it before any work); a queued run, or a running one nothing
        can drive any more, is cancelled at once. Returns the run.
        What it writes is audited with ``trace_id``, the cancelling invocation's."""
        ...

    def is_cancel_requested(self, run_id: str) -> bool: ...

    def cancel_run(self, stop: CancelRun) -> None:
        """Stop a run: started effects uncertain, in-flight tasks cancelled, lease released."""
        ...

    def settle_run(self, settle: SettleRun) -> None:
        """End a drive in its resting state with its output, lease released."""
        ...

    def load_live(self, run_id: str) -> LiveState:
        """The run, its tasks and its in-flight effects, to (re)start driving it."""
        ...

    def read_outputs(self, run_id: str, task_ids: Sequence[str] | None) -> dict[str, JsonValue]:
        """Finished (succeeded or skipped) tasks' outputs among ``task_ids`` (None: every
        one), in compiled order: one read for all the outputs a batch needs back."""
        ...

    # ---------------------------------------------------------------- the effect protocol

    def record_requests(self, batch: RequestBatch) -> tuple[BudgetDenial, ...]:
        """Tasks → running, effects requested (+ started, or paused for approval), budgets
        reserved; returns the tasks whose reservation the budget denied, each with the
        dimension and limit it would have exceeded."""
        ...

    def start_tasks(self, batch: TaskStartBatch) -> None:
        """Move agent tasks (which record their calls as they go) to running."""
        ...

    def start_effects(self, batch: EffectStartBatch) -> None:
        """Commit ``started`` for recorded effects (approved tasks back to running)."""
        ...

    def record_and_start_call(self, call: CallRecord) -> JsonObject | None:
        """Reserve, record and start one agent call (+ tool-call row); the overrun if refused."""
        ...

    def gate_call(self, gated: GatedCall) -> CallGate:
        """An agent's tool call that needs an approval: hold it (task and run pause), start it
        once approved, or report its rejection — the same call is never recorded twice; a new
        call carrying ``nonInteractive``'s denial is reported denied, with no effect."""
        ...

    def append_stream_event(self, event: NewStreamEvent) -> StreamEventRecord | None:
        """Persist one fragment of a streamed model answer, bounded, under the task attempt's
        next sequence; None when the attempt already holds the most events it may keep."""
        ...

    def audit_after(self, run_id: str, after: int) -> Sequence[AuditEvent]:
        """The run's committed audit events with a sequence above ``after``, in order (what
        the live event stream renders after each write)."""
        ...

    def finish_effects(self, outcomes: Sequence[EffectOutcome]) -> None:
        """Commit effect outcomes with settlement, memory writes, tool calls: one group commit."""
        ...

    def commit_batch(self, batch: BatchCommit) -> None:
        """Commit a batch's completions in compiled order (see ``BatchCommit``)."""
        ...

    def record_protocol(self, report: ProtocolReport) -> None:
        """Store (or update in place) an effect's protocol sessions and calls, outside its
        outcome: for protocols that learn something while the effect runs."""
        ...

    def recorded_result(self, effect_id: str) -> JsonValue:
        """The result of an effect that already happened (confirmed or reconciled applied);
        None when there is nothing to reuse."""
        ...

    def long_term_get(self, namespace: str, key: str, now: str) -> MemoryEntry: ...

    def long_term_candidates(self, namespace: str, now: str) -> Sequence[Candidate]:
        """Every active entry of ``namespace``, in key order, for a search to rank."""
        ...

    def long_term_put(self, put: MemoryPut, now: str) -> None:
        """Write one long-term entry outside any run (``agentctl memory put``)."""
        ...

    def long_term_reindex(self, namespace: str, identity: EmbeddingIdentity, now: str) -> int:
        """Recompute the vectors of every active entry of ``namespace``; how many."""
        ...

    def record_remote_handle(
        self, handle: RemoteHandleRecord, evidence: ProtocolEvidence | None = None
    ) -> None:
        """Persist the remote work a started effect began (an A2A task id), mid-effect; the
        same handle again is a no-op, a different one is refused. ``evidence`` (what the
        effect said on the wire so far) commits in the same transaction."""
        ...

    def remote_handle(self, effect_id: str) -> RemoteHandleRecord | None:
        """The remote work the effect began, if a handle was persisted."""
        ...

    # ---------------------------------------------------------------- operators

    def list_approvals(self, run_ref: str, status: str | None = "pending") -> ApprovalList:
        """The approvals of the run ``run_ref`` names in ``status`` (None: all), oldest first."""
        ...

    def get_approval(self, approval_id: str) -> ApprovalRecord: ...

    def resolve_approval(self, decision: ApprovalDecision) -> ApprovalRecord:
        """Approve or reject a pending approval (named by its id or a unique prefix, as a
        run is); its effect moves with it."""
        ...

    def reconcile_effect(self, request: ReconcileRequest) -> ReconciliationRecord:
        """Append an operator's conclusion about an effect (append-only, rules checked)."""
        ...

    def unresolved_effects(self, run_id: str) -> tuple[EffectRecord, ...]:
        """Started or uncertain effects with no reconciliation: they block resume."""
        ...

    def has_live_driver(self, run_id: str, now: str) -> bool:
        """Whether a live process holds the run's lease at ``now``: its started effects may
        be executing right now. A ``serve`` lease is live until it expires (its holder stopped
        renewing it: dead, or stalled and fenced out), a local one while its process is."""
        ...

    # ---------------------------------------------------------------- reads

    def get_run(self, run_id: str) -> RunRecord: ...

    def find_run(self, run_ref: str) -> RunRecord:
        """The run whose id is ``run_ref`` or uniquely starts with it."""
        ...

    def list_runs(
        self, state: str | None = None, limit: int | None = None, workflow: str | None = None
    ) -> RunList: ...

    def run_report(self, run_ref: str) -> RunReport:
        """The run's inspection with its lineage and approval history (``inspect``, reports)."""
        ...

    def inspect_run(self, run_ref: str) -> RunInspection: ...

    def list_effects(self, run_ref: str, task_id: str | None = None) -> EffectList: ...

    def inspect_effect(self, effect_id: str) -> EffectInspection: ...

    def find_effect_id(self, effect_ref: str) -> str:
        """The id of the effect whose id is ``effect_ref`` or uniquely starts with it."""
        ...

    def load_source(self, run_ref: str) -> SourceSnapshot:
        """A run with its tasks, effects, reconciliations and artifacts (recovery, replay)."""
        ...

    def upgrade_run(self, upgrade: RunUpgrade) -> None:
        """Write a legacy run's proven reuse metadata (NULL fields only), one transaction."""
        ...

    def database_stats(self) -> DatabaseStats: ...

    def migration(self) -> MigrationResult:
        """What opening this ledger migrated."""
        ...

    def encryption_inventory(self) -> EncryptionReport:
        """Per sensitive column: values in plaintext and sealed under each key id."""
        ...

    def change_encryption(self, change: EncryptionChange) -> EncryptionReport:
        """``db encryption enable|rotate``: every sensitive value resealed in one transaction."""
        ...

    # ---------------------------------------------------------------- artifacts

    def open_artifacts(self) -> None:
        """Make the artifact store ready, finishing what a crashed process left; idempotent."""
        ...

    def ingest_artifact(self, request: IngestRequest) -> IngestResult:
        """Store a file's bytes and lease the blob until its task's completion commits;
        ``BudgetRefusedError`` over ``maxArtifactBytes``, ``InvalidOperationError`` for a file
        the store does not take (or, ``written`` given, one that no longer holds those bytes
        while no intact blob does)."""
        ...

    def blob_intact(self, digest: str, size_bytes: int) -> bool:
        """Whether the blob's bytes exist and hash to ``digest``."""
        ...

    def list_artifacts(
        self, run_ref: str | None = None, task_id: str | None = None
    ) -> ArtifactList: ...

    def inspect_artifact(self, digest: str) -> ArtifactInspection: ...

    def find_artifact_digest(self, digest_ref: str) -> str:
        """The digest of the blob whose digest is ``digest_ref`` or uniquely starts with it."""
        ...

    def verify_artifacts(self, now: str, digests: Sequence[str] | None = None) -> JsonObject:
        """Re-hash blobs (all when None); the ``ArtifactVerification`` report."""
        ...

    def export_artifact(self, digest: str, destination: Path, overwrite: bool) -> JsonObject:
        """Copy a verified blob to ``destination`` atomically; the ``ArtifactExport`` report."""
        ...

    def refuse_own_state(self, destination: Path, doing: str) -> None:
        """Refuse (exit 2) a file a command is about to write (``doing``: "write the report")
        that is this ledger's database, a file beside it or inside its artifact store."""
        ...

    def own_state_paths(self) -> tuple[str, ...]:
        """The real paths of this ledger's own state — its database and the files beside it,
        its artifact store, its local companions — which a run's file effects refuse."""
        ...

    def collect_artifacts(self, request: GcRequest) -> JsonObject:
        """Garbage-collect unreachable blobs; the ``ArtifactGarbageCollection`` report."""
        ...

    def collect_garbage(self, request: GcRequest) -> GarbageCollection:
        """``agentctl gc``: old terminal runs and expired memory, then what only they used."""
        ...
