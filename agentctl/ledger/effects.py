"""The effect ledger: one row per effect on the outside world, with guarded status moves.

Invariants (spec/cli.md §4, DESIGN.md §3):
- the ``requested`` row commits before any executor runs; identity = SHA-256 over
  run, task, attempt, ordinal, operation and input digest; ``idempotency_key`` = identity;
- status moves are guarded single statements: start only from ``requested``, finish only
  from ``started``; ``succeeded`` sets ``confirmed = 1``; ``waiting_for_approval`` moves to
  ``requested`` (approved) or ``cancelled`` (rejected) only; a ``requested`` one ends
  ``cancelled`` when its run is stopped for good, its ``error`` saying why
  (``cancel_requested_txn``);
- a tool effect and its tool-call row finish in the same transaction (the caller's).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass

from agentctl.core.effects import effect_id as core_effect_id
from agentctl.core.effects import input_digest as core_input_digest
from agentctl.core.jsonvalue import JsonObject, JsonValue
from agentctl.errors import InvalidOperationError, NotFoundError
from agentctl.ledger import sessions
from agentctl.ledger.artifacts.values import (
    dumps_value,
    dumps_value_opt,
    loads_value,
    spill_text,
)
from agentctl.ledger.audit import (
    EFFECT_AUDIT_COLUMNS,
    AuditBuffer,
    PolicyVerdict,
    audit_effect_txn,
    effect_payload,
)
from agentctl.ledger.idprefix import find_hex_prefix
from agentctl.ledger.rows import ROW_FORMAT_VERSION, fetch_all, fetch_one
from agentctl.ledger.sql import Db, Row, SqlParam

FINISHED_STATUSES = frozenset({"succeeded", "failed", "uncertain"})


@dataclass(frozen=True)
class NewEffect:
    """An effect to record as requested: its identity's parts, request and class."""

    run_id: str
    task_id: str
    attempt: int
    ordinal: int
    operation: str
    request: JsonValue
    effect_class: str
    risk: str
    idempotency: str
    trace_id: str | None = None
    waiting_for_approval: bool = False
    policy: PolicyVerdict | None = None  # audited with the request; not part of the identity
    # What the caller computed already when it decided the effect's identity from these very
    # fields: the digest of ``request``, the canonical JSON it hashed (stored as the request
    # column as is) and the identity. Then the request is neither encoded nor hashed again.
    known_input_digest: str | None = None
    known_request_text: str | None = None
    known_effect_id: str | None = None

    @property
    def input_digest(self) -> str:
        return self.known_input_digest or self._input_digest

    @property
    def effect_id(self) -> str:
        return self.known_effect_id or self._effect_id

    # Cached: each is a canonical-JSON digest of the request, asked for several times per step.
    @functools.cached_property
    def _input_digest(self) -> str:
        return core_input_digest(self.request)

    @functools.cached_property
    def _effect_id(self) -> str:
        return core_effect_id(
            self.run_id, self.task_id, self.attempt, self.ordinal, self.operation, self.input_digest
        )


@dataclass(frozen=True)
class EffectRecord:
    """One effect row as read back: identity, status and confirmed outcome."""

    effect_id: str
    run_id: str
    task_id: str
    attempt: int
    ordinal: int
    operation: str
    input_digest: str
    effect_class: str
    risk: str
    idempotency: str
    idempotency_key: str
    status: str
    request: JsonValue
    result: JsonValue
    error: str | None
    requested_at: str
    started_at: str | None
    completed_at: str | None
    trace_id: str | None
    confirmed: bool
    format_version: int = ROW_FORMAT_VERSION

    def to_json(self) -> JsonObject:
        """Our flat keys (spec/cli.md §1) and, under ``request``, the original's request object."""
        return {
            "effectId": self.effect_id,
            "runId": self.run_id,
            "taskId": self.task_id,
            "attempt": self.attempt,
            "ordinal": self.ordinal,
            "operation": self.operation,
            "inputDigest": self.input_digest,
            "effectClass": self.effect_class,
            "risk": self.risk,
            "idempotency": self.idempotency,
            "idempotencyKey": self.idempotency_key,
            "status": self.status,
            "confirmed": self.confirmed,
            "request": self.request_json(),
            "result": self.result,
            "error": self.error,
            "requestedAt": self.requested_at,
            "startedAt": self.started_at,
            "completedAt": self.completed_at,
            "traceId": self.trace_id,
        }

    def request_json(self) -> JsonObject:
        """The effect as requested, under the original's names: a script written for it reads
        ``effects[0].request.id``. ``input`` is the request payload; ``expectedEffect`` is the
        effect class, as the approval rows record it (nothing else describes it)."""
        return {
            "formatVersion": self.format_version,
            "id": self.effect_id,
            "runId": self.run_id,
            "taskId": self.task_id,
            "attempt": self.attempt,
            "ordinal": self.ordinal,
            "operation": self.operation,
            "effectClass": self.effect_class,
            "risk": self.risk,
            "idempotency": self.idempotency,
            "idempotencyKey": self.idempotency_key,
            "inputDigest": self.input_digest,
            "input": self.request,
            "expectedEffect": self.effect_class,
            "traceId": self.trace_id,
        }


