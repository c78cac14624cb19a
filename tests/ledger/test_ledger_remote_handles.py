"""Remote handles (``ledger.remote``): persisted mid-effect, continuable on resume, immutable."""

from __future__ import annotations

import os
from dataclasses import replace

import pytest
from ledger_helpers import new_run, ts

from agentctl.core.protocols import CallStatus, ProtocolCall, ProtocolEvidence, ProtocolSession
from agentctl.errors import InvalidOperationError, NotFoundError
from agentctl.ledger import (
    CancelRun,
    NewEffect,
    Owner,
    ProtocolReport,
    ReconcileRequest,
    RemoteHandleRecord,
    RequestBatch,
    RequestRow,
    SqliteLedger,
)
from agentctl.ledger.owners import process_start_time


def _owner() -> Owner:
    """This process as a live owner, its start time read now and as the ledger reads it: a
    reading adds the boot time, which moves when the wall clock is stepped (a paused VM), so
    one taken long before — or psutil's, whose boot time is read once per process — can
    differ from the ledger's own by whole seconds."""
    return Owner(os.getpid(), process_start_time(os.getpid()))


def _delegation(task: str) -> NewEffect:
    request = {"peer": "reviewer", "message": f"review {task}"}
    effect = NewEffect("run-1", task, 1, 0, "a2a.delegate", request, "remote_agent", "high", "")
    return replace(effect, idempotency="unknown", trace_id="trace-1")


def _handle(effect: NewEffect, remote_task_id: str = "task-7") -> RemoteHandleRecord:
    return RemoteHandleRecord(
        effect.effect_id, "run-1", "a2a", "reviewer", remote_task_id, "ctx-1", ts(2)
    )


@pytest.fixture
def ledger(run_ledger: SqliteLedger) -> SqliteLedger:
    led = run_ledger  # SQLite and PostgreSQL (conftest)
    led.create_run(new_run(), ("a", "b"), _owner(), ts(0))
    return led


@pytest.fixture
def started(ledger: SqliteLedger) -> tuple[NewEffect, NewEffect]:
    """Two started delegations (tasks a and b); only a's remote task id is persisted."""
    a, b = _delegation("a"), _delegation("b")
    rows = (RequestRow("a", "pending", 1, a, {}), RequestRow("b", "pending", 1, b, {}))
    ledger.record_requests(RequestBatch("run-1", rows, ts(1), "trace-1"))
    ledger.record_remote_handle(_handle(a))
    return a, b


def test_a_handle_is_shown_and_never_changes(
    ledger: SqliteLedger, started: tuple[NewEffect, NewEffect]
) -> None:
    a, _ = started
    ledger.record_remote_handle(_handle(a))  # the same report again: a no-op
    with pytest.raises(InvalidOperationError, match="cannot change"):
        ledger.record_remote_handle(_handle(a, "task-8"))
    found = ledger.remote_handle(a.effect_id)
    assert found is not None and found.remote_task_id == "task-7"
    shown = ledger.inspect_run("run-1").to_json()["effects"]
    assert isinstance(shown, list)
    assert [e.get("remoteTaskId") for e in shown if isinstance(e, dict)] == ["task-7", None]
    effect = ledger.inspect_effect(a.effect_id).to_json()["effect"]
    assert isinstance(effect, dict) and effect["remoteTaskId"] == "task-7"


def test_only_a_started_effect_gets_a_handle(ledger: SqliteLedger) -> None:
    with pytest.raises(NotFoundError):
        ledger.record_remote_handle(_handle(_delegation("a")))
    held = replace(_delegation("a"), waiting_for_approval=True)
    row = RequestRow("a", "pending", 1, held, {}, "approval required")
    ledger.record_requests(RequestBatch("run-1", (row,), ts(1), "trace-1"))
    with pytest.raises(InvalidOperationError, match="only a started effect"):
        ledger.record_remote_handle(_handle(held))


def test_resume_keeps_a_continuable_effect_started(
    ledger: SqliteLedger, started: tuple[NewEffect, NewEffect]
) -> None:
    _, b = started
    ledger.claim_for_resume("run-1", _owner(), ts(5))  # the coordinator died mid-poll
    statuses = {e.task_id: e.status for e in ledger.list_effects("run-1").effects}
    assert statuses == {"a": "started", "b": "uncertain"}
    assert [e.effect_id for e in ledger.unresolved_effects("run-1")] == [b.effect_id]
    inflight = {f.task_id: f for f in ledger.load_live("run-1").inflight}
    assert inflight["a"].remote is not None and inflight["a"].remote.remote_task_id == "task-7"
    assert inflight["b"].remote is None


