"""Read models for the CLI's inspection commands, and the reads that build them.

Each dataclass is the ``data`` of one envelope kind (``to_json()`` gives its camelCase shape,
spec/cli.md §1); the CLI only wraps and renders it.
Invariant: read-only — every function here only reads through the connection it is given,
inside one read snapshot opened by the caller.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

from agentctl.core.jsonvalue import JsonObject, JsonValue
from agentctl.errors import NotFoundError, ValidationError
from agentctl.ledger.approvals import ApprovalRecord, list_approvals
from agentctl.ledger.artifacts.refs import (
    ArtifactRefRecord,
    BlobRecord,
    get_blob,
    list_blobs,
    list_refs,
)
from agentctl.ledger.artifacts.values import loads_value
from agentctl.ledger.audit import AuditEvent, Checkpoint, list_audit, list_checkpoints
from agentctl.ledger.budget import BudgetSnapshot, budget_snapshot
from agentctl.ledger.effects import EffectRecord, get_effect, list_effects
from agentctl.ledger.migrations import SUPPORTED_SCHEMA_VERSION, schema_version
from agentctl.ledger.protocols import (
    ProtocolCallRecord,
    ProtocolSessionRecord,
    list_protocol_calls,
    list_protocol_sessions,
)
from agentctl.ledger.reconcile import ReconciliationRecord, list_reconciliations
from agentctl.ledger.remote import RemoteHandleRecord, get_handle, list_handles
from agentctl.ledger.rows import parse_ts
from agentctl.ledger.runs import RunRecord, get_run
from agentctl.ledger.sessions import ProviderSessionRecord, list_provider_sessions
from agentctl.ledger.sql import Db
from agentctl.ledger.streams import StreamEventRecord, list_stream_events
from agentctl.ledger.tasks import TaskRecord, check_task, list_tasks
from agentctl.ledger.tool_calls import ToolCallRecord, list_tool_calls


def _all(items: tuple[ApprovalRecord, ...] | tuple[EffectRecord, ...]) -> list[JsonValue]:
    return [i.to_json() for i in items]


def _effects_json(
    effects: tuple[EffectRecord, ...], handles: tuple[RemoteHandleRecord, ...]
) -> list[JsonValue]:
    """Effect records, each with ``remoteTaskId`` when it started remote work (A2A)."""
    by_effect = {h.effect_id: h for h in handles}
    found: list[JsonValue] = []
    for effect in effects:
        entry = effect.to_json()
        handle = by_effect.get(effect.effect_id)
        if handle is not None:
            entry["remoteTaskId"] = handle.remote_task_id
            entry["remoteHandle"] = handle.to_json()
        found.append(entry)
    return found


@dataclass(frozen=True)
class DatabaseStats:
    """A ledger's size, schema version and row counts."""

    path: str
    schema_version: int
    size_bytes: int
    counts: dict[str, int]
    journal_mode: str  # "postgresql" for a PostgreSQL ledger
    server_version: str | None = None  # PostgreSQL's; None for SQLite

    def to_json(self) -> JsonObject:
        found: JsonObject = {
            "path": self.path,
            "schemaVersion": self.schema_version,
            "supportedSchemaVersion": SUPPORTED_SCHEMA_VERSION,
            "sizeBytes": self.size_bytes,
            "counts": dict[str, JsonValue](self.counts),
            "journalMode": self.journal_mode,
        }
        if self.server_version is not None:
            found["serverVersion"] = self.server_version
        return found


def database_stats(conn: sqlite3.Connection, path: Path) -> DatabaseStats:
    """Version, size on disk (with WAL), row counts per table."""
    tables = [
        str(r[0])
        for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'"
            " AND name NOT LIKE 'sqlite_%' ORDER BY name"
        )
    ]
    counts = {t: int(conn.execute(f'SELECT COUNT(*) FROM "{t}"').fetchone()[0]) for t in tables}
    version = schema_version(conn)
    journal = str(conn.execute("PRAGMA journal_mode").fetchone()[0])
    files = (path, Path(f"{path}-wal"))
    size = sum(p.stat().st_size for p in files if p.exists())
    return DatabaseStats(str(path), version, size, counts, journal)


@dataclass(frozen=True)
class RunList:
    """Runs of a ledger, as ``runs list`` shows them."""

    runs: tuple[RunRecord, ...]

    def to_json(self) -> JsonObject:
        return {"runs": [r.summary_json() for r in self.runs]}


@dataclass(frozen=True)
class EffectList:
    """A run's effects with their reconciliations and remote handles."""

    run_id: str
    task_id: str | None
    effects: tuple[EffectRecord, ...]
    reconciliations: tuple[ReconciliationRecord, ...]
    remote_handles: tuple[RemoteHandleRecord, ...] = ()

    def to_json(self) -> JsonObject:
        return {
            "runId": self.run_id,
            "taskId": self.task_id,
            "effects": _effects_json(self.effects, self.remote_handles),
            "reconciliations": [r.to_json() for r in self.reconciliations],
        }