def _effect(conn: Db, row: Row) -> EffectRecord:
    return EffectRecord(
        effect_id=row["effect_id"],
        run_id=row["run_id"],
        task_id=row["task_id"],
        attempt=row["attempt"],
        ordinal=row["ordinal"],
        operation=row["operation"],
        input_digest=row["input_digest"],
        effect_class=row["effect_class"],
        risk=row["risk"],
        idempotency=row["idempotency"],
        idempotency_key=row["idempotency_key"],
        status=row["status"],
        request=loads_value(conn, row["request_json"]),
        result=loads_value(conn, row["result_json"]),
        error=row["error"],
        requested_at=row["requested_at"],
        started_at=row["started_at"],
        completed_at=row["completed_at"],
        trace_id=row["trace_id"],
        confirmed=bool(row["confirmed"]),
        format_version=int(row["format_version"]),
    )


_INSERT_EFFECT = """INSERT INTO effects (effect_id, format_version, run_id, task_id, attempt,
    ordinal, operation, input_digest, effect_class, risk, idempotency, idempotency_key, status,
    request_json, requested_at, started_at, trace_id)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"""


def insert_effect_txn(
    conn: Db,
    effect: NewEffect,
    now: str,
    *,
    started: bool = False,
    buffer: AuditBuffer | None = None,
) -> str:
    """Record an effect as ``requested`` (or ``waiting_for_approval``); returns its id.

    ``started``: the effect is requested and started in this one transaction (the fast path,
    DESIGN.md §8), so the row is written ``started`` at once — one statement instead of an
    insert and a guarded update — and both transitions are audited, ``requested`` first
    (into ``buffer`` when given: the caller writes them with its other events).
    """
    effect_id = effect.effect_id
    status = "waiting_for_approval" if effect.waiting_for_approval else "requested"
    if started and effect.waiting_for_approval:
        raise InvalidOperationError(f"effect {effect_id} waits for approval: it cannot start")
    identity = (effect_id, ROW_FORMAT_VERSION, effect.run_id, effect.task_id, effect.attempt)
    kind = (effect.ordinal, effect.operation, effect.input_digest, effect.effect_class)
    text = effect.known_request_text
    request = (
        dumps_value(conn, effect.request, now) if text is None else spill_text(conn, text, now)
    )
    stored = "started" if started else status
    rest = (effect.risk, effect.idempotency, effect_id, stored, request, now)
    conn.execute(
        _INSERT_EFFECT, (*identity, *kind, *rest, now if started else None, effect.trace_id)
    )
    events = AuditBuffer() if buffer is None else buffer
    _add_inserted(events, effect, status, started)
    if buffer is None:
        events.flush_txn(conn, effect.run_id, now)
    return effect_id


def _add_inserted(buffer: AuditBuffer, effect: NewEffect, status: str, started: bool) -> None:
    """The events of a new effect row: its status, and ``started`` too on the fast path."""
    written = {
        "task_id": effect.task_id,
        "attempt": effect.attempt,
        "operation": effect.operation,
        "status": status,
    }
    # The row's trace is the inserting invocation's own: both events name it as their writer.
    task_id, trace_id = effect.task_id, effect.trace_id
    payload = effect_payload(effect.effect_id, written, effect.policy)
    buffer.add(f"effect.{status}", payload, task_id, trace_id)
    if started:
        payload = effect_payload(effect.effect_id, written | {"status": "started"})
        buffer.add("effect.started", payload, task_id, trace_id)


def _status_of(conn: Db, effect_id: str) -> str:
    row = conn.execute("SELECT status FROM effects WHERE effect_id = ?", (effect_id,)).fetchone()
    if row is None:
        raise NotFoundError(f"effect {effect_id} not found")
    return str(row["status"])


