"""Artifact rows only (no file I/O): blob rows, ingestion leases and task references.

Invariants:
- a reference always names an existing blob row (foreign key);
- references are committed by the task-completion transaction, which also releases the
  ingestion leases that protected the blobs from GC in between (``commit_artifact_refs_txn``);
- a blob holding a ledger value (``values.py``) is pinned by a ``value_blobs`` row committed
  with the row that names it (``pin_value_blob_txn``);
- digests are ``sha256:<64 lowercase hex>``.
"""

from __future__ import annotations

import mimetypes
from collections.abc import Sequence
from dataclasses import dataclass

from agentctl.core.jsonvalue import JsonObject
from agentctl.errors import PersistenceError
from agentctl.ledger.idprefix import find_hex_prefix
from agentctl.ledger.rows import ROW_FORMAT_VERSION, fetch_all
from agentctl.ledger.sql import Db, Row, dialect_of


@dataclass(frozen=True)
class ArtifactRef:
    """One file a task produced: where it was in the workspace and which blob holds it."""

    logical_path: str
    digest: str
    size_bytes: int
    media_type: str | None = None

    def resolved_media_type(self) -> str:
        if self.media_type:
            return self.media_type
        guessed, _ = mimetypes.guess_type(self.logical_path)
        return guessed or "application/octet-stream"

    def to_json(self) -> JsonObject:
        return {
            "path": self.logical_path,
            "digest": self.digest,
            "sizeBytes": self.size_bytes,
            "mediaType": self.resolved_media_type(),
        }


@dataclass(frozen=True)
class ArtifactRefRecord:
    """One reference from a task attempt's logical path to a stored blob."""

    run_id: str
    task_id: str
    attempt: int
    logical_path: str
    digest: str
    media_type: str
    size_bytes: int
    created_at: str

    def to_json(self) -> JsonObject:
        return {
            "runId": self.run_id,
            "taskId": self.task_id,
            "attempt": self.attempt,
            "path": self.logical_path,
            "logicalPath": self.logical_path,  # the original's name for it; scripts read either
            "digest": self.digest,
            "mediaType": self.media_type,
            "sizeBytes": self.size_bytes,
            "createdAt": self.created_at,
        }


@dataclass(frozen=True)
class BlobRecord:
    """One content-addressed blob of the artifact store."""

    digest: str
    size_bytes: int
    created_at: str
    last_verified_at: str | None
    reference_count: int  # task references to it (``artifact_refs`` rows), as the original counts

    def to_json(self) -> JsonObject:
        return {
            "digest": self.digest,
            "sizeBytes": self.size_bytes,
            "createdAt": self.created_at,
            "lastVerifiedAt": self.last_verified_at,
            "referenceCount": self.reference_count,
        }


_INSERT_REF = """INSERT OR REPLACE INTO artifact_refs (run_id, task_id, logical_path,
    format_version, attempt, digest, media_type, size_bytes, created_at)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"""
# PostgreSQL has no INSERT OR REPLACE: the same row replaced through an upsert.
_UPSERT_REF = _INSERT_REF.replace("INSERT OR REPLACE", "INSERT") + (
    " ON CONFLICT (run_id, task_id, logical_path) DO UPDATE SET"
    " format_version = excluded.format_version, attempt = excluded.attempt,"
    " digest = excluded.digest, media_type = excluded.media_type,"
    " size_bytes = excluded.size_bytes, created_at = excluded.created_at"
)


def commit_artifact_refs_txn(
    conn: Db,
    run_id: str,
    task_id: str,
    attempt: int,
    refs: Sequence[ArtifactRef],
    lease_ids: Sequence[str],
    now: str,
) -> None:
    """Record a task's artifact references and release its ingestion leases."""
    if refs:
        conn.executemany(
            _UPSERT_REF if dialect_of(conn) == "postgresql" else _INSERT_REF,
            [
                (
                    run_id,
                    task_id,
                    r.logical_path,
                    ROW_FORMAT_VERSION,
                    attempt,
                    r.digest,
                    r.resolved_media_type(),
                    r.size_bytes,
                    now,
                )
                for r in refs
            ],
        )
    if lease_ids:
        conn.executemany(
            "DELETE FROM artifact_ingests WHERE lease_id = ?", [(lease,) for lease in lease_ids]
        )


def _ref(row: Row) -> ArtifactRefRecord:
    return ArtifactRefRecord(
        run_id=row["run_id"],
        task_id=row["task_id"],
        attempt=row["attempt"],
        logical_path=row["logical_path"],
        digest=row["digest"],
        media_type=row["media_type"],
        size_bytes=row["size_bytes"],
        created_at=row["created_at"],
    )


def _blob(row: Row) -> BlobRecord:
    return BlobRecord(
        digest=row["digest"],
        size_bytes=row["size_bytes"],
        created_at=row["created_at"],
        last_verified_at=row["last_verified_at"],
        reference_count=int(row["reference_count"]),
    )


