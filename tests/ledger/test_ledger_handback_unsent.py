"""A stopping ``serve``'s hand-back (``CancelRun`` to ``running``) of effects its workers said
were cut before their request left (``CancelRun.unsent``): ``ledger.lost.requeue_unsent_txn``."""

from __future__ import annotations

import os
from dataclasses import replace

import pytest
from ledger_helpers import new_run, ts

from agentctl.ledger import (
    CancelRun,
    NewEffect,
    Owner,
    RequestBatch,
    RequestRow,
    SqliteLedger,
)
from agentctl.ledger.model import UnsentEffect
from agentctl.ledger.owners import process_start_time

NEVER_SENT = "extension 'x': effect cancelled before its request was sent"


def _process(task: str) -> NewEffect:
    request = {"command": "x", "args": [task]}
    effect = NewEffect("run-1", task, 1, 0, "extension.process", request, "process", "high", "")
    return replace(effect, idempotency="unknown", trace_id="trace-1")


@pytest.fixture
def ledger(run_ledger: SqliteLedger) -> SqliteLedger:
    led = run_ledger  # SQLite and PostgreSQL (conftest)
    owner = Owner(os.getpid(), process_start_time(os.getpid()))
    led.create_run(new_run(limits={"maxProcessOutputBytes": 10000}), ("a", "b"), owner, ts(0))
    return led


@pytest.fixture
def started(ledger: SqliteLedger) -> tuple[NewEffect, NewEffect]:
    """Two started effects (tasks a and b), 1000 process output bytes reserved for each."""
    a, b = _process("a"), _process("b")
    held = {"processOutputBytes": 1000}
    rows = (RequestRow("a", "pending", 1, a, held), RequestRow("b", "pending", 1, b, held))
    ledger.record_requests(RequestBatch("run-1", rows, ts(1), "trace-1"))
    return a, b


def test_a_hand_back_cancels_an_effect_never_sent_and_reschedules_its_task(
    ledger: SqliteLedger, started: tuple[NewEffect, NewEffect]
) -> None:
    """a was cut before its request left (cancelled, its reservation back, its task waiting
    for its next attempt); b after (uncertain, reserved until reconciled, its task parked)."""
    a, b = started
    unsent = (UnsentEffect(a.effect_id, NEVER_SENT),)
    ledger.cancel_run(CancelRun("run-1", "running", ts(5), os.getpid(), (), unsent=unsent))
    seen = ledger.inspect_run("run-1")
    assert seen.run.state == "running"
    assert {e.task_id: (e.status, e.error) for e in seen.effects}["a"] == ("cancelled", NEVER_SENT)
    assert {e.task_id: e.status for e in seen.effects}["b"] == "uncertain"
    states = {t.task_id: (t.state, t.attempt, t.error) for t in seen.tasks}
    assert states["a"] == ("retry_scheduled", 1, f"task a: {NEVER_SENT}")
    assert states["b"][0] == "waiting_for_effect"
    assert seen.budget.reserved == {"processOutputBytes": 1000}  # b's alone
    assert [e.effect_id for e in ledger.unresolved_effects("run-1")] == [b.effect_id]


def test_a_hand_back_naming_an_effect_no_longer_started_changes_nothing_of_it(
    ledger: SqliteLedger, started: tuple[NewEffect, NewEffect]
) -> None:
    """An effect another transaction settled first (here: made uncertain) is not cancelled,
    nor is its task rescheduled or its reservation given back."""
    a, _ = started
    ledger.cancel_run(CancelRun("run-1", "running", ts(5), os.getpid(), ()))
    unsent = (UnsentEffect(a.effect_id, NEVER_SENT),)
    ledger.cancel_run(CancelRun("run-1", "running", ts(6), os.getpid(), (), unsent=unsent))
    seen = ledger.inspect_run("run-1")
    assert [e.status for e in seen.effects] == ["uncertain", "uncertain"]
    assert [t.state for t in seen.tasks] == ["waiting_for_effect", "waiting_for_effect"]
    assert seen.budget.reserved == {"processOutputBytes": 2000}
