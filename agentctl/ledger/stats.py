"""JSON-ready data for the CLI's read commands (camelCase keys, spec/cli.md §1).

Each function returns the ``data`` of one envelope kind; the CLI only wraps and renders it.
Invariant: read-only — every function here only reads through the connection it is given.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from agentctl.errors import NotFoundError, ValidationError
from agentctl.ledger.approvals import list_approvals
from agentctl.ledger.artifacts.refs import get_blob, list_blobs, list_refs
from agentctl.ledger.audit import list_audit, list_checkpoints
from agentctl.ledger.budget import budget_snapshot
from agentctl.ledger.connection import Ledger
from agentctl.ledger.effects import get_effect, list_effects, list_tool_calls
from agentctl.ledger.migrations import SUPPORTED_SCHEMA_VERSION, schema_version
from agentctl.ledger.reconcile import list_reconciliations
from agentctl.ledger.runs import get_run, list_runs
from agentctl.ledger.tasks import list_tasks


def database_stats(ledger: Ledger) -> dict[str, Any]:
    """``DatabaseStats``: version, size on disk (with WAL), row counts per table."""
    with ledger.read() as conn:
        tables = [
            str(r[0])
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'"
                " AND name NOT LIKE 'sqlite_%' ORDER BY name"
            )
        ]
        counts = {t: int(conn.execute(f'SELECT COUNT(*) FROM "{t}"').fetchone()[0]) for t in tables}
        version = schema_version(conn)
    journal = str(ledger.conn.execute("PRAGMA journal_mode").fetchone()[0])
    files = (ledger.path, Path(f"{ledger.path}-wal"))
    return {
        "path": str(ledger.path),
        "schemaVersion": version,
        "supportedSchemaVersion": SUPPORTED_SCHEMA_VERSION,
        "sizeBytes": sum(p.stat().st_size for p in files if p.exists()),
        "counts": counts,
        "journalMode": journal,
    }


def database_migration(ledger: Ledger) -> dict[str, Any]:
    """``DatabaseMigration``: what opening this ledger migrated."""
    return ledger.migration.to_json()


def run_list(
    conn: sqlite3.Connection, *, state: str | None = None, limit: int | None = None
) -> dict[str, Any]:
    return {"runs": [r.summary_json() for r in list_runs(conn, state=state, limit=limit)]}


def effect_list(
    conn: sqlite3.Connection, run_id: str, task_id: str | None = None
) -> dict[str, Any]:
    get_run(conn, run_id)  # NotFoundError for an unknown run
    effects = list_effects(conn, run_id, task_id)
    ids = {e.effect_id for e in effects}
    recs = [r for r in list_reconciliations(conn, run_id=run_id) if r.effect_id in ids]
    return {
        "runId": run_id,
        "taskId": task_id,
        "effects": [e.to_json() for e in effects],
        "reconciliations": [r.to_json() for r in recs],
    }


def effect_inspection(conn: sqlite3.Connection, effect_id: str) -> dict[str, Any]:
    effect = get_effect(conn, effect_id)
    recs = [r.to_json() for r in list_reconciliations(conn, effect_id=effect_id)]
    return {
        "effect": effect.to_json(),
        "reconciliations": recs,
        "effectiveReconciliation": recs[-1] if recs else None,
    }


def approval_list(conn: sqlite3.Connection, run_id: str) -> dict[str, Any]:
    get_run(conn, run_id)
    return {"runId": run_id, "approvals": [a.to_json() for a in list_approvals(conn, run_id)]}


def run_inspection(conn: sqlite3.Connection, run_id: str) -> dict[str, Any]:
    """``RunInspection``; call inside ``Ledger.read()`` so every part is one snapshot."""
    run = get_run(conn, run_id)
    return {
        "run": run.to_json(),
        "tasks": [t.to_json() for t in list_tasks(conn, run_id)],
        "effects": [e.to_json() for e in list_effects(conn, run_id)],
        "effectReconciliations": [r.to_json() for r in list_reconciliations(conn, run_id=run_id)],
        "approvals": [a.to_json() for a in list_approvals(conn, run_id)],
        "checkpoints": [c.to_json() for c in list_checkpoints(conn, run_id)],
        "providerSessions": [],
        "streamEvents": [],
        "protocolSessions": [],
        "protocolCalls": [],
        "toolCalls": list_tool_calls(conn, run_id),
        "artifacts": [r.to_json() for r in list_refs(conn, run_id=run_id)],
        "audit": [e.to_json() for e in list_audit(conn, run_id)],
        "traces": [],
        "budget": budget_snapshot(conn, run_id).to_json(),
    }


def artifact_list(
    conn: sqlite3.Connection, run_id: str | None = None, task_id: str | None = None
) -> dict[str, Any]:
    """``ArtifactList``: references (filtered) and the blobs they name (all blobs unfiltered)."""
    if task_id is not None and run_id is None:
        raise ValidationError("artifacts list --task needs --run")
    refs = list_refs(conn, run_id=run_id, task_id=task_id)
    digests = None if run_id is None else sorted({r.digest for r in refs})
    return {
        "references": [r.to_json() for r in refs],
        "blobs": [b.to_json() for b in list_blobs(conn, digests)],
    }


def artifact_inspection(conn: sqlite3.Connection, digest: str) -> dict[str, Any]:
    blob = get_blob(conn, digest)
    if blob is None:
        raise NotFoundError(f"artifact {digest} not found")
    refs = list_refs(conn, digest=digest)
    return {"blob": blob.to_json(), "references": [r.to_json() for r in refs]}
