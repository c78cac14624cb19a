"""The effect ledger: identity, guarded status moves, tool calls, reconciliation."""

from __future__ import annotations

import uuid
from dataclasses import replace
from typing import Any

import pytest
from ledger_helpers import make_run, ts

from agentctl.core.effects import effect_id, input_digest
from agentctl.errors import InvalidOperationError, NotFoundError, ReconciliationConflictError
from agentctl.ledger import NewEffect
from agentctl.ledger.audit import list_audit
from agentctl.ledger.connection import Database
from agentctl.ledger.effects import (
    finish_effect_txn,
    get_effect,
    insert_effect_txn,
    latest_effect_for,
    list_effects,
    mark_uncertain_txn,
    start_effect_txn,
)
from agentctl.ledger.reconcile import list_reconciliations, reconcile_effect_txn, unresolved_effects
from agentctl.ledger.tool_calls import finish_tool_call_txn, insert_tool_call_txn, list_tool_calls


def _effect(task: str = "a", ordinal: int = 0, attempt: int = 1, run: str = "run-1") -> NewEffect:
    return NewEffect(
        run_id=run,
        task_id=task,
        attempt=attempt,
        ordinal=ordinal,
        operation="builtin.write",
        request={"path": "out.txt", "n": ordinal},
        effect_class="workspace_mutate",
        risk="medium",
        idempotency="idempotent",
        trace_id="trace-1",
    )


def _started(ledger: Database, effect: NewEffect) -> str:
    with ledger.transaction() as conn:
        eid = insert_effect_txn(conn, effect, ts(1))
        start_effect_txn(conn, eid, ts(2))
    return eid


def test_identity_and_request_row(ledger: Database) -> None:
    make_run(ledger)
    e = _effect()
    with ledger.transaction() as conn:
        eid = insert_effect_txn(conn, e, ts(1))
    assert eid == effect_id("run-1", "a", 1, 0, "builtin.write", input_digest(e.request))
    with ledger.read() as conn:
        rec = get_effect(conn, eid)
    assert (rec.status, rec.confirmed, rec.idempotency_key, rec.request) == (
        "requested",
        False,
        eid,
        e.request,
    )
    assert set(rec.to_json()) >= {
        "effectId",
        "runId",
        "taskId",
        "attempt",
        "ordinal",
        "operation",
        "effectClass",
        "risk",
        "idempotency",
        "status",
        "confirmed",
        "requestedAt",
        "startedAt",
        "completedAt",
    }


def test_status_moves_are_guarded(ledger: Database) -> None:
    make_run(ledger)
    with ledger.transaction() as conn:
        eid = insert_effect_txn(conn, _effect(), ts(1))
    with pytest.raises(InvalidOperationError, match="not started"), ledger.transaction() as c:
        finish_effect_txn(c, eid, "succeeded", ts(2), result={"ok": 1})
    with ledger.transaction() as conn:
        start_effect_txn(conn, eid, ts(2))
    with pytest.raises(InvalidOperationError, match="not requested"), ledger.transaction() as c:
        start_effect_txn(c, eid, ts(3))
    with ledger.transaction() as conn:
        finish_effect_txn(conn, eid, "succeeded", ts(3), result={"ok": 1})
    with ledger.read() as conn:
        rec = get_effect(conn, eid)
    assert (rec.status, rec.confirmed, rec.result, rec.completed_at) == (
        "succeeded",
        True,
        {"ok": 1},
        ts(3),
    )
    with pytest.raises(InvalidOperationError), ledger.transaction() as conn:
        finish_effect_txn(conn, eid, "failed", ts(4), error="late")
    with pytest.raises(NotFoundError), ledger.transaction() as conn:
        start_effect_txn(conn, "0" * 64, ts(4))


