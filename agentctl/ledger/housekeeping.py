"""``agentctl gc``: delete old terminal runs and expired long-term memory, then what only they
used — value blobs no row names any more, and artifacts no reference holds.

How history is protected, and why deleting a whole run is honest: the ledger has no triggers;
it is append-only by its code (every update is guarded: a task or effect moves only forward,
reconciliations are appended). Deleting a run does not rewrite history, it drops all of it at
once — the run row, and through ``ON DELETE CASCADE`` every task, effect, approval,
reconciliation, checkpoint, audit event, budget row, session, call, stream event and artifact
reference of that run — in one transaction. Nothing of a run is ever deleted piecemeal.

Invariants:
- only terminal runs (succeeded, failed, cancelled) whose ``updated_at`` is before the cutoff
  are deleted; a running or paused run is never touched;
- lineages stay whole: runs linked as parent or source (a run and its retries, repairs,
  replays, forks and compensations, transitively) are deleted together only when every one of
  them may be, so no kept row names a deleted run or its effects (a compensation's
  reconciliation lives with the source run and names the compensating run's effect);
- a value blob (ADR 0008) is unpinned only when no text column of any table names its digest
  any more; if any column holds an encrypted envelope the connection cannot open (whose
  references cannot be seen) no value blob is unpinned at all — an encrypted ledger opened with
  its key reads through its envelopes (``ledger/crypto.py``), so this is only a stray one;
- everything — run deletion, memory expiry, unpinning and the artifact collection of
  ``artifacts/gc.py`` — runs under the store lock in one ``BEGIN IMMEDIATE`` transaction; a
  dry run reports the same and rolls it all back.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agentctl.core.jsonvalue import JsonObject, JsonValue
from agentctl.core.states import TERMINAL_RUN_STATES
from agentctl.crashpoints import CrashPoint, crash_point
from agentctl.ledger.artifacts.gc import DryRun, collect_txn
from agentctl.ledger.artifacts.store import ArtifactStore, clear_dir
from agentctl.ledger.rows import shift_ts
from agentctl.ledger.sql import Db, dialect_of

_VALUE_REF = re.compile(r'"\$artifact":"(sha256:[0-9a-f]{64})"')
_ENCRYPTED_PREFIX = "agentctl.encrypted."  # column envelopes (spec/cli.md §12)
# Tables whose text never holds a ledger value reference: the blob catalogue itself.
# Tables that never name a value blob (state_encryption's key check is an envelope of a fixed
# text: counting it would make every encrypted ledger keep every value blob).
_NOT_CONTENT = frozenset(
    {"artifact_blobs", "artifact_refs", "artifact_ingests", "value_blobs", "state_encryption"}
)


@dataclass(frozen=True)
class Removed:
    """What one collection deleted (or, in a dry run, would delete)."""

    runs: tuple[str, ...]
    memory_entries: int
    value_blobs: int
    value_blobs_kept_encrypted: bool


@dataclass(frozen=True)
class GarbageCollection:
    """The ``GarbageCollection`` data: ``removed`` counts runs and memory entries."""

    dry_run: bool
    before: str
    removed: Removed
    artifacts: JsonObject  # the ``artifacts gc`` report of the same transaction

    def to_json(self) -> JsonObject:
        r = self.removed
        return {
            "dryRun": self.dry_run,
            "before": self.before,
            "removed": len(r.runs) + r.memory_entries,
            "runs": list[JsonValue](r.runs),
            "memoryEntries": r.memory_entries,
            "valueBlobsUnpinned": r.value_blobs,
            "valueBlobsKeptEncrypted": r.value_blobs_kept_encrypted,
            "artifacts": self.artifacts,
        }


def collect_garbage(
    store: ArtifactStore, now: str, *, older_than_days: int, dry_run: bool
) -> GarbageCollection:
    """Delete what is old and unreachable (see the module docstring); report what went."""
    before = shift_ts(now, -older_than_days * 86400)
    removed: Removed | None = None
    with store.locked():
        try:
            with store.ledger.transaction() as conn:
                removed = _remove_txn(conn, before, now)
                artifacts = collect_txn(store, conn, before, now, dry_run)
        except DryRun as dry:
            assert removed is not None  # DryRun is raised after the removal step
            return GarbageCollection(True, before, removed, dry.args[0])
        crash_point(CrashPoint.GC_AFTER_COMMIT)
        clear_dir(store.trash_dir)
        clear_dir(store.tmp_dir)
    return GarbageCollection(False, before, removed, artifacts)


def _remove_txn(conn: Db, before: str, now: str) -> Removed:
    runs = expired_runs(conn, before)
    conn.executemany("DELETE FROM runs WHERE run_id = ?", [(r,) for r in runs])
    memory = conn.execute(
        "DELETE FROM long_term_memory WHERE expires_at IS NOT NULL AND expires_at <= ?", (now,)
    ).rowcount
    referenced, encrypted = _named_value_blobs(conn)
    unpinned = 0
    if not encrypted:
        pinned = [str(r[0]) for r in conn.execute("SELECT digest FROM value_blobs")]
        orphans = [(d,) for d in pinned if d not in referenced]
        conn.executemany("DELETE FROM value_blobs WHERE digest = ?", orphans)
        unpinned = len(orphans)
    return Removed(tuple(runs), memory, unpinned, encrypted)


def expired_runs(conn: Db, before: str) -> list[str]:
    """Terminal runs last updated before ``before``, taken by whole lineages: the runs linked
    by ``parent_run_id`` / ``source_run_id`` go together or not at all."""
    rows = conn.execute(
        "SELECT run_id, state, updated_at, parent_run_id, source_run_id FROM runs"
    ).fetchall()
    lineage = {str(r[0]): str(r[0]) for r in rows}

    def root(run: str) -> str:
        while lineage[run] != run:
            run = lineage[run]
        return run

    for r in rows:
        for link in (r[3], r[4]):
            if link and str(link) in lineage:
                lineage[root(str(r[0]))] = root(str(link))
    kept = {
        root(str(r[0])) for r in rows if str(r[1]) not in TERMINAL_RUN_STATES or str(r[2]) >= before
    }
    return sorted(run for run in lineage if root(run) not in kept)


def _named_value_blobs(conn: Db) -> tuple[set[str], bool]:
    """(digests any text column names as a ledger value, whether an encrypted column hides some)."""
    named: set[str] = set()
    encrypted = False
    for table, column in _text_columns(conn):
        find = "strpos" if dialect_of(conn) == "postgresql" else "instr"
        query = (
            f'SELECT "{column}" FROM "{table}" WHERE {find}("{column}", \'"$artifact"\') > 0'
            f' OR substr("{column}", 1, {len(_ENCRYPTED_PREFIX)}) = ?'
        )
        for (text,) in conn.execute(query, (_ENCRYPTED_PREFIX,)):
            encrypted = encrypted or str(text).startswith(_ENCRYPTED_PREFIX)
            named.update(_VALUE_REF.findall(str(text)))
    return named, encrypted


def _text_columns(conn: Db) -> list[tuple[str, str]]:
    """Every (table, column) that may hold text: all tables, so a new content column counts."""
    if dialect_of(conn) == "postgresql":
        rows = conn.execute(
            "SELECT table_name, column_name FROM information_schema.columns"
            " WHERE table_schema = current_schema() AND data_type = 'text'"
            " ORDER BY table_name, ordinal_position"
        )
        return [(str(r[0]), str(r[1])) for r in rows if str(r[0]) not in _NOT_CONTENT]
    tables = [
        str(r[0])
        for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        )
    ]
    found = []
    for table in sorted(set(tables) - _NOT_CONTENT):
        for info in conn.execute(f'PRAGMA table_info("{table}")'):
            if str(info[2]).upper() in ("TEXT", ""):
                found.append((table, str(info[1])))
    return found
