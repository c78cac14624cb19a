"""Remote handles: the identity of remote work an effect started (an A2A task id).

A worker reports the handle mid-effect; the coordinator commits it here before the worker goes
on. It is what lets a later coordinator observe the same remote work instead of starting it
again.

Invariants:
- at most one handle per effect, written once: a second report of the *same* handle is a
  no-op, a different one is refused (``InvalidOperationError``), so a handle never changes;
- a handle is recorded only for an effect that is ``started`` (the only state a worker can be
  running it in);
- a ``started`` effect with a handle is *continuable*: claiming its run for resume leaves it
  started (it will be observed, not repeated) and it does not block resume; a stopping
  ``serve`` that hands its run back leaves it started too (``lifecycle.cancel_run_txn``).
"""

from __future__ import annotations

from dataclasses import dataclass

from agentctl.core.jsonvalue import JsonObject
from agentctl.errors import InvalidOperationError, NotFoundError
from agentctl.ledger.rows import ROW_FORMAT_VERSION, fetch_all
from agentctl.ledger.sql import Db, Row


@dataclass(frozen=True)
class RemoteHandleRecord:
    """The durable handle of remote work an effect started (an A2A task)."""

    effect_id: str
    run_id: str
    protocol: str  # "a2a"
    peer: str
    remote_task_id: str
    context_id: str | None
    created_at: str

    def to_json(self) -> JsonObject:
        return {
            "effectId": self.effect_id,
            "protocol": self.protocol,
            "peer": self.peer,
            "remoteTaskId": self.remote_task_id,
            "contextId": self.context_id,
            "createdAt": self.created_at,
        }


def _record(row: Row) -> RemoteHandleRecord:
    return RemoteHandleRecord(
        effect_id=row["effect_id"],
        run_id=row["run_id"],
        protocol=row["protocol"],
        peer=row["peer"],
        remote_task_id=row["remote_task_id"],
        context_id=row["context_id"],
        created_at=row["created_at"],
    )


def record_handle_txn(conn: Db, handle: RemoteHandleRecord) -> None:
    """Persist ``handle`` for its started effect (idempotent for the same handle)."""
    row = conn.execute(
        "SELECT run_id, status FROM effects WHERE effect_id = ?", (handle.effect_id,)
    ).fetchone()
    if row is None:
        raise NotFoundError(f"effect {handle.effect_id} not found")
    known = get_handle(conn, handle.effect_id)
    if known is not None:
        if known.remote_task_id != handle.remote_task_id or known.peer != handle.peer:
            raise InvalidOperationError(
                f"effect {handle.effect_id} already observes remote task "
                f"{known.remote_task_id}; it cannot change to {handle.remote_task_id}"
            )
        return
    if row["status"] != "started":
        raise InvalidOperationError(
            f"effect {handle.effect_id} is {row['status']}; only a started effect gets a handle"
        )
    conn.execute(
        "INSERT INTO remote_handles (effect_id, format_version, run_id, protocol, peer,"
        " remote_task_id, context_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (
            handle.effect_id,
            ROW_FORMAT_VERSION,
            row["run_id"],
            handle.protocol,
            handle.peer,
            handle.remote_task_id,
            handle.context_id,
            handle.created_at,
        ),
    )


def get_handle(conn: Db, effect_id: str) -> RemoteHandleRecord | None:
    rows = fetch_all(
        conn, "SELECT * FROM remote_handles WHERE effect_id = ?", (effect_id,), "remote handle"
    )
    return _record(rows[0]) if rows else None


def list_handles(conn: Db, run_id: str) -> list[RemoteHandleRecord]:
    sql = "SELECT * FROM remote_handles WHERE run_id = ? ORDER BY created_at, effect_id"
    return [_record(r) for r in fetch_all(conn, sql, (run_id,), "remote handle")]


# A started effect whose remote work has a durable handle (SQL over ``effects e``).
CONTINUABLE = (
    "(e.status = 'started' AND EXISTS"
    " (SELECT 1 FROM remote_handles h WHERE h.effect_id = e.effect_id))"
)
