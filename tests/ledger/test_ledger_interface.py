"""The ``RunLedger`` protocol steps on a real SQLite file, through ``SqliteLedger`` only."""

from __future__ import annotations

import os
from dataclasses import replace

import pytest
from ledger_helpers import new_run, ts

from agentctl.core.longterm import Entry
from agentctl.core.protocols import ProtocolCall, ProtocolEvidence, ProtocolSession
from agentctl.errors import (
    AgentctlError,
    CancelledRunError,
    InvalidOperationError,
    NotFoundError,
    OwnershipError,
    ReconciliationConflictError,
)
from agentctl.ledger import (
    ApprovalDecision,
    BatchCommit,
    BudgetDenial,
    CallRecord,
    CancelRun,
    EffectOutcome,
    EffectStartBatch,
    Finished,
    MemoryPut,
    NewEffect,
    Owner,
    ProtocolReport,
    ReconcileRequest,
    RequestBatch,
    RequestRow,
    RunLedger,
    SettleRun,
    SqliteLedger,
    TaskStart,
    TaskStartBatch,
)
from agentctl.ledger.owners import process_start_time


def _owner() -> Owner:
    """This process as a live owner, its start time read now and as the ledger reads it: a
    reading adds the boot time, which moves when the wall clock is stepped (a paused VM), so
    one taken long before — or psutil's, whose boot time is read once per process — can
    differ from the ledger's own by whole seconds."""
    return Owner(os.getpid(), process_start_time(os.getpid()))


def _effect(task: str, *, approval: bool = False, attempt: int = 1) -> NewEffect:
    request = {"path": f"{task}.txt"}
    effect = NewEffect("run-1", task, attempt, 0, "builtin.write", request, "mutation", "low", "")
    return replace(
        effect, idempotency="idempotent", trace_id="trace-1", waiting_for_approval=approval
    )


def _request(ledger: RunLedger, *rows: RequestRow) -> tuple[BudgetDenial, ...]:
    return ledger.record_requests(RequestBatch("run-1", rows, ts(1), "trace-1"))


@pytest.fixture
def ledger(run_ledger: SqliteLedger) -> SqliteLedger:
    led = run_ledger  # SQLite and PostgreSQL (conftest)
    led.create_run(new_run(limits={"maxToolCalls": 2}), ("a", "b", "c"), _owner(), ts(0))
    return led


def test_requested_and_started_commit_together_with_the_reservation(ledger: SqliteLedger) -> None:
    denied = _request(ledger, RequestRow("a", "pending", 1, _effect("a"), {"toolCalls": 1}))
    assert denied == ()
    inspection = ledger.inspect_run("run-1")
    assert [e.status for e in inspection.effects] == ["started"]
    assert inspection.tasks[0].state == "running"
    assert inspection.budget.reserved == {"toolCalls": 1}
    with pytest.raises(OwnershipError):  # the run is leased by its creator
        ledger.acquire_lease("run-1", Owner(2, 2.0), ts(1))


def test_budget_denial_records_no_effect(ledger: SqliteLedger) -> None:
    rows = [RequestRow(t, "pending", 1, _effect(t), {"toolCalls": 1}) for t in ("a", "b", "c")]
    # The denial says which limit refused the task, as a value (never a message to parse).
    assert _request(ledger, *rows) == (BudgetDenial("c", "toolCalls", 2, 3),)
    assert [e.task_id for e in ledger.list_effects("run-1").effects] == ["a", "b"]


def test_finish_settles_the_budget_and_writes_long_term_memory(ledger: SqliteLedger) -> None:
    eff = _effect("a")
    _request(ledger, RequestRow("a", "pending", 1, eff, {"toolCalls": 1}))
    put = MemoryPut("ns", "k", Entry({"v": 1}, '{"v":1}', {}))
    spent = {"toolCalls": 1}
    outcome = EffectOutcome("run-1", eff.effect_id, "succeeded", ts(2), {"ok": True}, None, spent)
    outcome = replace(outcome, trace_id="trace-1", long_term_put=put)
    ledger.finish_effects([outcome])
    inspection = ledger.inspect_run("run-1")
    assert inspection.effects[0].status == "succeeded" and inspection.effects[0].confirmed
    assert inspection.budget.usage == {"toolCalls": 1} and inspection.budget.reserved == {
        "toolCalls": 0
    }
    assert ledger.long_term_get("ns", "k", ts(3)).value == {"v": 1}
    assert not ledger.long_term_get("ns", "missing", ts(3)).found
    assert ledger.recorded_result(eff.effect_id) == {"ok": True}