def effect_list(conn: Db, run_id: str, task_id: str | None = None) -> EffectList:
    get_run(conn, run_id)  # NotFoundError for an unknown run
    if task_id is not None:
        check_task(conn, run_id, task_id)  # and for a task the run does not have
    effects = tuple(list_effects(conn, run_id, task_id))
    ids = {e.effect_id for e in effects}
    recs = tuple(
        r for r in list_reconciliations(conn, run_id=run_id, grounds=True) if r.effect_id in ids
    )
    handles = tuple(h for h in list_handles(conn, run_id) if h.effect_id in ids)
    return EffectList(run_id, task_id, effects, recs, handles)


@dataclass(frozen=True)
class EffectInspection:
    """One effect with its reconciliations and remote handle."""

    effect: EffectRecord
    reconciliations: tuple[ReconciliationRecord, ...]
    remote: RemoteHandleRecord | None = None
    # An agent's tool call: the tool's declared name, which policy judged it by, and the
    # arguments the model sent it (what the tool's kind shapes its result with).
    tool: str | None = None
    tool_input: JsonValue = None

    def to_json(self) -> JsonObject:
        recs: list[JsonValue] = [r.to_json() for r in self.reconciliations]
        handles = (self.remote,) if self.remote is not None else ()
        return {
            "effect": _effects_json((self.effect,), handles)[0],
            "reconciliations": recs,
            "effectiveReconciliation": recs[-1] if recs else None,
        }


def effect_inspection(conn: Db, effect_id: str) -> EffectInspection:
    effect = get_effect(conn, effect_id)
    recs = tuple(list_reconciliations(conn, effect_id=effect_id, grounds=True))
    # The run narrows it to the primary key's prefix: effect_id alone has no index.
    sql = "SELECT tool, input_json FROM tool_calls WHERE run_id = ? AND effect_id = ?"
    row = conn.execute(sql, (effect.run_id, effect_id)).fetchone()
    remote = get_handle(conn, effect_id)
    if row is None:
        return EffectInspection(effect, recs, remote)
    args = loads_value(conn, row["input_json"])
    return EffectInspection(effect, recs, remote, str(row["tool"]), args)


@dataclass(frozen=True)
class ApprovalList:
    """A run's approvals."""

    run_id: str
    approvals: tuple[ApprovalRecord, ...]

    def to_json(self) -> JsonObject:
        return {"runId": self.run_id, "approvals": _all(self.approvals)}


def approval_list(conn: Db, run_id: str, status: str | None = "pending") -> ApprovalList:
    get_run(conn, run_id)
    return ApprovalList(run_id, tuple(list_approvals(conn, run_id, status)))


@dataclass(frozen=True)
class RunInspection:
    """Everything recorded about one run, read as one snapshot."""

    run: RunRecord
    tasks: tuple[TaskRecord, ...]
    effects: tuple[EffectRecord, ...]
    reconciliations: tuple[ReconciliationRecord, ...]
    approvals: tuple[ApprovalRecord, ...]
    checkpoints: tuple[Checkpoint, ...]
    tool_calls: tuple[ToolCallRecord, ...]
    protocol_sessions: tuple[ProtocolSessionRecord, ...]
    protocol_calls: tuple[ProtocolCallRecord, ...]
    artifacts: tuple[ArtifactRefRecord, ...]
    audit: tuple[AuditEvent, ...]
    budget: BudgetSnapshot
    stream_events: tuple[StreamEventRecord, ...] = ()
    remote_handles: tuple[RemoteHandleRecord, ...] = ()
    provider_sessions: tuple[ProviderSessionRecord, ...] = ()

    def to_json(self) -> JsonObject:
        return {
            "run": {**self.run.to_json(), "workingMemory": self.run.working_memory},
            "tasks": [t.to_json() for t in self.tasks],
            "effects": _effects_json(self.effects, self.remote_handles),
            "effectReconciliations": [r.to_json() for r in self.reconciliations],
            "approvals": _all(self.approvals),
            "checkpoints": [c.to_json() for c in self.checkpoints],
            "providerSessions": [s.to_json() for s in self.provider_sessions],
            "streamEvents": [e.to_json() for e in self.stream_events],
            "protocolSessions": [s.to_json() for s in self.protocol_sessions],
            "protocolCalls": [c.to_json() for c in self.protocol_calls],
            "toolCalls": [c.to_json() for c in self.tool_calls],
            "artifacts": [r.to_json() for r in self.artifacts],
            "audit": [e.to_json() for e in self.audit],
            "traces": traces_json(self.audit),
            "budget": self._budget_json(),
        }

    def budget_usage(self) -> dict[str, int]:
        """Usage metering every limited dimension (issue 14 item 7), wall time included."""
        wall = (parse_ts(self.run.updated_at) - parse_ts(self.run.created_at)).total_seconds()
        return self.budget.metered(int(wall), planned_counts(self.run.plan))

    def _budget_json(self) -> JsonObject:
        found = self.budget.to_json()
        found["usage"] = dict[str, JsonValue](self.budget_usage())
        found["planned"] = dict[str, JsonValue](planned_counts(self.run.plan))
        return found


