"""An uncertain effect's budget reservation is settled when it is reconciled, and a stopped
run's never-started reservations settle with nothing (``ledger.budget_release``)."""

from __future__ import annotations

import os
import uuid
from dataclasses import replace
from typing import Any

from ledger_helpers import make_run, ts

from agentctl.ledger import NewEffect
from agentctl.ledger.budget import BudgetSnapshot, budget_snapshot, reserve_budget_txn
from agentctl.ledger.connection import Database
from agentctl.ledger.effects import (
    finish_effect_txn,
    insert_effect_txn,
    mark_uncertain_txn,
)
from agentctl.ledger.lifecycle import cancel_run_txn, settle_run_txn
from agentctl.ledger.model import CancelRun, SettleRun
from agentctl.ledger.reconcile import reconcile_effect_txn
from agentctl.ledger.runs import set_run_state_txn

SHELL = "builtin.shell.exec"
MODEL_HELD = {
    "providerRequests": 1,
    "turns": 1,
    "inputTokens": 100,
    "outputTokens": 50,
    "totalTokens": 150,
    "costMicrousd": 30,
}


def _effect(task: str, operation: str = SHELL, ordinal: int = 0) -> NewEffect:
    return NewEffect(
        run_id="run-1",
        task_id=task,
        attempt=1,
        ordinal=ordinal,
        operation=operation,
        request={"task": task, "n": ordinal},
        effect_class="process_execution",
        risk="high",
        idempotency="unknown",
        trace_id="trace-1",
    )


def _reserved(ledger: Database, effect: NewEffect, amounts: dict[str, int], **kw: Any) -> str:
    """Reserve ``amounts`` under the effect's id and record it (started unless told)."""
    started = kw.pop("started", True)
    with ledger.transaction() as conn:
        assert reserve_budget_txn(conn, "run-1", effect.effect_id, amounts, ts(1)).granted
        return insert_effect_txn(conn, replace(effect, **kw), ts(1), started=started)


def _uncertain(ledger: Database, effect: NewEffect, amounts: dict[str, int]) -> str:
    eid = _reserved(ledger, effect, amounts)
    with ledger.transaction() as conn:
        mark_uncertain_txn(conn, "run-1", ts(2), why="lost")
    return eid


def _reconcile(ledger: Database, eid: str, status: str, result: Any = None, **kw: Any) -> None:
    with ledger.transaction() as conn:
        reconcile_effect_txn(
            conn,
            eid,
            status,
            "ops",
            "checked",
            None,
            result,
            kw.get("comp"),
            ts(3),
            reconciliation_id=f"reconciliation-{uuid.uuid4()}",
            rates=kw.get("rates"),
        )


def _budget(ledger: Database) -> BudgetSnapshot:
    with ledger.read() as conn:
        return budget_snapshot(conn, "run-1")


def _status(ledger: Database, reservation_id: str) -> str:
    with ledger.read() as conn:
        row = conn.execute(
            "SELECT status FROM budget_reservations WHERE reservation_id = ?", (reservation_id,)
        ).fetchone()
    return str(row[0])


def test_not_applied_gives_the_reservation_back(ledger: Database) -> None:
    make_run(ledger, limits={"maxProcessOutputBytes": 1500})
    eid = _uncertain(ledger, _effect("a"), {"processOutputBytes": 1000})
    assert _budget(ledger).reserved == {"processOutputBytes": 1000}
    _reconcile(ledger, eid, "not_applied")
    snap = _budget(ledger)
    assert snap.reserved == {"processOutputBytes": 0} and snap.usage == {}
    assert _status(ledger, eid) == "reconciled"
    # The retry's reservation fits again (1000 + 1000 would not).
    with ledger.transaction() as conn:
        again = reserve_budget_txn(conn, "run-1", "retry", {"processOutputBytes": 1000}, ts(4))
    assert again.granted


