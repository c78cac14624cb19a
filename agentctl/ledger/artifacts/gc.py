"""Reachability-based garbage collection of the artifact store.

Candidates: blobs with no reference, no live ingestion lease and no ``value_blobs`` pin (a
ledger row's value lives in them, ``values.py``), created before the cutoff;
blob files with no row (an ingest that died before its row); anything in ``tmp/``.

Invariants:
- the whole collection runs under the store lock and inside one ``BEGIN IMMEDIATE``
  transaction, so no ingest or completion can add a reference half-way;
- blob files are first moved to ``trash/``; a row is deleted only if the blob is still
  unreachable (else its file is restored); the deletion commits before ``trash/`` is emptied.
  A crash at any step leaves either the rows (and recovery restores the files from
  ``trash/``) or no rows (and recovery drops the trashed files) — never a row without bytes;
- a dry run reports the same candidates and rolls everything back;
- on PostgreSQL the transaction does not exclude other writers (hosts): a blob file without a
  row is collected only once it is ``UNTRACKED_GRACE_S`` old, so a writer whose row is about to
  commit never loses its bytes (row deletions are guarded by the foreign keys as before);
- the store is shared by every ledger in its directory (``siblings.py``): a file another
  ledger names is never removed — an unreachable blob's row goes, its file stays
  (``sharedFiles``), and a file this ledger has no row for is untracked only when no other
  ledger names it either. A ledger beside this one that cannot be read keeps every file.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from agentctl.core.jsonvalue import JsonObject, JsonValue
from agentctl.crashpoints import CrashPoint, crash_point
from agentctl.ledger.artifacts.siblings import SiblingBlobs
from agentctl.ledger.artifacts.store import ArtifactStore, clear_dir, fsync_dir
from agentctl.ledger.rows import shift_ts
from agentctl.ledger.sql import Db, dialect_of

UNTRACKED_GRACE_S = 3600

_UNREACHABLE = """NOT EXISTS (SELECT 1 FROM artifact_refs r WHERE r.digest = b.digest)
    AND NOT EXISTS (SELECT 1 FROM value_blobs v WHERE v.digest = b.digest)
    AND NOT EXISTS (SELECT 1 FROM artifact_ingests i WHERE i.digest = b.digest
                    AND i.expires_at > ?)"""


class DryRun(Exception):
    """Raised inside the GC transaction to roll a dry run back."""


def _candidates(conn: Db, before: str, now: str) -> list[tuple[str, int]]:
    rows = conn.execute(
        f"SELECT b.digest, b.size_bytes FROM artifact_blobs b WHERE b.created_at < ?"
        f" AND {_UNREACHABLE} ORDER BY b.digest",
        (before, now),
    ).fetchall()
    return [(str(r[0]), int(r[1])) for r in rows]


def _untracked(store: ArtifactStore, conn: Db, shared: SiblingBlobs) -> list[Path]:
    tracked = {str(r[0]) for r in conn.execute("SELECT digest FROM artifact_blobs")}
    # On PostgreSQL other writers run beside this transaction, and other SQLite ledgers in the
    # directory commit on their own: a blob file whose row has not committed yet is recent, so
    # then only files older than the grace period count as untracked.
    concurrent = dialect_of(conn) == "postgresql" or shared.others > 0
    cutoff = time.time() - UNTRACKED_GRACE_S if concurrent else None
    return sorted(
        f
        for sub in store.blobs_dir.iterdir()
        for f in sub.iterdir()
        if "sha256:" + f.name not in tracked
        and not shared.names("sha256:" + f.name)
        and (cutoff is None or f.stat().st_mtime < cutoff)
    )


def collect_txn(store: ArtifactStore, conn: Db, before: str, now: str, dry_run: bool) -> JsonObject:
    expired = conn.execute("DELETE FROM artifact_ingests WHERE expires_at <= ?", (now,)).rowcount
    blobs = _candidates(conn, before, now)
    shared = store.siblings()
    untracked = _untracked(store, conn, shared)
    kept: list[JsonObject] = [{"digest": d, "sizeBytes": s} for d, s in blobs]
    own = [(d, s) for d, s in blobs if not shared.names(d)]  # files that are this ledger's alone
    report: JsonObject = {
        "blobs": list[JsonValue](kept),
        "untrackedFiles": list[JsonValue](str(p.relative_to(store.root)) for p in untracked),
        "tmpFiles": list[JsonValue](sorted(p.name for p in store.tmp_dir.iterdir())),
        "expiredLeases": expired,
        "bytes": sum(s for _, s in own),
        "sharedFiles": [d for d, _ in blobs if shared.names(d)],
        "unreadableLedgers": [str(p) for p in shared.unreadable],
    }
    if dry_run:
        raise DryRun(report)
    for path in [store.blob_path(d) for d, _ in own] + untracked:
        if path.exists():
            os.replace(path, store.trash_dir / path.name)
    fsync_dir(store.trash_dir)
    crash_point(CrashPoint.GC_AFTER_MOVE_TO_TRASH)
    for digest, _ in blobs:
        gone = conn.execute(
            f"DELETE FROM artifact_blobs AS b WHERE b.digest = ? AND {_UNREACHABLE}",
            (digest, now),
        ).rowcount
        trashed = store.trash_dir / digest.removeprefix("sha256:")
        if not gone and trashed.exists():  # became reachable after all: put the bytes back
            os.replace(trashed, store.blob_path(digest))
            kept = [b for b in kept if b["digest"] != digest]
            report["blobs"] = list[JsonValue](kept)
    crash_point(CrashPoint.GC_AFTER_DELETE_ROWS)
    return report


def run_gc(
    store: ArtifactStore, now: str, *, older_than_days: int = 30, dry_run: bool = False
) -> JsonObject:
    """Collect unreachable artifacts; returns the ``ArtifactGarbageCollection`` data."""
    before = shift_ts(now, -older_than_days * 86400)
    with store.locked():
        try:
            with store.ledger.transaction() as conn:
                report = collect_txn(store, conn, before, now, dry_run)
        except DryRun as dry:
            return {"dryRun": True, "before": before, "report": dry.args[0]}
        crash_point(CrashPoint.GC_AFTER_COMMIT)
        clear_dir(store.trash_dir)
        clear_dir(store.tmp_dir)
    return {"dryRun": False, "before": before, "report": report}
