"""Approvals (pending → approved | rejected, moving the effect)."""

from __future__ import annotations

import pytest
from ledger_helpers import make_run, ts

from agentctl.errors import NotFoundError, PersistenceError
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


def _pause_for_approval(ledger: Database, task: str) -> tuple[str, str]:
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
            conn, NewApproval("run-1", task, eid, "mutations need approval", tool="shell"), ts(1)
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
        assert list_audit(conn, "run-1")[-1].event_type == "approval.approved"
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