def test_a_cancelled_run_leaves_it_uncertain_for_continue_remote(
    ledger: SqliteLedger, started: tuple[NewEffect, NewEffect]
) -> None:
    a, _ = started
    ledger.cancel_run(CancelRun("run-1", "cancelled", ts(5), os.getpid(), ("a", "b"), None))
    (effect, _) = ledger.list_effects("run-1").effects
    assert effect.status == "uncertain" and ledger.remote_handle(a.effect_id) is not None
    observed = {"taskId": "task-7", "state": "completed"}
    request = ReconcileRequest(
        a.effect_id,
        "applied",
        "ops",
        "observed",
        {"kind": "remote_observation"},
        observed,
        None,
        ts(6),
        "reconciliation-1",
    )
    assert ledger.reconcile_effect(request).status == "applied"
    assert ledger.recorded_result(a.effect_id) == observed


def test_a_hand_back_keeps_a_continuable_effect_started_and_its_task_running(
    ledger: SqliteLedger, started: tuple[NewEffect, NewEffect]
) -> None:
    """A stopping ``serve`` hands the run back (``running``): the delegation with a handle
    lost only its observer, as after a crash; the one without is cut (uncertain, parked)."""
    a, b = started
    ledger.cancel_run(CancelRun("run-1", "running", ts(5), os.getpid(), ()))
    statuses = {e.task_id: e.status for e in ledger.list_effects("run-1").effects}
    assert statuses == {"a": "started", "b": "uncertain"}
    states = {t.task_id: t.state for t in ledger.inspect_run("run-1").tasks}
    assert states == {"a": "running", "b": "waiting_for_effect"}
    assert [e.effect_id for e in ledger.unresolved_effects("run-1")] == [b.effect_id]
    assert ledger.remote_handle(a.effect_id) is not None


def _wire(key: str, *methods_and_status: tuple[str, CallStatus]) -> ProtocolEvidence:
    session = ProtocolSession(key=key, protocol="a2a", peer="reviewer", endpoint="http://p/a2a")
    calls = [
        ProtocolCall(session_key=key, protocol="a2a", peer="reviewer", method=m, status=s)
        for m, s in methods_and_status
    ]
    return ProtocolEvidence(sessions=[session], calls=calls)


def test_evidence_commits_with_the_handle_and_an_observation_adds_rows(
    ledger: SqliteLedger, started: tuple[NewEffect, NewEffect]
) -> None:
    _, b = started
    card, sent = ("GetAgentCard", "succeeded"), ("SendMessage", "succeeded")
    ledger.record_remote_handle(_handle(b), _wire("delegate", card, sent))
    seen = ledger.inspect_run("run-1")
    assert [c.method for c in seen.protocol_calls] == ["GetAgentCard", "SendMessage"]
    # A later execution observes the task in a session of its own: rows are added after.
    ledger.record_protocol(
        ProtocolReport(b.effect_id, _wire("observe-1", card, ("GetTask", "succeeded")), ts(5))
    )
    # The first execution's fuller report (its outcome) updates its own rows in place.
    fuller = _wire("delegate", card, sent, ("GetTask", "uncertain"))
    ledger.record_protocol(ProtocolReport(b.effect_id, fuller, ts(6)))
    seen = ledger.inspect_run("run-1")
    keys = [s.session_id.rsplit("/", 1)[1] for s in seen.protocol_sessions]
    assert keys == ["delegate", "observe-1"]  # ordered by when each session was first seen
    rows = [(c.session_id.rsplit("/", 1)[1], c.method, c.status) for c in seen.protocol_calls]
    assert rows == [
        ("delegate", "GetAgentCard", "succeeded"),
        ("delegate", "SendMessage", "succeeded"),
        ("observe-1", "GetAgentCard", "succeeded"),
        ("observe-1", "GetTask", "succeeded"),
        ("delegate", "GetTask", "uncertain"),  # a new call goes last: the order it was learnt
    ]
