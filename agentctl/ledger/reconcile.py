"""Operator reconciliation of effects: append-only conclusions with evidence.

Invariants (spec/cli.md §4):
- rows are only ever inserted; each new record's ``supersedes_id`` is the previous latest
  record of the same effect, so the history is a chain and the last row is effective;
- the status rules are ``agentctl.core.effects.check_reconciliation``; they and the rules of a
  compensation effect are store rules: refused with ``ReconciliationConflictError`` (exit 5,
  spec/cli.md §4 "5 (store rules)"), an unknown effect with ``NotFoundError`` (exit 5); a
  request missing what its status needs (a result, a compensation effect) stays exit 4;
- ``applied`` carries a result; ``compensated`` names a different, confirmed (or reconciled
  applied) effect of the same run or of a compensation run sourced from it;
- an ``effect.reconciled`` audit event and a checkpoint commit with the record; the event
  also carries the operator's ``Grounds`` (policy authorization, result schema) when given;
- a ``started`` effect of a run a live process drives (its lease: ``leases.has_live_owner``) is
  not reconciled: that coordinator is executing it and will record its outcome, which an
  operator's conclusion would contradict (``OwnershipError``, exit 5) — only an effect whose
  driver is gone (a crash) has an outcome nobody else will learn;
- an ``applied`` or ``not_applied`` record settles the effect's budget reservation in the same
  transaction when it is still active (``budget_release.settle_reconciled_txn``): the first
  such record does, a later one finds it settled and counts nothing again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from agentctl.core.effects import check_reconciliation
from agentctl.core.jsonvalue import JsonObject, JsonValue
from agentctl.errors import InvalidOperationError, OwnershipError, ReconciliationConflictError
from agentctl.ledger import leases, sessions, tool_calls
from agentctl.ledger.artifacts.values import dumps_value, dumps_value_opt, loads_value
from agentctl.ledger.audit import append_audit_txn, write_checkpoint_txn
from agentctl.ledger.budget_release import settle_reconciled_txn
from agentctl.ledger.effects import EffectRecord, get_effect
from agentctl.ledger.remote import CONTINUABLE
from agentctl.ledger.rows import ROW_FORMAT_VERSION, fetch_all
from agentctl.ledger.sql import Db, Row


@dataclass(frozen=True)
class ReconciliationRecord:
    """An operator's reconciliation of an uncertain effect, with its evidence."""

    reconciliation_id: str
    effect_id: str
    run_id: str
    status: str
    actor: str
    reason: str
    evidence: JsonValue
    result: JsonValue
    compensation_effect_id: str | None
    supersedes_id: str | None
    trace_id: str | None
    created_at: str
    # From the record's `effect.reconciled` audit event (the row has no columns for them):
    # the policy's authorization and the result's JSON Schema, None when not recorded.
    authorization: JsonValue = None
    result_schema: JsonValue = None

    def to_json(self) -> JsonObject:
        return {
            "reconciliationId": self.reconciliation_id,
            "effectId": self.effect_id,
            "runId": self.run_id,
            "status": self.status,
            "actor": self.actor,
            "reason": self.reason,
            "evidence": self.evidence,
            "result": self.result,
            "compensationEffectId": self.compensation_effect_id,
            "supersedesId": self.supersedes_id,
            "traceId": self.trace_id,
            "createdAt": self.created_at,
            "authorization": self.authorization,
            "resultSchema": self.result_schema,
        }


def _record(conn: Db, row: Row, grounds: JsonObject) -> ReconciliationRecord:
    return ReconciliationRecord(
        reconciliation_id=row["reconciliation_id"],
        effect_id=row["effect_id"],
        run_id=row["run_id"],
        status=row["status"],
        actor=row["actor"],
        reason=row["reason"],
        evidence=loads_value(conn, row["evidence_json"]),
        result=loads_value(conn, row["result_json"]),
        compensation_effect_id=row["compensation_effect_id"],
        supersedes_id=row["supersedes_id"],
        trace_id=row["trace_id"],
        created_at=row["created_at"],
        authorization=grounds.get("authorization"),
        result_schema=grounds.get("resultSchema"),
    )


def list_reconciliations(
    conn: Db, *, run_id: str | None = None, effect_id: str | None = None, grounds: bool = False
) -> list[ReconciliationRecord]:
    """Reconciliation records in the order they were appended. ``grounds``: with their
    authorization and result schema, read from the audit log — only what a record shown to a
    user needs; recovery and the reconcile rules read the rows alone."""
    if effect_id is not None:
        sql, params = "SELECT * FROM effect_reconciliations WHERE effect_id = ?", (effect_id,)
    elif run_id is not None:
        sql, params = "SELECT * FROM effect_reconciliations WHERE run_id = ?", (run_id,)
    else:
        raise InvalidOperationError("list_reconciliations needs a run or an effect")
    rows = fetch_all(conn, sql + " ORDER BY rowid", params, "reconciliation")
    found = _recorded_grounds(conn, {str(r["run_id"]) for r in rows}) if grounds else {}
    return [_record(conn, r, found.get((r["trace_id"], r["effect_id"]), {})) for r in rows]


