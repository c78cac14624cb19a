"""Schema migrations, keyed by ``PRAGMA user_version``.

Invariants:
- migrations are forward-only and ordered 1..SUPPORTED_SCHEMA_VERSION; migration N turns a
  version N-1 database into a version N one;
- each runs in its own ``BEGIN IMMEDIATE`` transaction that also sets ``user_version``, so a
  failure leaves the previous version intact and two processes opening one file at once
  cannot both apply a step (the loser re-reads the version inside its transaction);
- every table carries a ``format_version`` column per row (1 today), so a row's layout can
  change without a schema step;
- a new file is not migrated step by step but created from ``fresh_schema.py`` (``fresh.py``),
  the schema these steps leave: after adding a step, run ``python -m agentctl.ledger.fresh``
  (until then new files replay the steps and tests/ledger/test_fresh_schema.py fails).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from agentctl.ledger.later_steps import derived_run_lookups, provider_session_turns

# v1: the core run history.
_V1 = (
    """CREATE TABLE runs (
        run_id TEXT PRIMARY KEY,
        format_version INTEGER NOT NULL DEFAULT 1,
        state TEXT NOT NULL,
        mode TEXT NOT NULL,
        workflow_name TEXT NOT NULL,
        workflow_digest TEXT NOT NULL,
        plan_digest TEXT NOT NULL,
        workflow_json TEXT NOT NULL,
        plan_json TEXT NOT NULL,
        inputs_json TEXT NOT NULL,
        working_memory_json TEXT NOT NULL,
        output_json TEXT,
        parent_run_id TEXT,
        cancellation_requested INTEGER NOT NULL DEFAULT 0,
        trace_id TEXT NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL)""",
    "CREATE INDEX runs_by_created ON runs (created_at)",
    """CREATE TABLE task_states (
        run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
        task_id TEXT NOT NULL,
        format_version INTEGER NOT NULL DEFAULT 1,
        position INTEGER NOT NULL,
        state TEXT NOT NULL,
        attempt INTEGER NOT NULL DEFAULT 0,
        output_json TEXT,
        error TEXT,
        updated_at TEXT NOT NULL,
        PRIMARY KEY (run_id, task_id))""",
    """CREATE TABLE effects (
        effect_id TEXT PRIMARY KEY,
        format_version INTEGER NOT NULL DEFAULT 1,
        run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
        task_id TEXT NOT NULL,
        attempt INTEGER NOT NULL,
        ordinal INTEGER NOT NULL,
        operation TEXT NOT NULL,
        input_digest TEXT NOT NULL,
        effect_class TEXT NOT NULL,
        risk TEXT NOT NULL,
        idempotency TEXT NOT NULL,
        idempotency_key TEXT NOT NULL,
        status TEXT NOT NULL,
        request_json TEXT NOT NULL,
        result_json TEXT,
        error TEXT,
        requested_at TEXT NOT NULL,
        started_at TEXT,
        completed_at TEXT,
        trace_id TEXT,
        confirmed INTEGER NOT NULL DEFAULT 0,
        UNIQUE (run_id, task_id, attempt, ordinal))""",
    """CREATE TABLE approvals (
        approval_id TEXT PRIMARY KEY,
        format_version INTEGER NOT NULL DEFAULT 1,
        run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
        task_id TEXT NOT NULL,
        effect_id TEXT REFERENCES effects (effect_id),
        agent TEXT,
        tool TEXT,
        capability TEXT,
        risk TEXT,
        redacted_input_json TEXT,
        expected_effect TEXT,
        reason TEXT,
        trace_id TEXT,
        status TEXT NOT NULL,
        created_at TEXT NOT NULL,
        resolved_at TEXT,
        resolved_by TEXT,
        resolution_reason TEXT)""",
    "CREATE INDEX approvals_by_run ON approvals (run_id, status)",
    """CREATE TABLE checkpoints (
        run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
        sequence INTEGER NOT NULL,
        format_version INTEGER NOT NULL DEFAULT 1,
        state_json TEXT NOT NULL,
        checksum TEXT NOT NULL,
        created_at TEXT NOT NULL,
        PRIMARY KEY (run_id, sequence))""",
    """CREATE TABLE audit_events (
        run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
        sequence INTEGER NOT NULL,
        format_version INTEGER NOT NULL DEFAULT 1,
        event_type TEXT NOT NULL,
        task_id TEXT,
        trace_id TEXT,
        payload_json TEXT NOT NULL,
        created_at TEXT NOT NULL,
        PRIMARY KEY (run_id, sequence))""",
)

# v2: lineage, reuse metadata, reconciliations, sessions, tool calls, streams, memory, lease.
_V2 = (
    "ALTER TABLE runs ADD COLUMN source_run_id TEXT",
    "ALTER TABLE runs ADD COLUMN roots_json TEXT",
    "ALTER TABLE runs ADD COLUMN reason TEXT",
    "ALTER TABLE runs ADD COLUMN base_path TEXT",
    "ALTER TABLE runs ADD COLUMN owner_pid INTEGER",
    "ALTER TABLE runs ADD COLUMN owner_create_time REAL",
    "ALTER TABLE task_states ADD COLUMN disposition TEXT NOT NULL DEFAULT 'executed'",
    "ALTER TABLE task_states ADD COLUMN definition_fingerprint TEXT",
    "ALTER TABLE task_states ADD COLUMN input_digest TEXT",
    "ALTER TABLE task_states ADD COLUMN output_contract_fingerprint TEXT",
    "ALTER TABLE task_states ADD COLUMN output_digest TEXT",
    "ALTER TABLE task_states ADD COLUMN state_delta_json TEXT",
    "ALTER TABLE task_states ADD COLUMN state_delta_digest TEXT",
    "ALTER TABLE task_states ADD COLUMN artifact_manifest_json TEXT",
    "ALTER TABLE task_states ADD COLUMN source_run_id TEXT",
    "ALTER TABLE task_states ADD COLUMN source_task_id TEXT",
    "ALTER TABLE task_states ADD COLUMN source_attempt INTEGER",
    "ALTER TABLE task_states ADD COLUMN decision_json TEXT",
    "CREATE INDEX effects_by_task ON effects (run_id, task_id, attempt, ordinal)",
    """CREATE TABLE effect_reconciliations (
        reconciliation_id TEXT PRIMARY KEY,
        effect_id TEXT NOT NULL REFERENCES effects (effect_id),
        run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
        format_version INTEGER NOT NULL DEFAULT 1,
        status TEXT NOT NULL,
        actor TEXT NOT NULL,
        reason TEXT NOT NULL,
        evidence_json TEXT NOT NULL,
        result_json TEXT,
        compensation_effect_id TEXT,
        supersedes_id TEXT,
        trace_id TEXT,
        created_at TEXT NOT NULL)""",
    "CREATE INDEX reconciliations_by_effect ON effect_reconciliations (effect_id, created_at)",
    """CREATE TABLE provider_sessions (
        session_id TEXT PRIMARY KEY,
        format_version INTEGER NOT NULL DEFAULT 1,
        run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
        task_id TEXT NOT NULL,
        attempt INTEGER NOT NULL,
        provider TEXT NOT NULL,
        model TEXT,
        state_json TEXT NOT NULL DEFAULT '{}',
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL)""",
    """CREATE TABLE tool_calls (
        run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
        call_id TEXT NOT NULL,
        format_version INTEGER NOT NULL DEFAULT 1,
        task_id TEXT NOT NULL,
        effect_id TEXT REFERENCES effects (effect_id),
        tool TEXT NOT NULL,
        status TEXT NOT NULL,
        input_json TEXT NOT NULL,
        output_json TEXT,
        error TEXT,
        created_at TEXT NOT NULL,
        completed_at TEXT,
        PRIMARY KEY (run_id, call_id))""",
    """CREATE TABLE stream_events (
        run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
        task_id TEXT NOT NULL,
        attempt INTEGER NOT NULL,
        sequence INTEGER NOT NULL,
        format_version INTEGER NOT NULL DEFAULT 1,
        event_type TEXT NOT NULL,
        payload_json TEXT NOT NULL,
        source_run_id TEXT,
        created_at TEXT NOT NULL,
        PRIMARY KEY (run_id, task_id, attempt, sequence))""",
    """CREATE TABLE long_term_memory (
        namespace TEXT NOT NULL,
        key TEXT NOT NULL,
        format_version INTEGER NOT NULL DEFAULT 1,
        value_json TEXT NOT NULL,
        expires_at TEXT,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        PRIMARY KEY (namespace, key))""",
)

# v3: the budget ledger (back-filled with a zero ledger per run) and the artifact store.
_V3 = (
    """CREATE TABLE run_budgets (
        run_id TEXT PRIMARY KEY REFERENCES runs (run_id) ON DELETE CASCADE,
        format_version INTEGER NOT NULL DEFAULT 1,
        limits_json TEXT NOT NULL DEFAULT '{}',
        usage_json TEXT NOT NULL DEFAULT '{}',
        reserved_json TEXT NOT NULL DEFAULT '{}',
        exceeded_json TEXT,
        updated_at TEXT NOT NULL)""",
    """CREATE TABLE budget_reservations (
        run_id TEXT NOT NULL REFERENCES run_budgets (run_id) ON DELETE CASCADE,
        reservation_id TEXT NOT NULL,
        format_version INTEGER NOT NULL DEFAULT 1,
        amounts_json TEXT NOT NULL,
        actual_json TEXT,
        status TEXT NOT NULL,
        created_at TEXT NOT NULL,
        settled_at TEXT,
        PRIMARY KEY (run_id, reservation_id))""",
    """INSERT INTO run_budgets (run_id, updated_at)
        SELECT run_id, updated_at FROM runs""",
    """CREATE TABLE artifact_blobs (
        digest TEXT PRIMARY KEY,
        format_version INTEGER NOT NULL DEFAULT 1,
        size_bytes INTEGER NOT NULL,
        created_at TEXT NOT NULL,
        last_verified_at TEXT)""",
    """CREATE TABLE artifact_refs (
        run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
        task_id TEXT NOT NULL,
        logical_path TEXT NOT NULL,
        format_version INTEGER NOT NULL DEFAULT 1,
        attempt INTEGER NOT NULL,
        digest TEXT NOT NULL REFERENCES artifact_blobs (digest),
        media_type TEXT NOT NULL,
        size_bytes INTEGER NOT NULL,
        created_at TEXT NOT NULL,
        PRIMARY KEY (run_id, task_id, logical_path))""",
    "CREATE INDEX artifact_refs_by_digest ON artifact_refs (digest)",
    """CREATE TABLE artifact_ingests (
        lease_id TEXT PRIMARY KEY,
        format_version INTEGER NOT NULL DEFAULT 1,
        digest TEXT NOT NULL,
        run_id TEXT,
        task_id TEXT,
        created_at TEXT NOT NULL,
        expires_at TEXT NOT NULL)""",
    "CREATE INDEX artifact_ingests_by_digest ON artifact_ingests (digest)",
)

# v4: the compiled plan stored with its run (JSON text, see agentctl.core.compiler.stored), so
# resume loads it instead of recompiling; runs created before v4 keep NULL and are recompiled.
_V4 = ("ALTER TABLE runs ADD COLUMN compiled_plan_json TEXT",)

# v5: mark the file as an agentctl ledger (``PRAGMA application_id``, header bytes 68-71), so
# opening can tell our ledgers from other SQLite files and refuse to take those over.
APPLICATION_ID = 0x41474354  # "AGCT"
MARKED_FROM_VERSION = 5  # every ledger of ours at this version or later carries the id
_V5 = (f"PRAGMA application_id = {APPLICATION_ID}",)


def _stream_event_links() -> tuple[str, ...]:
    """Durable streaming (issue 12 item 5): each ``stream_events`` row names the model effect
    that streamed it, the provider's own sequence, whether its payload was cut to the cap,
    and (for recorded replay) the source row's sequence."""
    return (
        "ALTER TABLE stream_events ADD COLUMN effect_id TEXT",
        "ALTER TABLE stream_events ADD COLUMN provider_sequence INTEGER",
        "ALTER TABLE stream_events ADD COLUMN truncated INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE stream_events ADD COLUMN source_sequence INTEGER",
    )


