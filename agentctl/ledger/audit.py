"""Audit events and checkpoints: the per-run, append-only history of what happened.

Invariants:
- sequences are per run, start at 1 and have no gaps; the next one is taken inside the
  writer's IMMEDIATE transaction, so concurrent writers cannot collide;
- a checkpoint's ``checksum`` is the SHA-256 hex of its stored ``state_json`` text and is
  verified on every read; a mismatch raises ``PersistenceError``;
- rows are never updated or deleted here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agentctl.core.canonical import sha256_hex
from agentctl.core.jsonvalue import JsonObject, JsonValue
from agentctl.errors import PersistenceError
from agentctl.ledger.artifacts.values import dumps_value, loads_value
from agentctl.ledger.rows import ROW_FORMAT_VERSION, dumps, fetch_all, loads_opt
from agentctl.ledger.sql import Db, Row

# The next sequence is a scalar subquery in VALUES, not ``INSERT … SELECT … FROM`` the same
# table: SQLite runs the latter through a temporary table (the SELECT may not see the rows it
# inserts), about four times the cost of the row itself, on the ~7 rows of every effect step.
_INSERT_AUDIT = """INSERT INTO audit_events
    (run_id, sequence, format_version, event_type, task_id, trace_id, payload_json, created_at)
    VALUES (?1, (SELECT COALESCE(MAX(sequence), 0) + 1 FROM audit_events WHERE run_id = ?1),
    ?2, ?3, ?4, ?5, ?6, ?7)"""

_INSERT_CHECKPOINT = """INSERT INTO checkpoints
    (run_id, sequence, format_version, state_json, checksum, created_at)
    VALUES (?1, (SELECT COALESCE(MAX(sequence), 0) + 1 FROM checkpoints WHERE run_id = ?1),
    ?2, ?3, ?4, ?5)"""


@dataclass(frozen=True)
class AuditEvent:
    """One row of a run's append-only audit log."""

    run_id: str
    sequence: int
    event_type: str
    task_id: str | None
    trace_id: str | None
    payload: JsonValue
    created_at: str

    def to_json(self) -> JsonObject:
        return {
            "runId": self.run_id,
            "sequence": self.sequence,
            "eventType": self.event_type,
            "taskId": self.task_id,
            "traceId": self.trace_id,
            "payload": self.payload,
            "createdAt": self.created_at,
        }


@dataclass(frozen=True)
class Checkpoint:
    """One recorded checkpoint of a run's state, with its checksum."""

    run_id: str
    sequence: int
    format_version: int
    state: JsonValue
    checksum: str
    created_at: str

    def to_json(self) -> JsonObject:
        return {
            "runId": self.run_id,
            "sequence": self.sequence,
            "formatVersion": self.format_version,
            "state": self.state,
            "checksum": self.checksum,
            "createdAt": self.created_at,
        }


def append_audit_txn(
    conn: Db,
    run_id: str,
    event_type: str,
    payload: object,
    now: str,
    *,
    task_id: str | None = None,
    trace_id: str | None = None,
) -> None:
    conn.execute(
        _INSERT_AUDIT,
        (
            run_id,
            ROW_FORMAT_VERSION,
            event_type,
            task_id,
            trace_id,
            dumps_value(conn, payload, now),
            now,
        ),
    )


@dataclass(frozen=True)
class NewAuditEvent:
    """One event of :func:`append_audits_txn`: what :func:`append_audit_txn` takes per call."""

    event_type: str
    payload: object
    task_id: str | None = None
    trace_id: str | None = None
    created_at: str | None = None  # None: the ``now`` of the call that writes it