def _recorded_grounds(conn: Db, run_ids: set[str]) -> dict[tuple[str, str], JsonObject]:
    """The ``effect.reconciled`` audit payloads of ``run_ids``, by (trace id, effect id):
    each reconciliation is one invocation with its own trace, so the pair names one record."""
    found: dict[tuple[str, str], JsonObject] = {}
    sql = (
        "SELECT trace_id, payload_json, format_version FROM audit_events"  # (checked by fetch_all)
        " WHERE run_id = ? AND event_type = 'effect.reconciled' ORDER BY sequence"
    )
    for run_id in sorted(run_ids):
        for row in fetch_all(conn, sql, (run_id,), "audit"):
            payload = loads_value(conn, row["payload_json"])
            if row["trace_id"] is not None and isinstance(payload, dict):
                found[(str(row["trace_id"]), str(payload.get("effectId")))] = payload
    return found


def _check_compensation(conn: Db, effect: EffectRecord, compensation_effect_id: str | None) -> None:
    if not compensation_effect_id:
        raise InvalidOperationError("compensated needs a compensation effect; none was given")
    if compensation_effect_id == effect.effect_id:
        raise ReconciliationConflictError(
            "compensated needs a compensation effect other than itself"
        )
    comp = get_effect(conn, compensation_effect_id)
    if comp.run_id != effect.run_id:
        row = conn.execute(
            "SELECT mode, source_run_id FROM runs WHERE run_id = ?", (comp.run_id,)
        ).fetchone()
        if row is None or row["mode"] != "compensation" or row["source_run_id"] != effect.run_id:
            raise ReconciliationConflictError(
                f"compensation effect {comp.effect_id} is not in run {effect.run_id} "
                "or a compensation run sourced from it"
            )
    history = list_reconciliations(conn, effect_id=comp.effect_id)
    applied = bool(history) and history[-1].status == "applied"
    if not ((comp.status == "succeeded" and comp.confirmed) or applied):
        raise ReconciliationConflictError(
            f"compensation effect {comp.effect_id} is neither confirmed nor reconciled applied"
        )


def _check_rules(
    conn: Db, effect: EffectRecord, history: list[ReconciliationRecord], r: ReconciliationRecord
) -> None:
    """Refuse to append ``r`` (not yet inserted) with an empty actor or reason, a
    contradiction, a result-less ``applied`` or an invalid compensation."""
    if not r.actor.strip() or not r.reason.strip():
        raise InvalidOperationError("a reconciliation needs a non-empty actor and reason")
    check_reconciliation(effect.status, effect.confirmed, [h.status for h in history], r.status)
    if r.status == "applied" and r.result is None:
        raise InvalidOperationError("an applied reconciliation needs the effect's result")
    if r.status == "compensated":
        _check_compensation(conn, effect, r.compensation_effect_id)


def _refuse_live(conn: Db, effect: EffectRecord, now: str) -> None:
    """Refuse an effect still executing under the live process that drives its run."""
    if effect.status == "started" and leases.has_live_owner(conn, effect.run_id, now):
        raise OwnershipError(
            f"effect {effect.effect_id} is still being executed by the live coordinator of "
            f"run {effect.run_id}, which will record its outcome; nothing was recorded "
            "(wait for the run to end; an effect only a crashed coordinator started is "
            "reconciled after it)",
            run_id=effect.run_id,
        )


@dataclass(frozen=True)
class Grounds:
    """What an operator's reconciliation rests on beyond its evidence: the policy's
    authorization and the JSON Schema its result was checked against. The record's row has no
    column for them (see ``_audit``), so the ``effect.reconciled`` audit event carries them."""

    authorization: JsonObject | None = None
    result_schema: JsonValue = None


# What a reconciliation tells a provider session of its model call (``sessions.settle_txn``).
_SETTLES = {"applied": "succeeded", "not_applied": "failed"}