def test_crash_marks_started_uncertain_and_they_are_unresolved(ledger: Database) -> None:
    make_run(ledger)
    started = _started(ledger, _effect("a", 0))
    with ledger.transaction() as conn:
        requested = insert_effect_txn(conn, _effect("b", 0), ts(3))
        assert mark_uncertain_txn(conn, "run-1", ts(4), why="lost") == [started]
    with ledger.read() as conn:
        assert get_effect(conn, started).status == "uncertain"
        assert get_effect(conn, started).error == "lost"  # why, for inspect to show
        assert get_effect(conn, requested).status == "requested"
        assert [e.effect_id for e in unresolved_effects(conn, "run-1")] == [started]


def test_list_and_latest_follow_compiled_order(ledger: Database) -> None:
    make_run(ledger, tasks=("b", "a"))
    with ledger.transaction() as conn:
        a1 = insert_effect_txn(conn, _effect("a", 1), ts(1))
        a0 = insert_effect_txn(conn, _effect("a", 0), ts(1))
        b0 = insert_effect_txn(conn, _effect("b", 0), ts(2))
    with ledger.read() as conn:
        assert [e.effect_id for e in list_effects(conn, "run-1")] == [b0, a0, a1]
        assert [e.effect_id for e in list_effects(conn, "run-1", "a")] == [a0, a1]
        latest = latest_effect_for(conn, "run-1", "a", 1)
        assert latest is not None and latest.effect_id == a1
        assert latest_effect_for(conn, "run-1", "a", 2) is None


def test_tool_call_finishes_with_its_effect(ledger: Database) -> None:
    make_run(ledger)
    eid = _started(ledger, _effect())
    with ledger.transaction() as conn:
        insert_tool_call_txn(conn, "run-1", "call-1", "a", "search", {"q": 1}, ts(2), effect_id=eid)
    with ledger.transaction() as conn:
        finish_effect_txn(conn, eid, "succeeded", ts(3), result={"hits": 0})
        finish_tool_call_txn(conn, "run-1", "call-1", "succeeded", ts(3), output={"hits": 0})
    with ledger.read() as conn:
        (record,) = list_tool_calls(conn, "run-1")
    call = record.to_json()
    assert {k: call[k] for k in ("callId", "taskId", "tool", "status")} == {
        "callId": "call-1",
        "taskId": "a",
        "tool": "search",
        "status": "succeeded",
    }
    with pytest.raises(InvalidOperationError), ledger.transaction() as conn:
        finish_tool_call_txn(conn, "run-1", "call-1", "failed", ts(4))


def _reconcile(ledger: Database, eid: str, status: str, **kw: Any) -> Any:
    args: dict[str, Any] = {"evidence": None, "result": None, "compensation_effect_id": None}
    args.update(kw)
    with ledger.transaction() as conn:
        return reconcile_effect_txn(
            conn,
            eid,
            status,
            "ops",
            "checked by hand",
            args["evidence"],
            args["result"],
            args["compensation_effect_id"],
            ts(9),
            reconciliation_id=f"reconciliation-{uuid.uuid4()}",
        )


def test_reconciliation_is_an_append_only_chain(ledger: Database) -> None:
    make_run(ledger)
    eid = _started(ledger, _effect())
    with pytest.raises(InvalidOperationError, match="result"):
        _reconcile(ledger, eid, "applied")
    first = _reconcile(ledger, eid, "applied", result={"ok": True})
    assert first.evidence == {"kind": "operator_statement", "statement": "checked by hand"}
    second = _reconcile(ledger, eid, "applied", result={"ok": True})
    assert second.supersedes_id == first.reconciliation_id
    with pytest.raises(ReconciliationConflictError, match="contradictory"):
        _reconcile(ledger, eid, "not_applied")
    with ledger.read() as conn:
        chain = list_reconciliations(conn, effect_id=eid)
        assert [r.reconciliation_id for r in chain] == [
            first.reconciliation_id,
            second.reconciliation_id,
        ]
        assert unresolved_effects(conn, "run-1") == []
        assert list_audit(conn, "run-1")[-1].event_type == "effect.reconciled"
    with pytest.raises(NotFoundError):
        _reconcile(ledger, "f" * 64, "not_applied")