def _long_term_search_index() -> tuple[str, ...]:
    """Long-term memory search: each entry's searchable text, exact-match metadata and its
    embedding (identity + vector, NULL until indexed). Existing entries get their derived text
    (a string value itself, else its JSON) and stay unindexed until ``memory reindex``."""
    return (
        "ALTER TABLE long_term_memory ADD COLUMN text TEXT",
        "ALTER TABLE long_term_memory ADD COLUMN metadata_json TEXT NOT NULL DEFAULT '{}'",
        "ALTER TABLE long_term_memory ADD COLUMN embedding_provider TEXT",
        "ALTER TABLE long_term_memory ADD COLUMN embedding_model TEXT",
        "ALTER TABLE long_term_memory ADD COLUMN embedding_dimensions INTEGER",
        "ALTER TABLE long_term_memory ADD COLUMN vector_json TEXT",
        "UPDATE long_term_memory SET text = CASE WHEN json_type(value_json) = 'text'"
        " THEN json_extract(value_json, '$') ELSE value_json END",
    )


# Rows belong to an effect (its run, task and attempt copied), keyed by effect id plus the
# session key or the call's position, so a repeated report updates them in place.
def _protocol_records() -> tuple[str, ...]:
    """Protocol sessions and calls (MCP, later A2A): the evidence remote effects report."""
    return (
        """CREATE TABLE protocol_sessions (
            session_id TEXT PRIMARY KEY,
            format_version INTEGER NOT NULL DEFAULT 1,
            run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
            task_id TEXT NOT NULL,
            attempt INTEGER NOT NULL,
            effect_id TEXT NOT NULL REFERENCES effects (effect_id),
            protocol TEXT NOT NULL,
            peer TEXT NOT NULL,
            endpoint TEXT NOT NULL,
            protocol_version TEXT,
            remote_session_id TEXT,
            peer_info_json TEXT NOT NULL DEFAULT '{}',
            created_at TEXT NOT NULL)""",
        "CREATE INDEX protocol_sessions_by_run ON protocol_sessions (run_id)",
        """CREATE TABLE protocol_calls (
            call_id TEXT PRIMARY KEY,
            format_version INTEGER NOT NULL DEFAULT 1,
            run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
            task_id TEXT NOT NULL,
            attempt INTEGER NOT NULL,
            effect_id TEXT NOT NULL REFERENCES effects (effect_id),
            position INTEGER NOT NULL,
            session_id TEXT REFERENCES protocol_sessions (session_id),
            protocol TEXT NOT NULL,
            peer TEXT NOT NULL,
            method TEXT NOT NULL,
            target TEXT,
            remote_id TEXT,
            status TEXT NOT NULL,
            detail TEXT,
            updated_at TEXT NOT NULL)""",
        "CREATE INDEX protocol_calls_by_run ON protocol_calls (run_id)",
    )