# A blob row with its reference count, counted in the same read (one statement on both
# backends; ``artifact_refs_by_digest`` makes each count an index probe).
_SELECT_BLOBS = (
    "SELECT b.*, (SELECT COUNT(*) FROM artifact_refs r WHERE r.digest = b.digest)"
    " AS reference_count FROM artifact_blobs b"
)


def list_refs(
    conn: Db,
    *,
    run_id: str | None = None,
    task_id: str | None = None,
    digest: str | None = None,
) -> list[ArtifactRefRecord]:
    clauses, params = [], []
    for column, value in (("run_id", run_id), ("task_id", task_id), ("digest", digest)):
        if value is not None:
            clauses.append(f"{column} = ?")
            params.append(value)
    where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
    sql = f"SELECT * FROM artifact_refs{where} ORDER BY run_id, task_id, logical_path"
    return [_ref(r) for r in fetch_all(conn, sql, tuple(params), "artifact reference")]


# Digests bound per ``IN (...)`` list: far below either backend's limit on parameters.
_IN_CHUNK = 500


def list_blobs(conn: Db, digests: Sequence[str] | None = None) -> list[BlobRecord]:
    """The blobs (``digests`` only, when given) by digest, each with its reference count: the
    count is a query per blob, so only the wanted blobs are read, not the whole store's."""
    if digests is None:
        rows = fetch_all(conn, f"{_SELECT_BLOBS} ORDER BY b.digest", (), "artifact blob")
        return [_blob(r) for r in rows]
    wanted, found = sorted(set(digests)), []
    for at in range(0, len(wanted), _IN_CHUNK):
        chunk = wanted[at : at + _IN_CHUNK]
        sql = f"{_SELECT_BLOBS} WHERE b.digest IN ({', '.join('?' * len(chunk))}) ORDER BY b.digest"
        found += fetch_all(conn, sql, tuple(chunk), "artifact blob")
    return [_blob(r) for r in found]


def find_blob_digest(conn: Db, ref: str) -> str:
    """The digest ``ref`` names: itself when whole (``sha256:`` and 64 hex), else the one blob
    whose digest starts with it — none is ``NotFoundError`` (exit 5), several an ambiguity
    (``ValidationError``, exit 2). ``ref`` is checked already (``store.digest_ref_of``)."""
    if len(ref) == len("sha256:") + 64:
        return ref
    return find_hex_prefix(conn, ref, "artifact_blobs", "digest", "artifact")


def get_blob(conn: Db, digest: str) -> BlobRecord | None:
    rows = fetch_all(conn, f"{_SELECT_BLOBS} WHERE b.digest = ?", (digest,), "artifact blob")
    return _blob(rows[0]) if rows else None


def record_ingest_txn(
    conn: Db,
    digest: str,
    size_bytes: int,
    lease_id: str,
    expires_at: str,
    now: str,
    *,
    run_id: str | None = None,
    task_id: str | None = None,
) -> None:
    """Insert the blob row (an existing row must agree) and a durable ingestion lease; a
    lease of that id already there (an effect's file ingested again on resume) is renewed."""
    _blob_row_txn(conn, digest, size_bytes, now)
    conn.execute(
        "INSERT INTO artifact_ingests (lease_id, format_version, digest, run_id, task_id,"
        " created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (lease_id)"
        " DO UPDATE SET digest = excluded.digest, expires_at = excluded.expires_at",
        (lease_id, ROW_FORMAT_VERSION, digest, run_id, task_id, now, expires_at),
    )


def _blob_row_txn(conn: Db, digest: str, size_bytes: int, now: str) -> None:
    """Insert the row of a blob whose file is in place; an existing row must agree."""
    conn.execute(
        "INSERT INTO artifact_blobs (digest, format_version, size_bytes, created_at)"
        " VALUES (?, ?, ?, ?) ON CONFLICT (digest) DO NOTHING",
        (digest, ROW_FORMAT_VERSION, size_bytes, now),
    )
    blob = get_blob(conn, digest)
    if blob is None or blob.size_bytes != size_bytes:
        raise PersistenceError(
            f"artifact blob row {digest} disagrees with its bytes ({size_bytes} bytes)"
        )


def pin_value_blob_txn(conn: Db, digest: str, size_bytes: int, now: str) -> None:
    """Record a blob that holds a ledger value: its row, and the pin that keeps it from GC."""
    _blob_row_txn(conn, digest, size_bytes, now)
    conn.execute(
        "INSERT INTO value_blobs (digest, format_version, created_at) VALUES (?, ?, ?)"
        " ON CONFLICT (digest) DO NOTHING",
        (digest, ROW_FORMAT_VERSION, now),
    )