def _guarded_txn(
    conn: Db,
    effect_id: str,
    sql: str,
    params: tuple[SqlParam, ...],
    want: str,
    now: str,
    buffer: AuditBuffer | None = None,
    known: Mapping[str, SqlParam] | None = None,
    trace_id: str | None = None,
) -> None:
    """One guarded status change, audited from the columns the UPDATE returns, or from
    ``known`` (the row's ``EFFECT_AUDIT_COLUMNS`` after the change, as the caller wrote them):
    then nothing is returned (SQLite buffers a RETURNING row set and Python builds a row).
    ``trace_id``: the trace of the invocation making the change, named by its event."""
    if known is not None:
        if conn.execute(sql, params).rowcount != 1:
            found = _status_of(conn, effect_id)
            raise InvalidOperationError(f"effect {effect_id} is {found}, not {want}")
        audit_effect_txn(conn, effect_id, now, row=known, buffer=buffer, trace_id=trace_id)
        return
    row = conn.execute(f"{sql} RETURNING {EFFECT_AUDIT_COLUMNS}", params).fetchone()
    if row is None:
        found = _status_of(conn, effect_id)
        raise InvalidOperationError(f"effect {effect_id} is {found}, not {want}")
    audit_effect_txn(conn, effect_id, now, row=row, buffer=buffer, trace_id=trace_id)


def start_effect_txn(conn: Db, effect_id: str, now: str, *, trace_id: str | None = None) -> None:
    """``requested`` → ``started``; the executor may run once this commits. ``trace_id``: the
    starting invocation's (its event names it; the row keeps the requester's)."""
    _guarded_txn(
        conn,
        effect_id,
        "UPDATE effects SET status = 'started', started_at = ?"
        " WHERE effect_id = ? AND status = 'requested'",
        (now, effect_id),
        "requested",
        now,
        trace_id=trace_id,
    )


def finish_effect_txn(
    conn: Db,
    effect_id: str,
    status: str,
    now: str,
    *,
    result: JsonValue = None,
    error: str | None = None,
    result_text: str | None = None,
    buffer: AuditBuffer | None = None,
    known: Mapping[str, SqlParam] | None = None,
    trace_id: str | None = None,
) -> None:
    """``started`` → succeeded (confirmed) | failed | uncertain.

    ``result_text``: the canonical JSON of ``result`` when the caller has it (not encoded
    again); ``buffer``: the ``effect.<status>`` event is collected there, not written;
    ``known``: the row's audit columns after the change (see ``_guarded_txn``);
    ``trace_id``: the finishing invocation's, named by the event.
    """
    if status not in FINISHED_STATUSES:
        raise InvalidOperationError(f"an effect cannot finish as {status!r}")
    if result_text is None:
        stored = dumps_value_opt(conn, result, now)
    else:
        stored = spill_text(conn, result_text, now)
    _guarded_txn(
        conn,
        effect_id,
        "UPDATE effects SET status = ?, result_json = ?, error = ?, completed_at = ?,"
        " confirmed = ? WHERE effect_id = ? AND status = 'started'",
        (status, stored, error, now, int(status == "succeeded"), effect_id),
        "started",
        now,
        buffer,
        known,
        trace_id,
    )


def cancel_unsent_txn(
    conn: Db, effect_id: str, now: str, *, why: str, trace_id: str | None = None
) -> bool:
    """``started`` → ``cancelled``: a stop cut the effect before its request left its worker
    (the worker said so), so it did not happen, saying ``why``; by the stopping invocation,
    whose trace is ``trace_id``. An effect no longer ``started`` is left as it is (False)."""
    moved = conn.execute(
        "UPDATE effects SET status = 'cancelled', completed_at = ?, error = ?"
        " WHERE effect_id = ? AND status = 'started'",
        (now, why, effect_id),
    )
    if moved.rowcount != 1:
        return False
    audit_effect_txn(conn, effect_id, now, trace_id=trace_id)
    return True


def resolve_waiting_effect_txn(
    conn: Db, effect_id: str, approved: bool, now: str, *, trace_id: str | None = None
) -> None:
    """``waiting_for_approval`` → ``requested`` (approved) or ``cancelled`` (rejected), by the
    invocation whose trace is ``trace_id`` (an approve, a reject, a cancel)."""
    new = "requested" if approved else "cancelled"
    completed = None if approved else now
    _guarded_txn(
        conn,
        effect_id,
        "UPDATE effects SET status = ?, completed_at = ?"
        " WHERE effect_id = ? AND status = 'waiting_for_approval'",
        (new, completed, effect_id),
        "waiting_for_approval",
        now,
        trace_id=trace_id,
    )


# Why an effect found ``started`` became ``uncertain`` (its ``error``, shown by inspect).
LOST_BY_CRASH = (
    "the coordinator that started it stopped (crashed or was killed) before its outcome was "
    "recorded: it may have run; reconcile it"
)
STOPPED_IN_FLIGHT = (
    "the run was stopped while it was in flight (--timeout-seconds, a signal, or a serve "
    "shutting down): its outcome is unknown; reconcile it"
)