def _remote_handles() -> tuple[str, ...]:
    """``remote_handles``: the remote task an effect started (an A2A task id), written by the
    coordinator mid-effect so resume and ``effects continue-remote`` can observe it again."""
    return (
        """CREATE TABLE remote_handles (
            effect_id TEXT PRIMARY KEY REFERENCES effects (effect_id),
            format_version INTEGER NOT NULL DEFAULT 1,
            run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
            protocol TEXT NOT NULL,
            peer TEXT NOT NULL,
            remote_task_id TEXT NOT NULL,
            context_id TEXT,
            created_at TEXT NOT NULL)""",
        "CREATE INDEX remote_handles_by_run ON remote_handles (run_id)",
    )


def _value_blobs() -> tuple[str, ...]:
    """Ledger values kept in the artifact store (ADR 0008, ``artifacts/values.py``): a JSON
    string of 64 KiB or more in a content column is stored once as a blob and the row holds
    ``{"$artifact": digest, "bytes": n}``; ``value_blobs`` pins every such blob, so garbage
    collection never takes bytes a row still refers to."""
    return (
        """CREATE TABLE value_blobs (
            digest TEXT PRIMARY KEY REFERENCES artifact_blobs (digest),
            format_version INTEGER NOT NULL DEFAULT 1,
            created_at TEXT NOT NULL)""",
    )


