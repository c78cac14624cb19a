"""Protocol sessions and calls: what remote-protocol effects (MCP, A2A) did on the wire.

Rows come from ``ProtocolEvidence`` a worker reported with an effect's outcome (or, for a
protocol that learns something mid-effect, reported on its own). They are evidence for
operators and ``inspect``; recovery decides from the effect rows alone.

Invariants:
- a session's id is ``<effect id>/<key>`` and a call's ``<effect id>/<session key>/<index in
  its report>``, so reporting a session's evidence again (a later, fuller report) updates its
  rows in place, while a session with a new key (an A2A task observed again by a later
  execution of the same effect) adds rows beside the earlier ones and never overwrites them;
- a call keeps the position it was first stored at; a new call goes after the effect's others,
  so ``protocolCalls`` lists an effect's calls in the order they were made;
- every row belongs to an existing effect of its run (its task and attempt are copied from the
  effect row); evidence for an unknown effect is refused;
- evidence holds no secret values (the worker never reports headers); remote text is bounded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from agentctl.core.jsonvalue import JsonObject, JsonValue
from agentctl.errors import NotFoundError
from agentctl.ledger.rows import ROW_FORMAT_VERSION, dumps, fetch_all, loads_opt
from agentctl.ledger.sql import Db, dialect_of

if TYPE_CHECKING:  # signatures only: the models load with the remote-protocol effects
    from agentctl.core.protocols import ProtocolEvidence

_INSERT_SESSION = (
    "INSERT INTO protocol_sessions (session_id, format_version, run_id, task_id, attempt,"
    " effect_id, protocol, peer, endpoint, protocol_version, remote_session_id, peer_info_json,"
    " created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    " ON CONFLICT (session_id) DO UPDATE SET endpoint = excluded.endpoint,"
    " protocol_version = excluded.protocol_version,"
    " remote_session_id = excluded.remote_session_id, peer_info_json = excluded.peer_info_json"
)
_INSERT_CALL = (
    "INSERT OR REPLACE INTO protocol_calls (call_id, format_version, run_id, task_id, attempt,"
    " effect_id, position, session_id, protocol, peer, method, target, remote_id, status,"
    " detail, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
# PostgreSQL has no INSERT OR REPLACE: the same row replaced through an upsert.
_UPSERT_CALL = _INSERT_CALL.replace("INSERT OR REPLACE", "INSERT") + (
    " ON CONFLICT (call_id) DO UPDATE SET format_version = excluded.format_version,"
    " run_id = excluded.run_id, task_id = excluded.task_id, attempt = excluded.attempt,"
    " effect_id = excluded.effect_id, position = excluded.position,"
    " session_id = excluded.session_id, protocol = excluded.protocol, peer = excluded.peer,"
    " method = excluded.method, target = excluded.target, remote_id = excluded.remote_id,"
    " status = excluded.status, detail = excluded.detail, updated_at = excluded.updated_at"
)


def record_protocol_txn(conn: Db, effect_id: str, evidence: ProtocolEvidence, now: str) -> None:
    """Store (or update) one effect's protocol evidence; call it inside a transaction."""
    row = conn.execute(
        "SELECT run_id, task_id, attempt FROM effects WHERE effect_id = ?", (effect_id,)
    ).fetchone()
    if row is None:
        raise NotFoundError(f"protocol evidence names unknown effect {effect_id}")
    run_id, task_id, attempt = row[0], row[1], row[2]
    owner = (ROW_FORMAT_VERSION, run_id, task_id, attempt, effect_id)
    for s in evidence.sessions:
        session_row = (f"{effect_id}/{s.key}", *owner, s.protocol, s.peer, s.endpoint)
        detail_row = (s.protocol_version, s.remote_session_id, dumps(s.peer_info), now)
        conn.execute(_INSERT_SESSION, (*session_row, *detail_row))
    positions = _positions(conn, effect_id)
    for index, c in enumerate(evidence.calls):
        call_id = f"{effect_id}/{c.session_key or '-'}/{index}"
        position = positions.place(call_id)
        session = f"{effect_id}/{c.session_key}" if c.session_key is not None else None
        call_row = (call_id, *owner, position, session, c.protocol, c.peer)
        detail = (c.method, c.target, c.remote_id, c.status, c.detail, now)
        sql = _UPSERT_CALL if dialect_of(conn) == "postgresql" else _INSERT_CALL
        conn.execute(sql, (*call_row, *detail))