def test_applied_settles_the_actual_once(ledger: Database) -> None:
    make_run(ledger, limits={"maxProcessOutputBytes": 1500})
    eid = _uncertain(ledger, _effect("a"), {"processOutputBytes": 1000})
    _reconcile(ledger, eid, "applied", {"exitCode": 0, "stdout": "héllo\n", "stderr": "!"})
    assert _budget(ledger).usage == {"processOutputBytes": 8}  # UTF-8 bytes: é is two
    assert _budget(ledger).reserved == {"processOutputBytes": 0}
    # A superseding applied record and a compensation count nothing again.
    _reconcile(ledger, eid, "applied", {"exitCode": 0, "stdout": "x" * 900, "stderr": ""})
    undo = _reserved(ledger, _effect("b"), {"processOutputBytes": 10})
    with ledger.transaction() as conn:
        finish_effect_txn(conn, undo, "succeeded", ts(4), result={})
    _reconcile(ledger, eid, "compensated", comp=undo)
    snap = _budget(ledger)
    assert snap.usage == {"processOutputBytes": 8} and snap.reserved == {"processOutputBytes": 10}


def test_applied_without_the_actual_settles_the_reservation(ledger: Database) -> None:
    # An extension's result does not tell its process output; a tool call is one call.
    make_run(ledger)
    ext = _uncertain(ledger, _effect("a", "extension.process"), {"processOutputBytes": 400})
    tool = _uncertain(ledger, _effect("b", "tool.read"), {"toolCalls": 1})
    _reconcile(ledger, ext, "applied", {"stdout": "not the process output"})
    _reconcile(ledger, tool, "applied", {"content": "x"})
    snap = _budget(ledger)
    assert snap.usage == {"processOutputBytes": 400, "toolCalls": 1}
    assert snap.reserved == {"processOutputBytes": 0, "toolCalls": 0}


def test_an_applied_model_call_settles_the_usage_its_answer_gives(ledger: Database) -> None:
    make_run(ledger)
    priced = _uncertain(ledger, _effect("a", "fake"), MODEL_HELD)
    answer = {"finish": "complete", "text": "hi", "usage": {"inputTokens": 5, "outputTokens": 3}}
    _reconcile(ledger, priced, "applied", answer)
    snap = _budget(ledger)
    assert {k: v for k, v in snap.usage.items() if v} == {
        "providerRequests": 1,
        "turns": 1,
        "inputTokens": 5,
        "outputTokens": 3,
        "totalTokens": 8,
        "costMicrousd": 30,  # no price at hand: the reserved upper bound
    }
    assert not any(snap.reserved.values())
    # Repeating applied with other usage supersedes the session's count, never the budget's.
    _reconcile(ledger, priced, "applied", {**answer, "usage": {"inputTokens": 50}})
    assert _budget(ledger).usage == snap.usage


# micro-USD per million tokens: 4 per input token, 1 per cache read, 2 per cache write,
# 6 per output token, 9 per reasoning token.
RATES = {
    "inputTokens": 4_000_000,
    "cacheReadTokens": 1_000_000,
    "cacheWriteTokens": 2_000_000,
    "outputTokens": 6_000_000,
    "reasoningTokens": 9_000_000,
}


def test_an_applied_model_calls_usage_is_priced_at_its_rates(ledger: Database) -> None:
    make_run(ledger)
    priced = _uncertain(ledger, _effect("a", "fake"), {**MODEL_HELD, "costMicrousd": 900})
    usage = {"inputTokens": 20, "cacheReadTokens": 8, "cacheWriteTokens": 2}
    usage |= {"outputTokens": 10, "reasoningTokens": 4}
    answer = {"finish": "complete", "text": "hi", "usage": usage}
    _reconcile(ledger, priced, "applied", answer, rates=RATES)
    # 10 plain input, 8 read, 2 written; 6 plain output, 4 reasoning — each token once.
    assert _budget(ledger).usage["costMicrousd"] == 10 * 4 + 8 * 1 + 2 * 2 + 6 * 6 + 4 * 9
    # A cost the usage gives is the one counted; no usage leaves the reserved upper bound.
    told = _uncertain(ledger, _effect("b", "fake", 1), MODEL_HELD)
    _reconcile(
        ledger, told, "applied", {**answer, "usage": {**usage, "costMicrousd": 7}}, rates=RATES
    )
    blind = _uncertain(ledger, _effect("c", "fake", 2), MODEL_HELD)
    _reconcile(ledger, blind, "applied", {"finish": "complete", "text": "hi"}, rates=RATES)
    assert _budget(ledger).usage["costMicrousd"] == 124 + 7 + 30