class AuditBuffer:
    """Events a transaction has decided but not yet written, in order.

    The write path collects a step's events here and writes them in one ``executemany``
    (``flush_audits_txn``) before anything else audits, so the sequences come out exactly as
    if each had been written at once. An event is kept as its columns, not as a
    ``NewAuditEvent`` (the frozen dataclass costs more to build than the row it becomes).
    """

    __slots__ = ("_events", "_written")

    def __init__(self) -> None:
        self._events: list[tuple[str, object, str | None, str | None, str | None]] = []
        self._written = 0  # events flushed so far: a ``mark`` stays valid across flushes

    def __bool__(self) -> bool:
        return bool(self._events)

    def add(
        self,
        event_type: str,
        payload: object,
        task_id: str | None = None,
        trace_id: str | None = None,
        created_at: str | None = None,
    ) -> None:
        """One event; ``created_at`` None: the ``now`` of the flush."""
        self._events.append((event_type, payload, task_id, trace_id, created_at))

    def flush_txn(self, conn: Db, run_id: str, now: str) -> None:
        """Write the events (one statement call) and forget them.

        Consecutive events given the very same payload object (a task's ``ready`` and
        ``running``) share its one encoding: all are encoded here, after the last ``add``.
        """
        self.flush_through_txn(conn, run_id, now, self.mark())

    def mark(self) -> int:
        """Where the buffer ends now, for ``flush_through_txn``."""
        return self._written + len(self._events)

    def flush_through_txn(self, conn: Db, run_id: str, now: str, mark: int) -> None:
        """Write the events added before ``mark`` still held (one statement call) and forget
        them; later ones stay, in order (a deferred settlement's own record goes between)."""
        count = mark - self._written
        if count <= 0:
            return
        rows = []
        last: object = _NO_PAYLOAD
        text = ""
        held = self._events
        for kind, body, task, trace, at in held if count == len(held) else held[:count]:
            if body is not last:
                text, last = dumps_value(conn, body, now), body
            rows.append((run_id, ROW_FORMAT_VERSION, kind, task, trace, text, at or now))
        conn.executemany(_INSERT_AUDIT, rows)
        del self._events[:count]
        self._written += count


_NO_PAYLOAD = object()  # no event's payload: the first event is always encoded


def append_audits_txn(conn: Db, run_id: str, events: Sequence[NewAuditEvent], now: str) -> None:
    """Several events in the given order, as one prepared statement run once per event.

    Each run of the statement takes the next sequence after the row the run before inserted,
    so the sequences stay gapless and in order, exactly as with one call per event.
    """
    conn.executemany(
        _INSERT_AUDIT,
        [
            (
                run_id,
                ROW_FORMAT_VERSION,
                e.event_type,
                e.task_id,
                e.trace_id,
                dumps_value(conn, e.payload, now),
                e.created_at or now,
            )
            for e in events
        ],
    )


def flush_audits_txn(conn: Db, run_id: str, buffer: AuditBuffer | None, now: str) -> None:
    """Write the events ``buffer`` holds (one statement call) and empty it."""
    if buffer:
        buffer.flush_txn(conn, run_id, now)


def write_checkpoint_txn(conn: Db, run_id: str, state: object, now: str) -> None:
    text = dumps(state)
    conn.execute(_INSERT_CHECKPOINT, (run_id, ROW_FORMAT_VERSION, text, sha256_hex(text), now))


# The effect columns an ``effect.<status>`` event is built from (a status UPDATE returns them).
# Not the row's ``trace_id``: that names the invocation that requested the effect (part of the
# effect's record), while the event names the one writing the change.
EFFECT_AUDIT_COLUMNS = "run_id, task_id, attempt, operation, status"
_EFFECT_ROW = f"SELECT {EFFECT_AUDIT_COLUMNS} FROM effects WHERE effect_id = ?"


@dataclass(frozen=True)
class PolicyVerdict:
    """The policy's decision that let an effect be requested: ``allow`` or ``require_approval``
    (a denial records no effect: the task fails with the denial as its error)."""

    decision: str
    reason: str