def test_batch_commit_is_in_compiled_order_with_memory_and_deferred_outcomes(
    ledger: SqliteLedger,
) -> None:
    eff = _effect("b")
    _request(ledger, RequestRow("b", "pending", 1, eff, {}))
    outcome = EffectOutcome("run-1", eff.effect_id, "succeeded", ts(2), {"n": 2})
    items = [
        Finished("a", "succeeded", 1, from_state="pending", output={"n": 1}),
        Finished("b", "succeeded", 1, from_state="running", output={"n": 2}),
    ]
    ledger.commit_batch(BatchCommit("run-1", items, {"count": 2}, ts(3), "trace-1", (), [outcome]))
    live = ledger.load_live("run-1")
    assert [(t.task_id, t.state) for t in live.tasks[:2]] == [
        ("a", "succeeded"),
        ("b", "succeeded"),
    ]
    assert ledger.read_outputs("run-1", ["b", "a"]) == {"a": {"n": 1}, "b": {"n": 2}}
    assert live.working_memory == {"count": 2} and live.inflight == ()
    audit = [e.event_type for e in ledger.inspect_run("run-1").audit if e.task_id]
    assert audit.index("task.succeeded") < len(audit) - 1  # a then b, both audited


def test_pipelined_requests_commit_the_previous_completion_first(ledger: SqliteLedger) -> None:
    eff_a, eff_b = _effect("a"), _effect("b")
    _request(ledger, RequestRow("a", "pending", 1, eff_a, {}))
    before = len(ledger.inspect_run("run-1").checkpoints)
    outcome = EffectOutcome("run-1", eff_a.effect_id, "succeeded", ts(2), {"n": 1})
    done = Finished("a", "succeeded", 1, from_state="running", output={"n": 1})
    after = BatchCommit("run-1", [done], {"m": 1}, ts(2), "trace-1", (), [outcome])
    row = RequestRow("b", "pending", 1, eff_b, {})
    ledger.record_requests(RequestBatch("run-1", [row], ts(2), "trace-1", after))
    seen = ledger.inspect_run("run-1")
    assert [(e.task_id, e.status) for e in seen.effects] == [("a", "succeeded"), ("b", "started")]
    assert [(t.task_id, t.state) for t in seen.tasks[:2]] == [("a", "succeeded"), ("b", "running")]
    (checkpoint,) = seen.checkpoints[before:]  # one transaction, one checkpoint
    assert checkpoint.state["committed"] == [{"taskId": "a", "state": "succeeded", "attempt": 1}]
    assert "workingMemoryDigest" in checkpoint.state


def test_agent_starts_commit_the_previous_completion_first(ledger: SqliteLedger) -> None:
    eff_a = _effect("a")
    _request(ledger, RequestRow("a", "pending", 1, eff_a, {}))
    before = len(ledger.inspect_run("run-1").checkpoints)
    outcome = EffectOutcome("run-1", eff_a.effect_id, "succeeded", ts(2), {"n": 1})
    done = Finished("a", "succeeded", 1, from_state="running", output={"n": 1})
    after = BatchCommit("run-1", [done], None, ts(2), "trace-1", (), [outcome])
    start = TaskStartBatch("run-1", [TaskStart("b", "pending", 1)], ts(2), "trace-1", after)
    ledger.start_tasks(start)
    seen = ledger.inspect_run("run-1")
    assert [(t.task_id, t.state) for t in seen.tasks[:2]] == [("a", "succeeded"), ("b", "running")]
    assert [(e.task_id, e.status) for e in seen.effects] == [("a", "succeeded")]
    (checkpoint,) = seen.checkpoints[before:]
    assert checkpoint.state["event"] == "tasks.started"
    assert checkpoint.state["committed"] == [{"taskId": "a", "state": "succeeded", "attempt": 1}]