def _state_encryption() -> tuple[str, ...]:
    """Column encryption at rest (``ledger/crypto.py``, ADR 0010): the singleton naming the key
    that seals the sensitive columns — its id, the variable it is read from and a check
    envelope, never the key. No row: not encrypted. ``db encryption enable`` adds the row and
    the triggers that seal and guard each sensitive table (they are not part of the schema)."""
    return (
        """CREATE TABLE state_encryption (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            format_version INTEGER NOT NULL DEFAULT 1,
            key_id TEXT NOT NULL,
            key_env TEXT NOT NULL,
            key_check TEXT NOT NULL,
            enabled_at TEXT NOT NULL,
            rotated_at TEXT)""",
    )


def _run_documents() -> tuple[str, ...]:
    """A run's stored workflow, printed plan and compiled plan move to their own row
    (``run_documents``): SQLite rewrites a whole record on any UPDATE, and the ``runs`` row is
    updated by every batch commit — with the documents inline (16 MB at 10,000 tasks) each
    commit rewrote them all. The ``runs`` columns stay, emptied (``{}``, NULL)."""
    return (
        """CREATE TABLE run_documents (
            run_id TEXT PRIMARY KEY REFERENCES runs (run_id) ON DELETE CASCADE,
            format_version INTEGER NOT NULL DEFAULT 1,
            workflow_json TEXT NOT NULL,
            plan_json TEXT NOT NULL,
            compiled_plan_json TEXT)""",
        """INSERT INTO run_documents (run_id, workflow_json, plan_json, compiled_plan_json)
            SELECT run_id, workflow_json, plan_json, compiled_plan_json FROM runs""",
        "UPDATE runs SET workflow_json = '{}', plan_json = '{}', compiled_plan_json = NULL",
    )


