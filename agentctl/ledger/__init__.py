"""The ledger: versioned run history, effect ledger, budget ledger and artifact store.

Public surface: the ``RunLedger`` protocol (``interface``), its implementations
(``SqliteLedger``; ``PgLedger`` in ``ledger.pg``, loaded only for a PostgreSQL URL; both
opened with ``open_ledger``), the frozen values that cross it (``model``,
the record types, the ``stats`` read models) and the ID types.

Inside this package only: ``sqlite3`` / ``sqlite_utils``, the ``Database`` connection wrapper
and the ``*_txn(conn, …)`` functions, which run inside ``Database.transaction()``
(``BEGIN IMMEDIATE``) and are composed into one transaction per ``RunLedger`` method.
Every write takes the injected clock's ``now`` (RFC 3339 UTC with milliseconds).
"""

from agentctl.ledger.approvals import ApprovalRecord, NewApproval
from agentctl.ledger.artifacts.refs import ArtifactRef, ArtifactRefRecord, BlobRecord
from agentctl.ledger.artifacts.store import IngestResult
from agentctl.ledger.audit import AuditEvent, Checkpoint
from agentctl.ledger.budget import BudgetSnapshot, ReservationOutcome
from agentctl.ledger.effects import EffectRecord, NewEffect, ToolCallRecord
from agentctl.ledger.encryption import EncryptionChange, EncryptionReport
from agentctl.ledger.interface import RunLedger
from agentctl.ledger.migrations import SUPPORTED_SCHEMA_VERSION, MigrationResult
from agentctl.ledger.model import (
    ApprovalDecision,
    BatchCommit,
    CallRecord,
    CancelRun,
    CompensatedPair,
    DerivedRun,
    EffectOutcome,
    EffectStartBatch,
    Finished,
    GcRequest,
    InflightEffect,
    IngestRequest,
    LiveState,
    MemoryEntry,
    MemoryPut,
    Owner,
    ProtocolReport,
    ReconcileRequest,
    RequestBatch,
    RequestRow,
    SettleRun,
    SourceSnapshot,
    TaskStart,
    TaskStartBatch,
)
from agentctl.ledger.opening import open_ledger
from agentctl.ledger.reconcile import ReconciliationRecord
from agentctl.ledger.remote import RemoteHandleRecord
from agentctl.ledger.rows import ApprovalId, EffectId, RunId, TaskId
from agentctl.ledger.runs import NewRun, RunRecord
from agentctl.ledger.service import LedgerService
from agentctl.ledger.sqlite_ledger import SqliteLedger, open_sqlite_ledger
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
from agentctl.ledger.tasks import AuditSpec, TaskCompletion, TaskRecord

__all__ = [
    "SUPPORTED_SCHEMA_VERSION",
    "ApprovalDecision",
    "ApprovalId",
    "ApprovalList",
    "ApprovalRecord",
    "ArtifactInspection",
    "ArtifactList",
    "ArtifactRef",
    "ArtifactRefRecord",
    "AuditEvent",
    "AuditSpec",
    "BatchCommit",
    "BlobRecord",
    "BudgetSnapshot",
    "CallRecord",
    "CancelRun",
    "Checkpoint",
    "CompensatedPair",
    "DatabaseStats",
    "DerivedRun",
    "EffectId",
    "EffectInspection",
    "EffectList",
    "EffectOutcome",
    "EffectRecord",
    "EffectStartBatch",
    "EncryptionChange",
    "EncryptionReport",
    "Finished",
    "GcRequest",
    "InflightEffect",
    "IngestRequest",
    "IngestResult",
    "LedgerService",
    "LiveState",
    "MemoryEntry",
    "MemoryPut",
    "MigrationResult",
    "NewApproval",
    "NewEffect",
    "NewRun",
    "Owner",
    "ProtocolReport",
    "ReconcileRequest",
    "ReconciliationRecord",
    "RemoteHandleRecord",
    "RequestBatch",
    "RequestRow",
    "ReservationOutcome",
    "RunId",
    "RunInspection",
    "RunLedger",
    "RunList",
    "RunRecord",
    "SettleRun",
    "SourceSnapshot",
    "SqliteLedger",
    "TaskCompletion",
    "TaskId",
    "TaskRecord",
    "TaskStart",
    "TaskStartBatch",
    "ToolCallRecord",
    "open_ledger",
    "open_sqlite_ledger",
]