def traces_json(audit: tuple[AuditEvent, ...]) -> list[JsonValue]:
    """The run's history by invocation: one entry per trace id in its audit log, in order of
    first use. Every invocation that writes to a run (``run``, ``approvals approve``,
    ``resume``, ``cancel``, ``effects reconcile``, a ``serve``'s drive, …) mints its own trace
    id and every audit row names its writer's (docs/operations.md §12), so an entry says which
    rows one invocation wrote (``firstSequence``..``lastSequence``, ``events`` of them) and
    when (``startedAt``..``endedAt``)."""
    written: dict[str, list[AuditEvent]] = {}  # in order of first use
    for event in audit:
        if event.trace_id is not None:
            written.setdefault(event.trace_id, []).append(event)
    return [
        {
            "traceId": trace,
            "firstSequence": rows[0].sequence,
            "lastSequence": rows[-1].sequence,
            "startedAt": rows[0].created_at,
            "endedAt": rows[-1].created_at,
            "events": len(rows),
        }
        for trace, rows in written.items()
    ]


def planned_counts(plan: JsonValue) -> dict[str, int]:
    """Task, foreach/matrix child and loop-iteration counts of a run's printed plan.

    Reads the engine bindings, present in both printed forms (tasks as a list, or keyed by id).
    """
    tasks = plan.get("tasks") if isinstance(plan, dict) else None
    entries = list(tasks.values()) if isinstance(tasks, dict) else tasks
    items = [t for t in entries if isinstance(t, dict)] if isinstance(entries, list) else []
    bindings = [b for b in (t.get("bindings") for t in items) if isinstance(b, dict)]
    return {
        "tasks": len(items),
        "expansionItems": sum(1 for b in bindings if "foreachIndex" in b or "matrixIndex" in b),
        "loopIterations": sum(1 for b in bindings if "loopIndex" in b),
    }


def run_inspection(conn: Db, run_id: str) -> RunInspection:
    return RunInspection(
        run=get_run(conn, run_id),
        tasks=tuple(list_tasks(conn, run_id)),
        effects=tuple(list_effects(conn, run_id)),
        reconciliations=tuple(list_reconciliations(conn, run_id=run_id, grounds=True)),
        approvals=tuple(list_approvals(conn, run_id)),
        checkpoints=tuple(list_checkpoints(conn, run_id)),
        tool_calls=tuple(list_tool_calls(conn, run_id)),
        protocol_sessions=tuple(list_protocol_sessions(conn, run_id)),
        protocol_calls=tuple(list_protocol_calls(conn, run_id)),
        artifacts=tuple(list_refs(conn, run_id=run_id)),
        audit=tuple(list_audit(conn, run_id)),
        budget=budget_snapshot(conn, run_id),
        stream_events=tuple(list_stream_events(conn, run_id)),
        remote_handles=tuple(list_handles(conn, run_id)),
        provider_sessions=tuple(list_provider_sessions(conn, run_id)),
    )


@dataclass(frozen=True)
class ArtifactList:
    """Artifact references and the blobs they name."""

    references: tuple[ArtifactRefRecord, ...]
    blobs: tuple[BlobRecord, ...]

    def to_json(self) -> JsonObject:
        return {
            "references": [r.to_json() for r in self.references],
            "blobs": [b.to_json() for b in self.blobs],
        }


def artifact_list(conn: Db, run_id: str | None = None, task_id: str | None = None) -> ArtifactList:
    """References (filtered) and the blobs they name (all blobs unfiltered)."""
    if task_id is not None:
        if run_id is None:
            raise ValidationError("artifacts list --task needs --run")
        check_task(conn, run_id, task_id)  # a typo is not found, not "no artifacts"
    refs = tuple(list_refs(conn, run_id=run_id, task_id=task_id))
    digests = None if run_id is None else sorted({r.digest for r in refs})
    return ArtifactList(refs, tuple(list_blobs(conn, digests)))


@dataclass(frozen=True)
class ArtifactInspection:
    """One blob and every reference to it."""

    blob: BlobRecord
    references: tuple[ArtifactRefRecord, ...]

    def to_json(self) -> JsonObject:
        return {"blob": self.blob.to_json(), "references": [r.to_json() for r in self.references]}


def artifact_inspection(conn: Db, digest: str) -> ArtifactInspection:
    blob = get_blob(conn, digest)
    if blob is None:
        raise NotFoundError(f"artifact {digest} not found")
    return ArtifactInspection(blob, tuple(list_refs(conn, digest=digest)))