def test_a_refused_request_rolls_back_the_completion_it_carries(ledger: SqliteLedger) -> None:
    eff_a = _effect("a")
    _request(ledger, RequestRow("a", "pending", 1, eff_a, {}))
    outcome = EffectOutcome("run-1", eff_a.effect_id, "succeeded", ts(2), {"n": 1})
    done = Finished("a", "succeeded", 1, from_state="running", output={"n": 1})
    after = BatchCommit("run-1", [done], None, ts(2), "trace-1", (), [outcome])
    again = RequestRow("a", "running", 1, eff_a, {})  # the same effect id twice: refused
    with pytest.raises(AgentctlError):  # whichever error the guard raises, all is undone
        ledger.record_requests(RequestBatch("run-1", [again], ts(2), "trace-1", after))
    seen = ledger.inspect_run("run-1")
    assert [(e.task_id, e.status) for e in seen.effects] == [("a", "started")]
    assert seen.tasks[0].state == "running"


def test_live_state_after_a_crash_blocks_until_reconciled(ledger: SqliteLedger) -> None:
    eff = _effect("a")
    _request(ledger, RequestRow("a", "pending", 1, eff, {}))
    # The coordinator dies here: `started` committed, no outcome. A new one claims the run.
    before = ledger.get_run("run-1")
    claim = ledger.claim_for_resume("run-1", _owner(), ts(5))
    assert claim.run.run_id == "run-1"
    assert [e.effect_id for e in claim.unresolved] == [eff.effect_id]
    after = ledger.get_run("run-1")  # refused: the run row is as it was, no lease taken
    assert (after.updated_at, after.owner_pid) == (before.updated_at, before.owner_pid)
    (found,) = ledger.load_live("run-1").inflight
    assert found.task_id == "a" and found.effect.status == "uncertain"
    assert found.reconciliation is None
    assert [e.effect_id for e in ledger.unresolved_effects("run-1")] == [eff.effect_id]
    evidence, result = {"kind": "note"}, {"ok": True}
    request = ReconcileRequest(
        eff.effect_id, "applied", "op", "hand", evidence, result, None, ts(6), "reconciliation-1"
    )
    assert ledger.reconcile_effect(request).status == "applied"
    assert ledger.unresolved_effects("run-1") == ()
    (found,) = ledger.load_live("run-1").inflight
    assert found.reconciliation is not None and found.reconciliation.status == "applied"
    assert ledger.recorded_result(eff.effect_id) == {"ok": True}
    with pytest.raises(ReconciliationConflictError):  # not_applied contradicts applied
        contrary = replace(request, status="not_applied", result=None)
        ledger.reconcile_effect(replace(contrary, reconciliation_id="reconciliation-2"))


def test_approval_pause_then_approve_then_start(ledger: SqliteLedger) -> None:
    eff = _effect("a", approval=True)
    _request(ledger, RequestRow("a", "pending", 1, eff, {}, approval_reason="risky"))
    (pending,) = ledger.list_approvals("run-1").approvals
    assert pending.effect_id == eff.effect_id and pending.reason == "risky"
    decision = ApprovalDecision(pending.approval_id, True, "op", "fine", ts(2))
    assert ledger.resolve_approval(decision).status == "approved"
    assert ledger.get_approval(pending.approval_id).resolved_by == "op"
    ledger.start_effects(EffectStartBatch("run-1", [eff.effect_id], ["a"], ts(3), "trace-1"))
    assert ledger.inspect_effect(eff.effect_id).effect.status == "started"
    assert ledger.load_live("run-1").tasks[0].state == "running"


def test_agent_call_records_its_tool_call_and_finishes_it(ledger: SqliteLedger) -> None:
    eff = _effect("a")
    call = CallRecord(eff, {"toolCalls": 1}, ts(1), tool_call_id="a:1:c1", tool="write")
    assert ledger.record_and_start_call(call) is None
    outcome = EffectOutcome("run-1", eff.effect_id, "succeeded", ts(2), {"bytes": 1}, None, {})
    outcome = replace(outcome, tool_call_id="a:1:c1")
    ledger.finish_effects([outcome])
    (tool_call,) = ledger.inspect_run("run-1").tool_calls
    assert tool_call.status == "succeeded" and tool_call.output == {"bytes": 1}
    refused = ledger.record_and_start_call(CallRecord(_effect("b"), {"toolCalls": 5}, ts(3)))
    assert refused is not None and refused["dimension"] == "toolCalls"


def _evidence(status: str, *, remote_task: str | None = None) -> ProtocolEvidence:
    session = ProtocolSession(
        key="s1", protocol="a2a", peer="helper", endpoint="https://peer.example/a2a"
    )
    sent = ProtocolCall(
        session_key="s1", protocol="a2a", peer="helper", method="message/send", status=status
    )
    return ProtocolEvidence(
        sessions=[session], calls=[sent.model_copy(update={"remote_id": remote_task})]
    )


