"""Approval requests and their resolution, plus long-term memory rows.

Invariants:
- an approval's ``redacted_input`` is what the operator is shown, stored with every
  sensitive key's value replaced whole (``core.redact``, spec/cli.md §12); its effect keeps
  the request it executes;
- an approval is created ``pending`` and resolved at most once (approved | rejected, or
  ``cancelled`` when its run is cancelled while paused); resolving anything not pending raises
  a ``PersistenceError`` (exit 5) and writes nothing;
- resolution moves the approval's effect ``waiting_for_approval`` → ``requested`` (approved)
  or ``cancelled`` (rejected) in the same transaction, with audit event and checkpoint;
- long-term memory is keyed by (namespace, key); an expired entry reads as absent.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from agentctl.core.jsonvalue import JsonObject, JsonValue
from agentctl.core.redact import redact
from agentctl.errors import InvalidOperationError, PersistenceError
from agentctl.ledger.artifacts.values import dumps_value_opt, loads_value
from agentctl.ledger.audit import append_audit_txn, write_checkpoint_txn
from agentctl.ledger.budget_release import release_effect_txn
from agentctl.ledger.effects import resolve_waiting_effect_txn
from agentctl.ledger.idprefix import IdKind, find_row
from agentctl.ledger.rows import ROW_FORMAT_VERSION, fetch_all, fetch_one
from agentctl.ledger.sql import Db, Row
from agentctl.ledger.tool_calls import move_held_tool_call_txn


@dataclass(frozen=True)
class NewApproval:
    """An approval request to record for a held effect or tool call."""

    run_id: str
    task_id: str
    effect_id: str | None
    reason: str
    approval_id: str | None = None
    agent: str | None = None
    tool: str | None = None
    capability: str | None = None
    risk: str | None = None
    redacted_input: JsonValue = None
    expected_effect: str | None = None
    trace_id: str | None = None


@dataclass(frozen=True)
class ApprovalRecord:
    """One approval row as read back: the request and, once decided, its decision."""

    approval_id: str
    run_id: str
    task_id: str
    effect_id: str | None
    agent: str | None
    tool: str | None
    capability: str | None
    risk: str | None
    redacted_input: JsonValue
    expected_effect: str | None
    reason: str | None
    trace_id: str | None
    status: str
    created_at: str
    resolved_at: str | None
    resolved_by: str | None
    resolution_reason: str | None

    def to_json(self) -> JsonObject:
        return {
            "approvalId": self.approval_id,
            "runId": self.run_id,
            "taskId": self.task_id,
            "effectId": self.effect_id,
            "agent": self.agent,
            "tool": self.tool,
            "capability": self.capability,
            "risk": self.risk,
            "redactedInput": self.redacted_input,
            "expectedEffect": self.expected_effect,
            "status": self.status,
            "reason": self.reason,
            "traceId": self.trace_id,
            "createdAt": self.created_at,
            "resolvedAt": self.resolved_at,
            "resolvedBy": self.resolved_by,
            "resolutionReason": self.resolution_reason,
        }


def _approval(conn: Db, row: Row) -> ApprovalRecord:
    return ApprovalRecord(
        approval_id=row["approval_id"],
        run_id=row["run_id"],
        task_id=row["task_id"],
        effect_id=row["effect_id"],
        agent=row["agent"],
        tool=row["tool"],
        capability=row["capability"],
        risk=row["risk"],
        redacted_input=loads_value(conn, row["redacted_input_json"]),
        expected_effect=row["expected_effect"],
        reason=row["reason"],
        trace_id=row["trace_id"],
        status=row["status"],
        created_at=row["created_at"],
        resolved_at=row["resolved_at"],
        resolved_by=row["resolved_by"],
        resolution_reason=row["resolution_reason"],
    )


def insert_approval_txn(conn: Db, a: NewApproval, now: str) -> str:
    """Record a pending approval request; returns its id."""
    approval_id = a.approval_id or f"approval-{uuid.uuid4()}"
    conn.execute(
        "INSERT INTO approvals (approval_id, format_version, run_id, task_id, effect_id, agent,"
        " tool, capability, risk, redacted_input_json, expected_effect, reason, trace_id, status,"
        " created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?)",
        (
            approval_id,
            ROW_FORMAT_VERSION,
            a.run_id,
            a.task_id,
            a.effect_id,
            a.agent,
            a.tool,
            a.capability,
            a.risk,
            dumps_value_opt(conn, redact(a.redacted_input), now),  # sensitive keys: §12
            a.expected_effect,
            a.reason,
            a.trace_id,
            now,
        ),
    )
    payload = {"approvalId": approval_id, "effectId": a.effect_id, "reason": a.reason}
    append_audit_txn(
        conn, a.run_id, "approval.requested", payload, now, task_id=a.task_id, trace_id=a.trace_id
    )
    return approval_id


def get_approval(conn: Db, approval_id: str) -> ApprovalRecord:
    row = fetch_one(
        conn, "SELECT * FROM approvals WHERE approval_id = ?", (approval_id,), "approval"
    )
    return _approval(conn, row)


# An approval's id or a unique prefix of it, by the rule run ids follow (``idprefix``).
APPROVAL_ID = IdKind("approval", "approval_id", example="7e7f45")  # approval ids are uuid4


def find_approval(conn: Db, ref: str) -> ApprovalRecord:
    """The approval whose id is ``ref`` or uniquely starts with it (``approval-7e7f45``)."""
    return _approval(conn, find_row(conn, ref, "SELECT * FROM approvals", APPROVAL_ID))


def list_approvals(conn: Db, run_id: str, status: str | None = "pending") -> list[ApprovalRecord]:
    """Approvals of a run (pending ones by default), oldest first."""
    sql = "SELECT * FROM approvals WHERE run_id = ?"
    params: tuple[str, ...] = (run_id,)
    if status is not None:
        sql, params = sql + " AND status = ?", (run_id, status)
    rows = fetch_all(conn, sql + " ORDER BY created_at, rowid", params, "approval")
    return [_approval(conn, r) for r in rows]


def _decidable(conn: Db, approval_id: str, actor: str, reason: str) -> ApprovalRecord:
    """The pending approval a decision by ``actor`` for ``reason`` may resolve."""
    current = find_approval(conn, approval_id)
    if current.status != "pending":
        raise PersistenceError(f"approval {current.approval_id} is already {current.status}")
    if not reason.strip():
        raise InvalidOperationError("resolving an approval needs a reason")
    if not actor.strip():  # the record says who decided, as a reconciliation's does
        raise InvalidOperationError("resolving an approval needs a non-empty --actor")
    return current


def resolve_approval_txn(
    conn: Db,
    approval_id: str,
    approve: bool,
    actor: str,
    reason: str,
    now: str,
    *,
    trace_id: str | None = None,
) -> ApprovalRecord:
    """Approve or reject a pending approval (``approval_id``: its id or a unique prefix)
    and move its effect accordingly."""
    current = _decidable(conn, approval_id, actor, reason)
    approval_id = current.approval_id
    status = "approved" if approve else "rejected"
    conn.execute(
        "UPDATE approvals SET status = ?, resolved_at = ?, resolved_by = ?, resolution_reason = ?"
        " WHERE approval_id = ? AND status = 'pending'",
        (status, now, actor, reason, approval_id),
    )
    payload = {
        "approvalId": approval_id,
        "effectId": current.effect_id,  # as `approval.requested` names it
        "status": status,
        "actor": actor,
        "reason": reason,
    }
    # The decision is audited before what it moves (its effect, budget and tool call).
    append_audit_txn(
        conn,
        current.run_id,
        f"approval.{status}",
        payload,
        now,
        task_id=current.task_id,
        trace_id=trace_id,
    )
    if current.effect_id is not None:
        why = f"rejected by {actor}: {reason}"
        _release_effect_txn(conn, current, approve, why, now, trace_id)
    write_checkpoint_txn(
        conn, current.run_id, {"runId": current.run_id, "event": f"approval.{status}"}, now
    )
    return get_approval(conn, approval_id)


def _release_effect_txn(
    conn: Db, current: ApprovalRecord, approve: bool, why: str, now: str, trace_id: str | None
) -> None:
    """The approval's effect leaves ``waiting_approval`` (its event names ``trace_id``, the
    deciding invocation's); a rejected one never runs, so its budget reservation is settled
    with nothing, and a held tool call of an agent turn ends rejected with its approval."""
    assert current.effect_id is not None
    resolve_waiting_effect_txn(conn, current.effect_id, approve, now, trace_id=trace_id)
    if not approve:
        release_effect_txn(conn, current.run_id, current.effect_id, now, trace_id)
        error = f"approval {current.approval_id} {why}"
        move_held_tool_call_txn(conn, current.effect_id, "rejected", now, error=error)


def close_pending_txn(
    conn: Db,
    run_id: str,
    now: str,
    reason: str,
    *,
    resolver: str = "agentctl cancel",
    trace_id: str | None = None,
) -> None:
    """Close every pending approval of a run that was stopped for good: status ``cancelled``
    (resolved by ``resolver``), its effect ``cancelled`` (it never ran), audited with
    ``trace_id`` (the stopping invocation's); a later approve is refused as not pending."""
    for current in list_approvals(conn, run_id):
        conn.execute(
            "UPDATE approvals SET status = 'cancelled', resolved_at = ?, resolved_by = ?,"
            " resolution_reason = ? WHERE approval_id = ? AND status = 'pending'",
            (now, resolver, reason, current.approval_id),
        )
        payload = {
            "approvalId": current.approval_id,
            "effectId": current.effect_id,
            "status": "cancelled",
            "reason": reason,
        }
        task_id = current.task_id
        append_audit_txn(  # before what it moves, as a decision is
            conn, run_id, "approval.cancelled", payload, now, task_id=task_id, trace_id=trace_id
        )
        if current.effect_id is not None:
            resolve_waiting_effect_txn(conn, current.effect_id, False, now, trace_id=trace_id)
            move_held_tool_call_txn(conn, current.effect_id, "cancelled", now, error=reason)