def test_an_unpriced_model_call_without_usage_settles_what_it_reserved(ledger: Database) -> None:
    make_run(ledger)
    held = {k: v for k, v in MODEL_HELD.items() if k != "costMicrousd"}
    eid = _uncertain(ledger, _effect("a", "fake"), held)
    _reconcile(ledger, eid, "applied", {"finish": "complete", "text": "hi"})
    assert _budget(ledger).usage == {**held, "unpricedProviderRequests": 1}


def _stop(state: str) -> CancelRun:
    return CancelRun("run-1", state, ts(5), os.getpid(), ())


def test_a_cancelled_run_settles_only_never_started_reservations(ledger: Database) -> None:
    make_run(ledger)
    started = _reserved(ledger, _effect("a"), {"processOutputBytes": 1})
    requested = _reserved(ledger, _effect("b"), {"processOutputBytes": 10}, started=False)
    waiting = _reserved(
        ledger, _effect("c"), {"processOutputBytes": 100}, started=False, waiting_for_approval=True
    )
    with ledger.transaction() as conn:  # a reservation no effect row was recorded for
        assert reserve_budget_txn(conn, "run-1", "orphan", {"toolCalls": 1}, ts(1)).granted
    with ledger.transaction() as conn:
        cancel_run_txn(conn, _stop("cancelled"))
    snap = _budget(ledger)
    assert snap.reserved == {"processOutputBytes": 1, "toolCalls": 0} and snap.usage == {}
    assert [_status(ledger, r) for r in (requested, waiting, "orphan")] == ["reconciled"] * 3
    assert _status(ledger, started) == "active"  # uncertain now: a spend may have happened
    _reconcile(ledger, started, "not_applied")
    assert _budget(ledger).reserved == {"processOutputBytes": 0, "toolCalls": 0}


def test_a_run_handed_back_keeps_its_requested_reservations(ledger: Database) -> None:
    # A stopping ``serve`` hands the run back: its requested effect still runs later, under
    # the reservation it holds (reserving its id again is a no-op).
    make_run(ledger)
    requested = _reserved(ledger, _effect("b"), {"processOutputBytes": 10}, started=False)
    with ledger.transaction() as conn:
        cancel_run_txn(conn, _stop("running"))
    assert _status(ledger, requested) == "active"
    assert _budget(ledger).reserved == {"processOutputBytes": 10}


def _unstarted_three(ledger: Database) -> tuple[str, ...]:
    """A started effect, then three reservations of effects that never started: requested
    (e.g. approved, not run yet), waiting for approval, and one with no effect row."""
    _reserved(ledger, _effect("a"), {"processOutputBytes": 1})
    requested = _reserved(ledger, _effect("b"), {"processOutputBytes": 10}, started=False)
    waiting = _reserved(
        ledger, _effect("c"), {"processOutputBytes": 100}, started=False, waiting_for_approval=True
    )
    with ledger.transaction() as conn:
        assert reserve_budget_txn(conn, "run-1", "orphan", {"toolCalls": 1}, ts(1)).granted
    return requested, waiting, "orphan"


def test_a_run_that_ends_failed_settles_its_never_started_reservations(
    ledger: Database,
) -> None:
    make_run(ledger)
    unstarted = _unstarted_three(ledger)
    # Paused (an approval pending) or still running (blocked, halted): a later drive of this
    # run starts these effects under what they hold.
    for state in ("paused", "running"):
        with ledger.transaction() as conn:
            settle_run_txn(conn, SettleRun("run-1", state, None, ts(5), os.getpid()))
        assert [_status(ledger, r) for r in unstarted] == ["active"] * 3, state
        if state == "paused":
            with ledger.transaction() as conn:  # resumed
                set_run_state_txn(conn, "run-1", "running", ts(5))
    # Failed, the run is terminal: nothing can run them any more, so what they hold is freed
    # in the transaction that ends the run (as a cancel does); the started one may have spent.
    with ledger.transaction() as conn:
        settle_run_txn(conn, SettleRun("run-1", "failed", None, ts(6), os.getpid()))
    assert [_status(ledger, r) for r in unstarted] == ["reconciled"] * 3
    snap = _budget(ledger)
    assert snap.reserved == {"processOutputBytes": 1, "toolCalls": 0} and snap.usage == {}
