"""The ledger: versioned run history, effect ledger, budget ledger and artifact store.

Public surface: the ``RunLedger`` protocol (``interface``), its implementations
(``SqliteLedger``; ``PgLedger`` in ``ledger.pg``, loaded only for a PostgreSQL URL; both
opened with ``open_ledger``), the frozen values that cross it (``model``,
the record types, the ``stats`` read models) and the ID types.

Inside this package only: ``sqlite3`` / ``sqlite_utils``, the ``Database`` connection wrapper
and the ``*_txn(conn, …)`` functions, which run inside ``Database.transaction()``
(``BEGIN IMMEDIATE``) and are composed into one transaction per ``RunLedger`` method.
Every write takes the injected clock's ``now`` (RFC 3339 UTC with milliseconds).

The names are loaded on first use (PEP 562 ``__getattr__``): importing one ledger module
(``agentctl.ledger.model``, …) runs this ``__init__`` first, and a pure ``agentctl run`` needs
only some of the statement modules, not the encryption, reporting, queue or housekeeping ones.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentctl.ledger.approvals import ApprovalRecord, NewApproval
    from agentctl.ledger.artifacts.refs import ArtifactRef, ArtifactRefRecord, BlobRecord
    from agentctl.ledger.artifacts.store import IngestResult
    from agentctl.ledger.audit import AuditEvent, Checkpoint
    from agentctl.ledger.budget import BudgetSnapshot, ReservationOutcome
    from agentctl.ledger.effects import EffectRecord, NewEffect
    from agentctl.ledger.encryption import EncryptionChange, EncryptionReport
    from agentctl.ledger.interface import RunLedger
    from agentctl.ledger.migrations import SUPPORTED_SCHEMA_VERSION, MigrationResult
    from agentctl.ledger.model import (
        ApprovalDecision,
        BatchCommit,
        BudgetDenial,
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
    from agentctl.ledger.plans import PlanText
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
    from agentctl.ledger.tool_calls import ToolCallRecord

# Each public name and the module that defines it.
_HOME: dict[str, str] = {
    "SUPPORTED_SCHEMA_VERSION": "agentctl.ledger.migrations",
    "ApprovalDecision": "agentctl.ledger.model",
    "ApprovalId": "agentctl.ledger.rows",
    "ApprovalList": "agentctl.ledger.stats",
    "ApprovalRecord": "agentctl.ledger.approvals",
    "ArtifactInspection": "agentctl.ledger.stats",
    "ArtifactList": "agentctl.ledger.stats",
    "ArtifactRef": "agentctl.ledger.artifacts.refs",
    "ArtifactRefRecord": "agentctl.ledger.artifacts.refs",
    "AuditEvent": "agentctl.ledger.audit",
    "AuditSpec": "agentctl.ledger.tasks",
    "BatchCommit": "agentctl.ledger.model",
    "BudgetDenial": "agentctl.ledger.model",
    "BlobRecord": "agentctl.ledger.artifacts.refs",
    "BudgetSnapshot": "agentctl.ledger.budget",
    "CallRecord": "agentctl.ledger.model",
    "CancelRun": "agentctl.ledger.model",
    "Checkpoint": "agentctl.ledger.audit",
    "CompensatedPair": "agentctl.ledger.model",
    "DatabaseStats": "agentctl.ledger.stats",
    "DerivedRun": "agentctl.ledger.model",
    "EffectId": "agentctl.ledger.rows",
    "EffectInspection": "agentctl.ledger.stats",
    "EffectList": "agentctl.ledger.stats",
    "EffectOutcome": "agentctl.ledger.model",
    "EffectRecord": "agentctl.ledger.effects",
    "EffectStartBatch": "agentctl.ledger.model",
    "EncryptionChange": "agentctl.ledger.encryption",
    "EncryptionReport": "agentctl.ledger.encryption",
    "Finished": "agentctl.ledger.model",
    "GcRequest": "agentctl.ledger.model",
    "InflightEffect": "agentctl.ledger.model",
    "IngestRequest": "agentctl.ledger.model",
    "IngestResult": "agentctl.ledger.artifacts.store",
    "LedgerService": "agentctl.ledger.service",
    "LiveState": "agentctl.ledger.model",
    "MemoryEntry": "agentctl.ledger.model",
    "MemoryPut": "agentctl.ledger.model",
    "MigrationResult": "agentctl.ledger.migrations",
    "NewApproval": "agentctl.ledger.approvals",
    "NewEffect": "agentctl.ledger.effects",
    "NewRun": "agentctl.ledger.runs",
    "Owner": "agentctl.ledger.model",
    "PlanText": "agentctl.ledger.plans",
    "ProtocolReport": "agentctl.ledger.model",
    "ReconcileRequest": "agentctl.ledger.model",
    "ReconciliationRecord": "agentctl.ledger.reconcile",
    "RemoteHandleRecord": "agentctl.ledger.remote",
    "RequestBatch": "agentctl.ledger.model",
    "RequestRow": "agentctl.ledger.model",
    "ReservationOutcome": "agentctl.ledger.budget",
    "RunId": "agentctl.ledger.rows",
    "RunInspection": "agentctl.ledger.stats",
    "RunLedger": "agentctl.ledger.interface",
    "RunList": "agentctl.ledger.stats",
    "RunRecord": "agentctl.ledger.runs",
    "SettleRun": "agentctl.ledger.model",
    "SourceSnapshot": "agentctl.ledger.model",
    "SqliteLedger": "agentctl.ledger.sqlite_ledger",
    "TaskCompletion": "agentctl.ledger.tasks",
    "TaskId": "agentctl.ledger.rows",
    "TaskRecord": "agentctl.ledger.tasks",
    "TaskStart": "agentctl.ledger.model",
    "TaskStartBatch": "agentctl.ledger.model",
    "ToolCallRecord": "agentctl.ledger.tool_calls",
    "open_ledger": "agentctl.ledger.opening",
    "open_sqlite_ledger": "agentctl.ledger.sqlite_ledger",
}


def __getattr__(name: str) -> object:
    """Load the module defining ``name`` on first use, and keep the name in this package."""
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOME))


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
    "BudgetDenial",
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
    "PlanText",
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