def mark_uncertain_txn(
    conn: Db,
    run_id: str,
    now: str,
    *,
    why: str,
    keep: str | None = None,
    trace_id: str | None = None,
) -> list[str]:
    """Every ``started`` effect of the run becomes ``uncertain`` (after a crash or cancel),
    saying ``why``, except those the SQL condition ``keep`` (over ``effects e``) selects; the
    events name ``trace_id``, the invocation that found them so (a resume, a cancel, a claim)."""
    moved = _EndAll(run_id, "started", "uncertain", now, why, trace_id)
    ids = _end_all_txn(conn, moved, f" AND NOT {keep}" if keep else "")
    sessions.settle_many_txn(conn, ids, "uncertain", now)  # a model call's session says so
    return ids


def cancel_requested_txn(
    conn: Db, run_id: str, now: str, *, why: str, trace_id: str | None = None
) -> list[str]:
    """Every ``requested`` effect of a run stopped for good becomes ``cancelled`` saying
    ``why``: it never started (approved, or recorded before a worker took it) and a terminal
    run never will start it; returns their ids. Audited under ``trace_id``, the stopping
    invocation's."""
    return _end_all_txn(conn, _EndAll(run_id, "requested", "cancelled", now, why, trace_id))


@dataclass(frozen=True)
class _EndAll:
    """One status move of every effect of a run in status ``old``, saying ``why``."""

    run_id: str
    old: str
    new: str
    now: str
    why: str
    trace_id: str | None


def _end_all_txn(conn: Db, move: _EndAll, extra: str = "") -> list[str]:
    """Apply ``move`` (``extra``: a further SQL condition over ``effects e``), each guarded
    and audited, in request order; returns the ids moved."""
    where = f"e.run_id = ? AND e.status = ?{extra}"
    rows = conn.execute(
        f"SELECT e.effect_id FROM effects e WHERE {where} ORDER BY e.requested_at, e.effect_id",
        (move.run_id, move.old),
    )
    ids = [str(r[0]) for r in rows]
    conn.executemany(
        "UPDATE effects SET status = ?, completed_at = ?, error = ?"
        " WHERE effect_id = ? AND status = ?",
        [(move.new, move.now, move.why, effect_id, move.old) for effect_id in ids],
    )
    for effect_id in ids:
        audit_effect_txn(conn, effect_id, move.now, trace_id=move.trace_id)
    return ids


EFFECT_ID_CHARS = 64
MIN_EFFECT_PREFIX = 6  # shorter hex would name too many effects to be worth a lookup


def find_effect_id(conn: Db, ref: str) -> str:
    """The id of the effect whose id is ``ref`` or uniquely starts with it (as runs are
    named by a unique prefix); a whole id is returned as given, for the lookup to judge."""
    ref = ref.lower()
    if len(ref) == EFFECT_ID_CHARS:
        return ref
    if any(c not in "0123456789abcdef" for c in ref):
        raise NotFoundError(f"effect {ref} not found (an effect id is {EFFECT_ID_CHARS} hex)")
    if len(ref) < MIN_EFFECT_PREFIX:
        # Not found, whatever it would have matched as a prefix: an unknown id is exit 5
        # (spec/cli.md §2), as a run id too short to be a prefix is (ledger.idprefix).
        raise NotFoundError(
            f"effect {ref!r} not found (a prefix of an effect id needs at least "
            f"{MIN_EFFECT_PREFIX} hex digits)"
        )
    return find_hex_prefix(conn, ref, "effects", "effect_id", "effect")


def get_effect(conn: Db, effect_id: str) -> EffectRecord:
    return _effect(
        conn, fetch_one(conn, "SELECT * FROM effects WHERE effect_id = ?", (effect_id,), "effect")
    )


def list_effects(conn: Db, run_id: str, task_id: str | None = None) -> list[EffectRecord]:
    """Effects of a run (optionally one task), in request order."""
    sql = "SELECT e.* FROM effects e JOIN task_states t USING (run_id, task_id) WHERE run_id = ?"
    params: tuple[SqlParam, ...] = (run_id,)
    if task_id is not None:
        sql += " AND task_id = ?"
        params = (run_id, task_id)
    sql += " ORDER BY t.position, e.attempt, e.ordinal"
    return [_effect(conn, r) for r in fetch_all(conn, sql, params, "effect")]


def latest_effect_for(conn: Db, run_id: str, task_id: str, attempt: int) -> EffectRecord | None:
    rows = fetch_all(
        conn,
        "SELECT * FROM effects WHERE run_id = ? AND task_id = ? AND attempt = ?"
        " ORDER BY ordinal DESC LIMIT 1",
        (run_id, task_id, attempt),
        "effect",
    )
    return _effect(conn, rows[0]) if rows else None