def audit_effect_txn(
    conn: Db,
    effect_id: str,
    now: str,
    policy: PolicyVerdict | None = None,
    row: Mapping[str, Any] | None = None,
    buffer: AuditBuffer | None = None,
    *,
    trace_id: str | None = None,
) -> None:
    """Audit the effect's current status as ``effect.<status>``, in the caller's transaction.

    Called right after each status change, so every effect transition (requested, started,
    succeeded, failed, uncertain, cancelled, waiting_for_approval) is an audit event with the
    run's next sequence. ``row``: the effect's ``EFFECT_AUDIT_COLUMNS`` when the caller has
    them (no read again); ``buffer``: collect the event there (stamped ``now``), not written;
    ``trace_id``: the trace of the invocation making the change (None: none is known).
    """
    if row is None:
        row = conn.execute(_EFFECT_ROW, (effect_id,)).fetchone()
    if row is None:
        return
    if buffer is not None:
        status = f"effect.{row['status']}"
        body = effect_payload(effect_id, row, policy)
        buffer.add(status, body, row["task_id"], trace_id, now)
        return
    event = effect_event(effect_id, row, policy, now, trace_id)
    append_audit_txn(
        conn,
        row["run_id"],
        event.event_type,
        event.payload,
        now,
        task_id=event.task_id,
        trace_id=event.trace_id,
    )


def effect_event(
    effect_id: str,
    row: Mapping[str, Any],
    policy: PolicyVerdict | None = None,
    created_at: str | None = None,
    trace_id: str | None = None,
) -> NewAuditEvent:
    """The ``effect.<status>`` event of an effect whose ``EFFECT_AUDIT_COLUMNS`` are ``row``,
    written by the invocation whose trace is ``trace_id``.

    The payload holds identities only: no request, result or error text, so nothing a
    redactor would have to catch is copied here.
    """
    payload = effect_payload(effect_id, row, policy)
    return NewAuditEvent(f"effect.{row['status']}", payload, row["task_id"], trace_id, created_at)


def effect_payload(
    effect_id: str, row: Mapping[str, Any], policy: PolicyVerdict | None = None
) -> JsonObject:
    """The payload of an ``effect.<status>`` event (see ``effect_event``)."""
    payload: JsonObject = {
        "effectId": effect_id,
        "operation": row["operation"],
        "attempt": row["attempt"],
        "status": row["status"],
    }
    if policy is not None:  # the decision that let it be requested, audited with the request
        payload["policy"] = {"decision": policy.decision, "reason": policy.reason}
    return payload


def list_audit(conn: Db, run_id: str, after: int = 0) -> list[AuditEvent]:
    """The run's audit events with a sequence above ``after``, in sequence order."""
    rows = fetch_all(
        conn,
        "SELECT * FROM audit_events WHERE run_id = ? AND sequence > ? ORDER BY sequence",
        (run_id, after),
        "audit",
    )
    return [
        AuditEvent(
            run_id=r["run_id"],
            sequence=r["sequence"],
            event_type=r["event_type"],
            task_id=r["task_id"],
            trace_id=r["trace_id"],
            payload=loads_value(conn, r["payload_json"]),
            created_at=r["created_at"],
        )
        for r in rows
    ]


def _checkpoint(row: Row) -> Checkpoint:
    text = row["state_json"]
    if sha256_hex(text) != row["checksum"]:
        raise PersistenceError(
            f"checkpoint {row['sequence']} of run {row['run_id']} is corrupt: "
            "its checksum does not match its stored state"
        )
    return Checkpoint(
        run_id=row["run_id"],
        sequence=row["sequence"],
        format_version=row["format_version"],
        state=loads_opt(text),
        checksum=row["checksum"],
        created_at=row["created_at"],
    )


def list_checkpoints(conn: Db, run_id: str) -> list[Checkpoint]:
    rows = fetch_all(
        conn,
        "SELECT * FROM checkpoints WHERE run_id = ? ORDER BY sequence",
        (run_id,),
        "checkpoint",
    )
    return [_checkpoint(r) for r in rows]


def latest_checkpoint(conn: Db, run_id: str) -> Checkpoint | None:
    rows = fetch_all(
        conn,
        "SELECT * FROM checkpoints WHERE run_id = ? ORDER BY sequence DESC LIMIT 1",
        (run_id,),
        "checkpoint",
    )
    return _checkpoint(rows[0]) if rows else None