def test_protocol_evidence_is_stored_with_the_outcome_and_updated_in_place(
    ledger: SqliteLedger,
) -> None:
    eff = _effect("a")
    _request(ledger, RequestRow("a", "pending", 1, eff, {}))
    # Reported mid-effect (a remote task id became known), then again with the outcome.
    ledger.record_protocol(
        ProtocolReport(eff.effect_id, _evidence("started", remote_task="t-9"), ts(2))
    )
    started = ledger.inspect_run("run-1")
    assert [(c.status, c.remote_id) for c in started.protocol_calls] == [("started", "t-9")]
    outcome = EffectOutcome("run-1", eff.effect_id, "succeeded", ts(3), {"ok": True})
    done = _evidence("succeeded", remote_task="t-9")
    ledger.finish_effects([replace(outcome, protocol=done)])
    seen = ledger.inspect_run("run-1")
    [session] = seen.protocol_sessions
    [call] = seen.protocol_calls
    assert (session.task_id, session.attempt, session.effect_id) == ("a", 1, eff.effect_id)
    assert (call.status, call.remote_id, call.session_id) == (
        "succeeded",
        "t-9",
        session.session_id,
    )
    shown = seen.to_json()
    assert shown["protocolSessions"][0]["peer"] == "helper"
    assert shown["protocolCalls"][0]["method"] == "message/send"
    with pytest.raises(NotFoundError):  # evidence belongs to a recorded effect
        ledger.record_protocol(ProtocolReport("no-such-effect", done, ts(4)))


def test_cancel_and_settle_release_the_lease(ledger: SqliteLedger) -> None:
    _request(ledger, RequestRow("a", "pending", 1, _effect("a"), {}))
    assert ledger.request_cancel("run-1", ts(1)).run_id == "run-1"
    assert ledger.is_cancel_requested("run-1")
    # Once the flag is up nothing more starts: the request's transaction refuses, whole.
    with pytest.raises(CancelledRunError):
        _request(ledger, RequestRow("b", "pending", 1, _effect("b"), {}))
    assert [e.task_id for e in ledger.inspect_run("run-1").effects] == ["a"]
    ledger.cancel_run(CancelRun("run-1", "cancelled", ts(2), os.getpid(), ("a",)))
    run = ledger.get_run("run-1")
    assert run.state == "cancelled" and run.owner_pid is None
    assert ledger.inspect_run("run-1").effects[0].status == "uncertain"
    with pytest.raises(InvalidOperationError):  # terminal runs never change
        ledger.settle_run(SettleRun("run-1", "succeeded", None, ts(3), os.getpid()))


def test_an_outcome_naming_its_rows_audit_columns_is_audited_and_guarded_the_same(
    ledger: SqliteLedger,
) -> None:
    """A fresh step's outcome carries its row's task, attempt and operation (the UPDATE then
    returns nothing); its event is the one read back from the row, and the guard still holds."""
    eff_a, eff_b = _effect("a"), _effect("b")
    _request(
        ledger, RequestRow("a", "pending", 1, eff_a, {}), RequestRow("b", "pending", 1, eff_b, {})
    )
    read_back = EffectOutcome(
        "run-1", eff_a.effect_id, "succeeded", ts(2), {"n": 1}, trace_id="trace-1"
    )
    named = EffectOutcome(
        "run-1",
        eff_b.effect_id,
        "succeeded",
        ts(2),
        {"n": 1},
        trace_id="trace-1",
        task_id="b",
        attempt=1,
        operation="builtin.write",
    )
    ledger.finish_effects([read_back])
    ledger.finish_effects([named])
    events = [e for e in ledger.inspect_run("run-1").audit if e.event_type == "effect.succeeded"]
    assert [(e.task_id, e.trace_id) for e in events] == [("a", "trace-1"), ("b", "trace-1")]
    bodies = [{**e.payload, "effectId": None} for e in events if isinstance(e.payload, dict)]
    assert (
        bodies[0]
        == bodies[1]
        == {"attempt": 1, "effectId": None, "operation": "builtin.write", "status": "succeeded"}
    )
    with pytest.raises(InvalidOperationError, match="is succeeded, not started"):
        ledger.finish_effects([named])  # finished already: refused, nothing audited again
    again = [e for e in ledger.inspect_run("run-1").audit if e.event_type == "effect.succeeded"]
    assert len(again) == 2