@dataclass
class _Positions:
    """Where an effect's calls sit: a known call keeps its place, a new one goes last."""

    known: dict[str, int]
    following: int

    def place(self, call_id: str) -> int:
        if call_id not in self.known:
            self.known[call_id] = self.following
            self.following += 1
        return self.known[call_id]


def _positions(conn: Db, effect_id: str) -> _Positions:
    rows = conn.execute(
        "SELECT call_id, position FROM protocol_calls WHERE effect_id = ?", (effect_id,)
    ).fetchall()
    known = {str(r[0]): int(r[1]) for r in rows}
    return _Positions(known, max(known.values(), default=-1) + 1)


@dataclass(frozen=True)
class ProtocolSessionRecord:
    """One protocol session (MCP, A2A) an effect opened, as recorded."""

    session_id: str
    run_id: str
    task_id: str
    attempt: int
    effect_id: str
    protocol: str
    peer: str
    endpoint: str
    protocol_version: str | None
    remote_session_id: str | None
    peer_info: JsonValue
    created_at: str

    def to_json(self) -> JsonObject:
        return {
            "sessionId": self.session_id,
            "runId": self.run_id,
            "taskId": self.task_id,
            "attempt": self.attempt,
            "effectId": self.effect_id,
            "protocol": self.protocol,
            "peer": self.peer,
            "endpoint": self.endpoint,
            "protocolVersion": self.protocol_version,
            "remoteSessionId": self.remote_session_id,
            "peerInfo": self.peer_info,
            "createdAt": self.created_at,
        }


@dataclass(frozen=True)
class ProtocolCallRecord:
    """One call made within a protocol session, as recorded."""

    call_id: str
    run_id: str
    task_id: str
    attempt: int
    effect_id: str
    session_id: str | None
    protocol: str
    peer: str
    method: str
    target: str | None
    remote_id: str | None
    status: str
    detail: str | None
    updated_at: str

    def to_json(self) -> JsonObject:
        return {
            "callId": self.call_id,
            "runId": self.run_id,
            "taskId": self.task_id,
            "attempt": self.attempt,
            "effectId": self.effect_id,
            "sessionId": self.session_id,
            "protocol": self.protocol,
            "peer": self.peer,
            "method": self.method,
            "target": self.target,
            "remoteId": self.remote_id,
            "status": self.status,
            "detail": self.detail,
            "updatedAt": self.updated_at,
        }


def list_protocol_sessions(conn: Db, run_id: str) -> list[ProtocolSessionRecord]:
    sql = "SELECT * FROM protocol_sessions WHERE run_id = ? ORDER BY created_at, session_id"
    return [
        ProtocolSessionRecord(
            session_id=r["session_id"],
            run_id=r["run_id"],
            task_id=r["task_id"],
            attempt=r["attempt"],
            effect_id=r["effect_id"],
            protocol=r["protocol"],
            peer=r["peer"],
            endpoint=r["endpoint"],
            protocol_version=r["protocol_version"],
            remote_session_id=r["remote_session_id"],
            peer_info=loads_opt(r["peer_info_json"]),
            created_at=r["created_at"],
        )
        for r in fetch_all(conn, sql, (run_id,), "protocol session")
    ]


def list_protocol_calls(conn: Db, run_id: str) -> list[ProtocolCallRecord]:
    sql = (
        "SELECT c.* FROM protocol_calls c JOIN effects e ON e.effect_id = c.effect_id"
        " WHERE c.run_id = ? ORDER BY e.requested_at, c.effect_id, c.position"
    )
    return [
        ProtocolCallRecord(
            call_id=r["call_id"],
            run_id=r["run_id"],
            task_id=r["task_id"],
            attempt=r["attempt"],
            effect_id=r["effect_id"],
            session_id=r["session_id"],
            protocol=r["protocol"],
            peer=r["peer"],
            method=r["method"],
            target=r["target"],
            remote_id=r["remote_id"],
            status=r["status"],
            detail=r["detail"],
            updated_at=r["updated_at"],
        )
        for r in fetch_all(conn, sql, (run_id,), "protocol call")
    ]
