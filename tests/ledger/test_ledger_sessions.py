"""Provider sessions through the ``RunLedger`` steps (SQLite and PostgreSQL): a model call's
start counts in its attempt's session, its outcome settles status, finish and usage, in the
transactions those steps already commit; recovery and reconciliation settle it too."""

from __future__ import annotations

import os
from dataclasses import replace

import pytest
from ledger_helpers import new_run, ts

from agentctl.ledger import (
    CallRecord,
    EffectOutcome,
    NewEffect,
    Owner,
    ReconcileRequest,
    SqliteLedger,
)
from agentctl.ledger.owners import process_start_time
from agentctl.ledger.sessions import ProviderTurn

TURN = ProviderTurn("sim", "fake", "m")


def _owner() -> Owner:
    return Owner(os.getpid(), process_start_time(os.getpid()))


def _model_call(ordinal: int, *, attempt: int = 1, messages: int = 2) -> NewEffect:
    request = {"messages": [{"role": "user", "content": str(i)} for i in range(messages)]}
    effect = NewEffect("run-1", "a", attempt, ordinal, "fake", request, "model", "medium", "")
    return replace(effect, idempotency="at_most_once", trace_id="trace-1")


def _answer(finish: str, tokens: int) -> dict[str, object]:
    usage = {"inputTokens": tokens, "outputTokens": 1, "reasoningTokens": 0}
    return {"finish": finish, "text": "", "toolCalls": [], "usage": usage}


def _finish(ledger: SqliteLedger, effect: NewEffect, status: str, result: object) -> None:
    outcome = EffectOutcome("run-1", effect.effect_id, status, ts(9), result, None, {})
    ledger.finish_effects([replace(outcome, model_call=True)])


@pytest.fixture
def ledger(run_ledger: SqliteLedger) -> SqliteLedger:
    run_ledger.create_run(new_run(), ("a", "b", "c"), _owner(), ts(0))
    return run_ledger


def test_one_session_per_attempt_counts_calls_and_sums_usage(ledger: SqliteLedger) -> None:
    first, second = _model_call(0), _model_call(2, messages=4)
    assert ledger.record_and_start_call(CallRecord(first, {}, ts(1), turn=TURN)) is None
    (running,) = ledger.inspect_run("run-1").provider_sessions
    assert (running.status, running.calls, running.finish) == ("running", 1, None)
    _finish(ledger, first, "succeeded", _answer("tool_calls", 3))
    (active,) = ledger.inspect_run("run-1").provider_sessions
    assert (active.status, active.finish, active.usage["inputTokens"]) == (
        "active",
        "tool_calls",
        3,
    )
    # A tool call between them is no model call: it leaves the session alone.
    tool = replace(_model_call(1), operation="builtin.read", request={"path": "x"})
    ledger.record_and_start_call(CallRecord(tool, {}, ts(3), tool_call_id="a:1:c1", tool="t"))
    ledger.finish_effects([EffectOutcome("run-1", tool.effect_id, "succeeded", ts(4), {}, None)])
    ledger.record_and_start_call(CallRecord(second, {}, ts(5), turn=TURN))
    _finish(ledger, second, "succeeded", _answer("complete", 4))
    (done,) = ledger.inspect_run("run-1").provider_sessions
    assert done.session_id == "run-1:a:1"
    assert (done.status, done.finish, done.calls) == ("completed", "complete", 2)
    assert done.usage == {
        "inputTokens": 7,
        "outputTokens": 2,
        "reasoningTokens": 0,
        "cacheReadTokens": 0,
        "cacheWriteTokens": 0,
    }
    assert done.continuation == {
        "kind": "conversation",
        "effectId": second.effect_id,
        "messages": 4,
    }
    assert (done.provider, done.provider_kind, done.model) == ("sim", "fake", "m")
    assert done.to_json()["calls"] == 2


def test_a_failed_call_fails_its_session_and_a_retry_opens_another(ledger: SqliteLedger) -> None:
    failed, retried = _model_call(0), _model_call(0, attempt=2)
    ledger.record_and_start_call(CallRecord(failed, {}, ts(1), turn=TURN))
    _finish(ledger, failed, "failed", None)
    ledger.record_and_start_call(CallRecord(retried, {}, ts(2), turn=TURN))
    sessions = ledger.inspect_run("run-1").provider_sessions
    assert [(s.attempt, s.status, s.usage) for s in sessions] == [
        (1, "failed", {}),
        (2, "running", {}),
    ]


def test_recovery_and_reconciliation_settle_the_session(ledger: SqliteLedger) -> None:
    call = _model_call(0)
    ledger.record_and_start_call(CallRecord(call, {}, ts(1), turn=TURN))
    # The coordinator dies with the call started; a new one claims the run.
    ledger.claim_for_resume("run-1", _owner(), ts(5))
    (lost,) = ledger.inspect_run("run-1").provider_sessions
    assert (lost.status, lost.calls, lost.usage) == ("uncertain", 1, {})
    answer = _answer("tool_calls", 5)
    request = ReconcileRequest(
        call.effect_id, "applied", "op", "log", {}, answer, None, ts(6), "reconciliation-1"
    )
    ledger.reconcile_effect(request)
    (settled,) = ledger.inspect_run("run-1").provider_sessions
    assert (settled.status, settled.finish, settled.usage["inputTokens"]) == (
        "active",
        "tool_calls",
        5,
    )
