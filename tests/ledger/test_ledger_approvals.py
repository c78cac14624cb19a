"""Approvals (pending → approved | rejected, moving the effect)."""

from __future__ import annotations

import pytest
from ledger_helpers import make_run, ts

from agentctl.errors import NotFoundError, PersistenceError, ValidationError
from agentctl.ledger import NewApproval, NewEffect
from agentctl.ledger.approvals import (
    insert_approval_txn,
    list_approvals,
    resolve_approval_txn,
)
from agentctl.ledger.audit import list_audit
from agentctl.ledger.connection import Database
from agentctl.ledger.effects import get_effect, insert_effect_txn
from agentctl.ledger.lifecycle import settle_run_txn
from agentctl.ledger.model import SettleRun


def _pause_for_approval(
    ledger: Database, task: str, approval_id: str | None = None
) -> tuple[str, str]:
    effect = NewEffect(
        run_id="run-1",
        task_id=task,
        attempt=1,
        ordinal=0,
        operation="shell.exec",
        request={"argv": ["rm"]},
        effect_class="process_execution",
        risk="high",
        idempotency="unknown",
        waiting_for_approval=True,
    )
    with ledger.transaction() as conn:
        eid = insert_effect_txn(conn, effect, ts(1))
        aid = insert_approval_txn(
            conn,
            NewApproval("run-1", task, eid, "mutations need approval", approval_id, tool="shell"),
            ts(1),
        )
    return eid, aid


def test_approve_moves_effect_to_requested(ledger: Database) -> None:
    make_run(ledger)
    eid, aid = _pause_for_approval(ledger, "a")
    with ledger.read() as conn:
        assert get_effect(conn, eid).status == "waiting_for_approval"
        (pending,) = list_approvals(conn, "run-1")
        assert pending.to_json()["approvalId"] == aid and pending.status == "pending"
    with ledger.transaction() as conn:
        resolved = resolve_approval_txn(conn, aid, True, "alice", "looks fine", ts(2))
    assert (resolved.status, resolved.resolved_by, resolved.resolved_at) == (
        "approved",
        "alice",
        ts(2),
    )
    with ledger.read() as conn:
        assert get_effect(conn, eid).status == "requested"
        assert list_approvals(conn, "run-1") == []
        events = [e.event_type for e in list_audit(conn, "run-1")]
        assert events[-2:] == ["approval.approved", "effect.requested"]  # the decision first
    with pytest.raises(PersistenceError) as info, ledger.transaction() as conn:
        resolve_approval_txn(conn, aid, False, "bob", "changed my mind", ts(3))
    assert info.value.exit_code == 5


def test_reject_cancels_effect(ledger: Database) -> None:
    make_run(ledger)
    eid, aid = _pause_for_approval(ledger, "b")
    with ledger.transaction() as conn:
        resolve_approval_txn(conn, aid, False, "alice", "no", ts(2))
    with ledger.read() as conn:
        assert get_effect(conn, eid).status == "cancelled"
        assert [a.status for a in list_approvals(conn, "run-1", status=None)] == ["rejected"]
    with pytest.raises(NotFoundError), ledger.transaction() as conn:
        resolve_approval_txn(conn, "approval-missing", True, "a", "r", ts(3))


def test_an_approval_is_resolved_by_a_unique_prefix_of_its_id(ledger: Database) -> None:
    """As a run's id: the kind and at least 6 characters after it name the one approval
    that starts so; shorter is not found (an unset ``$APPROVAL`` must never approve whatever
    is alone), a shared prefix is ambiguous (exit 2); neither resolves anything."""
    make_run(ledger)
    _pause_for_approval(ledger, "a", "approval-abcdef01-0000-4000-8000-000000000001")
    _pause_for_approval(ledger, "b", "approval-abcdef02-0000-4000-8000-000000000002")
    _pause_for_approval(ledger, "c", "approval-xyzxyz00-0000-4000-8000-000000000003")
    refused = [
        (ValidationError, "approval-abcdef"),  # both a and b
        (NotFoundError, "approval-xyzxy"),  # unique, but 5 characters after the kind
        (NotFoundError, "approval-"),
        (NotFoundError, ""),
        (NotFoundError, "approval-qqqqqq"),
        (NotFoundError, "run-1"),  # another kind's id names no approval
    ]
    for error, ref in refused:
        with pytest.raises(error), ledger.transaction() as conn:
            resolve_approval_txn(conn, ref, True, "alice", "ok", ts(2))
    with ledger.read() as conn:
        assert [a.status for a in list_approvals(conn, "run-1")] == ["pending"] * 3
    with ledger.transaction() as conn:
        approved = resolve_approval_txn(conn, "approval-abcdef02", True, "alice", "ok", ts(2))
        rejected = resolve_approval_txn(conn, "approval-xyzxyz", False, "bob", "no", ts(2))
    assert approved.approval_id.startswith("approval-abcdef02-") and approved.task_id == "b"
    assert (rejected.task_id, rejected.status) == ("c", "rejected")
    with ledger.read() as conn:
        assert [a.task_id for a in list_approvals(conn, "run-1")] == ["a"]
        decided = [e for e in list_audit(conn, "run-1") if e.event_type.startswith("approval.")]
        assert decided[-1].payload["approvalId"] == rejected.approval_id


@pytest.mark.parametrize("state", ["failed", "paused"])
def test_a_failed_settle_closes_pending_approvals(ledger: Database, state: str) -> None:
    """A run a task's failure ended keeps no approval an operator could still approve; a
    paused one keeps it pending for the resume after the decision."""
    make_run(ledger)
    eid, aid = _pause_for_approval(ledger, "a")
    with ledger.transaction() as conn:
        settle_run_txn(conn, SettleRun("run-1", state, None, ts(2), 0))
    with ledger.read() as conn:
        (approval,) = list_approvals(conn, "run-1", status=None)
        events = [e.event_type for e in list_audit(conn, "run-1")]
        effect = get_effect(conn, eid).status
    if state == "paused":
        assert (approval.status, effect) == ("pending", "waiting_for_approval")
        return
    assert (approval.status, approval.resolved_by, effect) == (
        "cancelled",
        "agentctl failure",
        "cancelled",
    )
    assert "approval.cancelled" in events
    with pytest.raises(PersistenceError) as info, ledger.transaction() as conn:
        resolve_approval_txn(conn, aid, True, "alice", "late", ts(3))
    assert info.value.exit_code == 5
