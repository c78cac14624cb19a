"""Each ``RunLedger`` step audits under the trace its caller names: the writer's, never the run's
first nor the effect row's (docs/operations.md §12). tests/cli/test_audit_traces.py checks the
commands; this file the steps no command there reaches (an agent's call, a held tool call, a
driven stop on the wall-time budget, a failed settle, ``runs upgrade``)."""

from __future__ import annotations

import os
from dataclasses import replace

import pytest
from ledger_helpers import new_run, ts

from agentctl.ledger import (
    ApprovalDecision,
    CallRecord,
    CancelRun,
    NewEffect,
    Owner,
    RequestBatch,
    RequestRow,
    SettleRun,
    SqliteLedger,
    TaskStart,
    TaskStartBatch,
)
from agentctl.ledger.held_calls import GatedCall
from agentctl.ledger.owners import process_start_time
from agentctl.ledger.upgrade import RunUpgrade


class Audit:
    """The run's audit rows, read a step at a time."""

    def __init__(self, ledger: SqliteLedger) -> None:
        self.ledger, self.seen = ledger, 0

    def since(self) -> list[tuple[str, str | None]]:
        """(event type, trace) of the rows written since the last call."""
        rows = self.ledger.audit_after("run-1", self.seen)
        self.seen = rows[-1].sequence if rows else self.seen
        return [(r.event_type, r.trace_id) for r in rows]


def _effect(task: str, trace: str) -> NewEffect:
    effect = NewEffect("run-1", task, 1, 0, "builtin.write", {"p": task}, "mutation", "low", "")
    return replace(effect, idempotency="idempotent", trace_id=trace)


def _all_named(rows: list[tuple[str, str | None]], trace: str) -> bool:
    return bool(rows) and all(found == trace for _kind, found in rows)


@pytest.fixture
def ledger(run_ledger: SqliteLedger) -> SqliteLedger:
    owner = Owner(os.getpid(), process_start_time(os.getpid()))
    limits = {"maxToolCalls": 5, "maxWallTimeSeconds": 1}
    run_ledger.create_run(new_run(limits=limits), ("a", "b", "c"), owner, ts(0))
    return run_ledger


def test_an_agents_call_and_its_held_call_audit_under_their_drives_traces(
    ledger: SqliteLedger,
) -> None:
    starts = [TaskStart("a", "pending", 1), TaskStart("b", "pending", 1)]
    ledger.start_tasks(TaskStartBatch("run-1", starts, ts(1), "trace-start"))
    audit = Audit(ledger)
    audit.since()
    call = CallRecord(_effect("a", "trace-call"), {"toolCalls": 1}, ts(1))
    assert ledger.record_and_start_call(call) is None
    rows = audit.since()
    assert ("budget.reserved", "trace-call") in rows and _all_named(rows, "trace-call")
    held = CallRecord(_effect("b", "trace-first"), {"toolCalls": 1}, ts(2), tool_call_id="b:1")
    assert ledger.gate_call(GatedCall(held, "risky", "helper", "write", "trace-first")).status == (
        "held"
    )
    assert _all_named(audit.since(), "trace-first")
    (pending,) = ledger.list_approvals("run-1").approvals
    ledger.resolve_approval(ApprovalDecision(pending.approval_id, True, "op", "ok", ts(3), "t-ok"))
    assert audit.since() == [("approval.approved", "t-ok"), ("effect.requested", "t-ok")]
    # A later drive starts the approved call: its event names that drive, not the requester.
    again = GatedCall(replace(held, now=ts(4)), "risky", "helper", "write", "trace-later")
    assert ledger.gate_call(again).status == "started"
    assert audit.since() == [("effect.started", "trace-later")]
    assert ledger.inspect_effect(held.effect.effect_id).effect.trace_id == "trace-first"


def test_a_driven_stop_on_wall_time_audits_under_the_stopping_drives_trace(
    ledger: SqliteLedger,
) -> None:
    row = RequestRow("a", "pending", 1, _effect("a", "trace-1"), {})
    ledger.record_requests(RequestBatch("run-1", [row], ts(1), "trace-1"))
    audit = Audit(ledger)
    audit.since()
    why = "budget maxWallTimeSeconds exceeded"
    stop = CancelRun("run-1", "failed", ts(9), os.getpid(), ("a",), why, trace_id="trace-stop")
    ledger.cancel_run(stop)
    rows = audit.since()
    # the tasks that never started (b, c) end cancelled too, as in any failed run
    assert [kind for kind, _trace in rows] == [
        "effect.uncertain",
        "task.cancelled",
        "budget.exceeded",
        "task.cancelled",
        "task.cancelled",
        "run.failed",
    ]
    assert _all_named(rows, "trace-stop")


def test_a_failed_settle_and_an_upgrade_audit_under_their_callers_traces(
    ledger: SqliteLedger,
) -> None:
    audit = Audit(ledger)
    audit.since()
    settle = SettleRun("run-1", "failed", None, ts(1), os.getpid(), ("b", "c"), "trace-end")
    ledger.settle_run(settle)
    rows = audit.since()
    assert [kind for kind, _trace in rows] == ["task.cancelled", "task.cancelled", "run.failed"]
    assert _all_named(rows, "trace-end")
    upgrade = RunUpgrade("run-1", (), None, {"upgradedTasks": []}, ts(2), "trace-upgrade")
    ledger.upgrade_run(upgrade)
    assert audit.since() == [("run.upgraded", "trace-upgrade")]
