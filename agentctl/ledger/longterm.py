"""The ``long_term_memory`` table: namespaced entries across runs, with expiry and vectors.

Invariants:
- an entry row holds the value, its searchable text, its metadata and — once indexed — its
  embedding identity and vector; a write replaces all of them at once; a long string in the
  value lives in the artifact store (``artifacts/values.py``, ADR 0008);
- expired rows are invisible to every read and search (``expires_at <= now``) and are only
  deleted by ``delete_expired_txn`` (garbage collection), never by a read;
- a search scans at most ``MAX_CANDIDATES`` active rows of a namespace: a larger namespace is
  refused, never silently cut;
- a stored vector that is not a list of numbers of its recorded dimension is corrupt state
  (``PersistenceError``), never guessed at.
"""

from __future__ import annotations

from agentctl.core.jsonvalue import JsonValue, as_object
from agentctl.core.longterm import (
    MAX_CANDIDATES,
    Candidate,
    EmbeddingIdentity,
    local_hash,
)
from agentctl.errors import PersistenceError, ValidationError
from agentctl.ledger.artifacts.values import dumps_value, loads_value
from agentctl.ledger.model import MemoryEntry, MemoryPut
from agentctl.ledger.rows import (
    ROW_FORMAT_VERSION,
    dumps,
    dumps_opt,
    fetch_all,
    loads_opt,
    shift_ts,
)
from agentctl.ledger.sql import Db, Row

_DAY_SECONDS = 86_400.0
_ACTIVE = "namespace = ? AND (expires_at IS NULL OR expires_at > ?)"


def put_txn(conn: Db, put: MemoryPut, now: str) -> None:
    """Write (insert or replace) one entry; its expiry counts from ``now``."""
    days = put.retention_days
    expires_at = shift_ts(now, days * _DAY_SECONDS) if days is not None else None
    identity = put.embedding
    conn.execute(
        "INSERT INTO long_term_memory (namespace, key, format_version, value_json, text,"
        " metadata_json, embedding_provider, embedding_model, embedding_dimensions,"
        " vector_json, expires_at, created_at, updated_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (namespace, key) DO UPDATE SET value_json = excluded.value_json,"
        " text = excluded.text, metadata_json = excluded.metadata_json,"
        " embedding_provider = excluded.embedding_provider,"
        " embedding_model = excluded.embedding_model,"
        " embedding_dimensions = excluded.embedding_dimensions,"
        " vector_json = excluded.vector_json, expires_at = excluded.expires_at,"
        " updated_at = excluded.updated_at",
        (
            put.namespace,
            put.key,
            ROW_FORMAT_VERSION,
            dumps_value(conn, put.entry.value, now),
            put.entry.text,
            dumps(put.entry.metadata),
            identity.provider if identity else None,
            identity.model if identity else None,
            identity.dimensions if identity else None,
            dumps_opt(list(put.vector)) if put.vector is not None else None,
            expires_at,
            now,
            now,
        ),
    )


def get_entry(conn: Db, namespace: str, key: str, now: str) -> MemoryEntry:
    """One entry (``found`` False when absent or expired)."""
    rows = fetch_all(
        conn,
        f"SELECT * FROM long_term_memory WHERE {_ACTIVE} AND key = ?",
        (namespace, now, key),
        "memory",
    )
    if not rows:
        return MemoryEntry(False, namespace=namespace, key=key)
    row = rows[0]
    return MemoryEntry(
        True,
        loads_value(conn, row["value_json"]),
        namespace=namespace,
        key=key,
        text=row["text"],
        metadata=as_object(loads_opt(row["metadata_json"])),
        embedding=_identity(row),
        expires_at=row["expires_at"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


def candidates(conn: Db, namespace: str, now: str) -> list[Candidate]:
    """Every active entry of ``namespace``, in key order, as a search sees it."""
    rows = fetch_all(
        conn,
        f"SELECT * FROM long_term_memory WHERE {_ACTIVE} ORDER BY key LIMIT ?",
        (namespace, now, MAX_CANDIDATES + 1),
        "memory",
    )
    if len(rows) > MAX_CANDIDATES:
        raise ValidationError(
            f"namespace {namespace!r} has more than {MAX_CANDIDATES} active entries; a local "
            "search scans at most that many"
        )
    return [_candidate(conn, row) for row in rows]


def _candidate(conn: Db, row: Row) -> Candidate:
    identity = _identity(row)
    return Candidate(
        key=row["key"],
        value=loads_value(conn, row["value_json"]),
        text=row["text"] or "",
        metadata=as_object(loads_opt(row["metadata_json"])),
        embedding=identity,
        vector=_vector(row, identity),
    )


def _identity(row: Row) -> EmbeddingIdentity | None:
    if row["embedding_provider"] is None:
        return None
    return EmbeddingIdentity(
        str(row["embedding_provider"]),
        str(row["embedding_model"]),
        int(row["embedding_dimensions"]),
    )


def _vector(row: Row, identity: EmbeddingIdentity | None) -> tuple[float, ...] | None:
    if identity is None or row["vector_json"] is None:
        return None
    raw: JsonValue = loads_opt(row["vector_json"])
    if isinstance(raw, list) and len(raw) == identity.dimensions:
        numbers = [float(x) for x in raw if isinstance(x, int | float) and not isinstance(x, bool)]
        if len(numbers) == len(raw):
            return tuple(numbers)
    raise PersistenceError(
        f"long-term entry {row['namespace']}/{row['key']} has a corrupt vector (expected "
        f"{identity.dimensions} numbers); rebuild it with `agentctl memory reindex`"
    )


def reindex_txn(conn: Db, namespace: str, identity: EmbeddingIdentity, now: str) -> int:
    """Recompute the vector of every active entry of ``namespace``; returns how many."""
    rows = conn.execute(
        f"SELECT key, text FROM long_term_memory WHERE {_ACTIVE} ORDER BY key", (namespace, now)
    ).fetchall()
    for row in rows:
        vector = local_hash(row["text"] or "", identity)
        conn.execute(
            "UPDATE long_term_memory SET embedding_provider = ?, embedding_model = ?,"
            " embedding_dimensions = ?, vector_json = ?, updated_at = ?"
            " WHERE namespace = ? AND key = ?",
            (
                identity.provider,
                identity.model,
                identity.dimensions,
                dumps(list(vector)),
                now,
                namespace,
                row["key"],
            ),
        )
    return len(rows)


def delete_expired_txn(conn: Db, now: str) -> int:
    """Delete every expired entry (garbage collection); returns how many."""
    cur = conn.execute(
        "DELETE FROM long_term_memory WHERE expires_at IS NOT NULL AND expires_at <= ?", (now,)
    )
    return cur.rowcount