def test_first_record_rules(ledger: Database) -> None:
    make_run(ledger)
    with ledger.transaction() as conn:
        requested = insert_effect_txn(conn, _effect("a", 0), ts(1))
    with pytest.raises(ReconciliationConflictError):
        _reconcile(ledger, requested, "not_applied")  # nothing to reconcile yet
    started = _started(ledger, _effect("b", 0))
    with pytest.raises(ReconciliationConflictError):
        _reconcile(ledger, started, "compensated", compensation_effect_id=requested)


def test_compensation_needs_a_confirmed_other_effect(ledger: Database) -> None:
    make_run(ledger)
    done = _started(ledger, _effect("a", 0))
    undo = _started(ledger, _effect("b", 0))
    with ledger.transaction() as conn:
        finish_effect_txn(conn, done, "succeeded", ts(3), result={})
    with pytest.raises(ReconciliationConflictError):
        _reconcile(ledger, done, "compensated", compensation_effect_id=done)
    with pytest.raises(ReconciliationConflictError, match="neither confirmed"):
        _reconcile(ledger, done, "compensated", compensation_effect_id=undo)
    with ledger.transaction() as conn:
        finish_effect_txn(conn, undo, "succeeded", ts(4), result={})
    rec = _reconcile(ledger, done, "compensated", compensation_effect_id=undo)
    assert rec.compensation_effect_id == undo


def test_compensation_from_an_unrelated_run_is_refused(ledger: Database) -> None:
    make_run(ledger)
    make_run(ledger, "run-other")
    make_run(ledger, "run-comp", mode="compensation", source_run_id="run-1")
    done = _started(ledger, _effect("a", 0))
    foreign = _started(ledger, _effect("a", 0, run="run-other"))
    inverse = _started(ledger, _effect("a", 0, run="run-comp"))
    with ledger.transaction() as conn:
        for eid in (done, foreign, inverse):
            finish_effect_txn(conn, eid, "succeeded", ts(3), result={})
    with pytest.raises(ReconciliationConflictError, match="not in run"):
        _reconcile(ledger, done, "compensated", compensation_effect_id=foreign)
    assert _reconcile(ledger, done, "compensated", compensation_effect_id=inverse)


def test_an_effect_recorded_started_at_once_keeps_both_events(ledger: Database) -> None:
    """The fast path writes the row ``started`` in one statement; the audit log still has the
    ``requested`` and the ``started`` event, in that order, on consecutive sequences."""
    make_run(ledger)
    with ledger.read() as conn:
        before = len(list_audit(conn, "run-1"))
    with ledger.transaction() as conn:
        eid = insert_effect_txn(conn, _effect(), ts(1), started=True)
    with ledger.read() as conn:
        rec = get_effect(conn, eid)
        events = list_audit(conn, "run-1")[before:]
    assert (rec.status, rec.requested_at, rec.started_at) == ("started", ts(1), ts(1))
    statuses = [e.payload.get("status") if isinstance(e.payload, dict) else None for e in events]
    assert [e.event_type for e in events] == ["effect.requested", "effect.started"]
    assert statuses == ["requested", "started"]
    assert [e.sequence for e in events] == [before + 1, before + 2]
    with ledger.transaction() as conn:  # it finishes like one started by an update
        finish_effect_txn(conn, eid, "succeeded", ts(2), result={"ok": 1})
    with ledger.read() as conn:
        assert get_effect(conn, eid).confirmed


def test_an_effect_held_for_approval_cannot_be_recorded_started(ledger: Database) -> None:
    make_run(ledger)
    held = replace(_effect(), waiting_for_approval=True)
    with (
        pytest.raises(InvalidOperationError, match="waits for approval"),
        ledger.transaction() as c,
    ):
        insert_effect_txn(c, held, ts(1), started=True)
    with ledger.read() as conn:
        assert list_effects(conn, "run-1") == []