def _effects_index_dedup() -> tuple[str, ...]:
    """Drop ``effects_by_task``: it indexes exactly the columns of the effects table's
    ``UNIQUE (run_id, task_id, attempt, ordinal)`` constraint, whose own index answers the same
    lookups. Every effect row paid a second, identical index insert, and every effect step's
    commit a dirty index page more in the WAL."""
    return ("DROP INDEX IF EXISTS effects_by_task",)


def _run_queue() -> tuple[str, ...]:
    """The run queue and expiring leases (``ledger/queue.py``, docs/scale-out.md):
    ``lease_token`` is the fencing token, raised by every acquisition of a run's lease and
    checked by every write made on behalf of a ``serve`` claim; ``lease_expires_at`` (NULL:
    a local pid lease of ``run``/``resume``) is the expiry a ``serve`` heartbeat pushes on;
    ``lease_holder`` names that ``serve`` (host, pid); ``queued_at`` marks a submitted run,
    which only a ``serve`` claims (a ``queued`` state until then)."""
    return (
        "ALTER TABLE runs ADD COLUMN lease_token INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE runs ADD COLUMN lease_expires_at TEXT",
        "ALTER TABLE runs ADD COLUMN lease_holder TEXT",
        "ALTER TABLE runs ADD COLUMN queued_at TEXT",
        "CREATE INDEX runs_by_queue ON runs (queued_at, state)",
    )


def _run_plan_parts() -> tuple[str, ...]:
    """A run's compiled plan in parts (``ledger.plans``): SQLite copies a row twice while
    inserting it, and a 10,000-task plan in one row (6.5 MB) made that copy the coordinator's
    peak memory. ``run_documents.plan_parts`` counts a run's parts; NULL keeps reading
    ``compiled_plan_json`` (every older run, unchanged)."""
    return (
        """CREATE TABLE run_plan_parts (
            run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
            seq INTEGER NOT NULL,
            format_version INTEGER NOT NULL DEFAULT 1,
            plan_text TEXT NOT NULL,
            PRIMARY KEY (run_id, seq))""",
        "ALTER TABLE run_documents ADD COLUMN plan_parts INTEGER",
    )


MIGRATIONS: tuple[tuple[str, ...], ...] = (
    _V1,
    _V2,
    _V3,
    _V4,
    _V5,
    _stream_event_links(),  # v6
    _long_term_search_index(),  # v7
    _protocol_records(),  # v8: protocol sessions and calls (MCP, A2A), shown by `inspect`
    _remote_handles(),  # v9: an A2A task id, persisted mid-effect
    _value_blobs(),  # v10: large ledger values kept once in the artifact store
    _state_encryption(),  # v11: the key state of column encryption at rest
    _run_documents(),  # v12: a run's workflow and plans in their own row (run_documents)
    _effects_index_dedup(),  # v13: no second copy of the effects' unique index
    _run_queue(),  # v14: queued runs, lease expiry, holder and fencing token (run queue)
    _run_plan_parts(),  # v15: a run's compiled plan stored in parts (run_plan_parts)
    provider_session_turns(),  # v16: provider sessions' status, calls and usage (inspect)
    derived_run_lookups(),  # v17: runs found by their source or parent run's id (index)
)
SUPPORTED_SCHEMA_VERSION = len(MIGRATIONS)


@dataclass(frozen=True)
class MigrationResult:
    """What one migration did: the schema version before, after, and each version applied."""

    from_version: int
    to_version: int
    applied: tuple[int, ...]

    def to_json(self) -> dict[str, object]:
        return {"from": self.from_version, "to": self.to_version, "applied": list(self.applied)}


def schema_version(conn: sqlite3.Connection) -> int:
    (version,) = conn.execute("PRAGMA user_version").fetchone()
    return int(version)


def _apply_one(conn: sqlite3.Connection, version: int) -> bool:
    """Apply migration ``version`` unless another process already did; True if applied."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        if schema_version(conn) >= version:
            conn.execute("ROLLBACK")
            return False
        for statement in MIGRATIONS[version - 1]:
            conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {version}")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return True


def migrate(conn: sqlite3.Connection, target: int | None = None) -> MigrationResult:
    """Bring the database forward to ``target`` (default: the newest version)."""
    goal = SUPPORTED_SCHEMA_VERSION if target is None else target
    start = schema_version(conn)
    applied = tuple(v for v in range(start + 1, goal + 1) if _apply_one(conn, v))
    return MigrationResult(start, max(start, schema_version(conn)), applied)