def reconcile_effect_txn(
    conn: Db,
    effect_id: str,
    status: str,
    actor: str,
    reason: str,
    evidence: JsonValue,
    result: JsonValue,
    compensation_effect_id: str | None,
    now: str,
    *,
    reconciliation_id: str,
    trace_id: str | None = None,
    grounds: Grounds = Grounds(),
    tool_output: JsonValue = None,
    rates: Mapping[str, int] | None = None,
) -> ReconciliationRecord:
    """Append a reconciliation record for ``effect_id`` after checking every rule; an applied
    agent tool call's row is finished with ``tool_output`` (None: the result); an applied model
    call's usage is priced at ``rates`` (None: its price is unknown)."""
    effect = get_effect(conn, effect_id)
    _refuse_live(conn, effect, now)
    leases.fence_out_expired_txn(conn, effect.run_id, now)
    history = list_reconciliations(conn, effect_id=effect_id)
    record = ReconciliationRecord(
        reconciliation_id=reconciliation_id,
        effect_id=effect_id,
        run_id=effect.run_id,
        status=status,
        actor=actor,
        reason=reason,
        evidence=evidence or {"kind": "operator_statement", "statement": reason},
        result=result,
        compensation_effect_id=compensation_effect_id if status == "compensated" else None,
        supersedes_id=history[-1].reconciliation_id if history else None,
        trace_id=trace_id,
        created_at=now,
        authorization=grounds.authorization,
        result_schema=grounds.result_schema,
    )
    _check_rules(conn, effect, history, record)
    _insert(conn, record)
    _audit(conn, effect, record, grounds)
    if status in _SETTLES:
        _settle_txn(conn, effect, history, record, rates)
    if status == "applied":  # the resumed agent reuses the result: its call is over
        output = result if tool_output is None else tool_output
        tool_calls.finish_applied_txn(conn, effect.run_id, effect_id, output, now)
    return record


def _settle_txn(
    conn: Db,
    effect: EffectRecord,
    history: list[ReconciliationRecord],
    r: ReconciliationRecord,
    rates: Mapping[str, int] | None,
) -> None:
    """What an ``applied`` or ``not_applied`` record settles: the effect's budget reservation
    while it is still active (once: a later record finds it settled), and a model call's
    session, which learns how its latest call ended."""
    settle_reconciled_txn(conn, effect, r.status, r.result, r.created_at, r.trace_id, rates)
    replaces = _superseded(history) if r.status == "applied" else None
    sessions.settle_txn(conn, r.effect_id, _SETTLES[r.status], r.result, r.created_at, replaces)


def _superseded(history: list[ReconciliationRecord]) -> JsonValue:
    """The answer of the latest earlier ``applied`` record: repeating ``applied`` (the only
    later record it allows but ``compensated``) supersedes it, so the call's usage is the new
    record's, never the sum of both."""
    return next((h.result for h in reversed(history) if h.status == "applied"), None)


def _audit(conn: Db, effect: EffectRecord, r: ReconciliationRecord, grounds: Grounds) -> None:
    payload: JsonObject = {
        "effectId": r.effect_id,
        "status": r.status,
        "actor": r.actor,
        "reason": r.reason,
    }
    # The original stores these in the record's own columns (result_schema_json,
    # authorization_json); ours has none until a schema version adds them, and an audit event
    # commits in the same transaction, append-only, so the authorization is never lost.
    if grounds.authorization is not None:
        payload["authorization"] = grounds.authorization
    state = {"runId": effect.run_id, "event": "effect.reconciled", **payload}
    if grounds.result_schema is not None:  # the audit event only: a checkpoint stays small
        payload["resultSchema"] = grounds.result_schema
    append_audit_txn(
        conn,
        effect.run_id,
        "effect.reconciled",
        payload,
        r.created_at,
        task_id=effect.task_id,
        trace_id=r.trace_id,
    )
    write_checkpoint_txn(conn, effect.run_id, state, r.created_at)


def _insert(conn: Db, r: ReconciliationRecord) -> None:
    conn.execute(
        "INSERT INTO effect_reconciliations (reconciliation_id, effect_id, run_id,"
        " format_version, status, actor, reason, evidence_json, result_json,"
        " compensation_effect_id, supersedes_id, trace_id, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            r.reconciliation_id,
            r.effect_id,
            r.run_id,
            ROW_FORMAT_VERSION,
            r.status,
            r.actor,
            r.reason,
            dumps_value(conn, r.evidence, r.created_at),
            dumps_value_opt(conn, r.result, r.created_at),
            r.compensation_effect_id,
            r.supersedes_id,
            r.trace_id,
            r.created_at,
        ),
    )


def unresolved_effects(conn: Db, run_id: str) -> list[EffectRecord]:
    """Started or uncertain effects of the run with no reconciliation: they block resume —
    except a started one with a remote handle, which resume observes (``ledger.remote``)."""
    rows = conn.execute(
        "SELECT e.effect_id FROM effects e WHERE e.run_id = ?"
        " AND e.status IN ('started', 'uncertain') AND NOT EXISTS"
        " (SELECT 1 FROM effect_reconciliations r WHERE r.effect_id = e.effect_id)"
        f" AND NOT {CONTINUABLE}"
        " ORDER BY e.requested_at, e.effect_id",
        (run_id,),
    ).fetchall()
    return [get_effect(conn, r["effect_id"]) for r in rows]
