"""Task transitions and the batched task-completion commit."""

from __future__ import annotations

from dataclasses import replace

import pytest
from ledger_helpers import make_run, ts

from agentctl.core.canonical import json_digest
from agentctl.errors import InvalidOperationError, NotFoundError, PersistenceError
from agentctl.ledger import AuditSpec, TaskCompletion
from agentctl.ledger.audit import list_audit, list_checkpoints
from agentctl.ledger.connection import Database
from agentctl.ledger.runs import get_run
from agentctl.ledger.tasks import (
    advance_task_txn,
    commit_tasks_txn,
    get_task,
    list_tasks,
    transition_task_txn,
)


def _to_running(ledger: Database, *task_ids: str) -> None:
    with ledger.transaction() as conn:
        for t in task_ids:
            transition_task_txn(conn, "run-1", t, "ready", ts(1))
            transition_task_txn(conn, "run-1", t, "running", ts(2), attempt=1)


def test_single_transitions_write_audit_and_checkpoint(ledger: Database) -> None:
    make_run(ledger)
    _to_running(ledger, "a")
    with ledger.read() as conn:
        task = get_task(conn, "run-1", "a")
        assert (task.state, task.attempt, task.updated_at) == ("running", 1, ts(2))
        audit = list_audit(conn, "run-1")
        assert [(e.event_type, e.task_id) for e in audit[1:]] == [
            ("task.ready", "a"),
            ("task.running", "a"),
        ]
        assert [e.sequence for e in audit] == [1, 2, 3]
        assert [c.sequence for c in list_checkpoints(conn, "run-1")] == [1, 2, 3]


def test_illegal_or_unknown_transition_is_refused(ledger: Database) -> None:
    make_run(ledger)
    with pytest.raises(InvalidOperationError), ledger.transaction() as conn:
        transition_task_txn(conn, "run-1", "a", "running", ts(1))  # pending → running
    with pytest.raises(NotFoundError), ledger.transaction() as conn:
        transition_task_txn(conn, "run-1", "zzz", "ready", ts(1))
    with ledger.read() as conn:
        assert get_task(conn, "run-1", "a").state == "pending"


def test_batch_commits_in_order_with_one_checkpoint(ledger: Database) -> None:
    make_run(ledger)
    _to_running(ledger, "a", "b")
    checkpoints_before = 5
    first = TaskCompletion("a", "succeeded", 1, output={"v": 1}, state_delta={"count": 1})
    first = replace(first, definition_fingerprint="sha256:v1:def", decision={"when": True})
    events = [AuditSpec("task.failed", {"error": "boom"}), AuditSpec("custom.note")]
    batch = [first, TaskCompletion("b", "failed", 1, error="boom", events=events)]
    with ledger.transaction() as conn:
        commit_tasks_txn(conn, "run-1", batch, {"count": 1}, ts(10), trace_id="trace-2")
    with ledger.read() as conn:
        a, b, c = list_tasks(conn, "run-1")
        assert (a.state, a.output) == ("succeeded", {"v": 1})
        assert a.output_digest == json_digest({"v": 1})
        assert (a.state_delta, a.state_delta_digest) == ({"count": 1}, json_digest({"count": 1}))
        assert (a.definition_fingerprint, a.decision) == ("sha256:v1:def", {"when": True})
        assert (b.state, b.error, c.state) == ("failed", "boom", "pending")
        tail = list_audit(conn, "run-1")[-3:]
        assert [(e.event_type, e.task_id) for e in tail] == [
            ("task.succeeded", "a"),
            ("task.failed", "b"),
            ("custom.note", "b"),
        ]
        assert tail[0].trace_id == "trace-2"
        checkpoints = list_checkpoints(conn, "run-1")
        assert len(checkpoints) == checkpoints_before + 1
        assert checkpoints[-1].state["tasks"] == [
            {"taskId": "a", "state": "succeeded", "attempt": 1},
            {"taskId": "b", "state": "failed", "attempt": 1},
        ]
        run = get_run(conn, "run-1")
        assert (run.working_memory, run.updated_at) == ({"count": 1}, ts(10))


def test_an_illegal_completion_rolls_back_the_whole_batch(ledger: Database) -> None:
    make_run(ledger)
    _to_running(ledger, "a")
    batch = [TaskCompletion("a", "succeeded", 1), TaskCompletion("c", "failed", 1)]
    with pytest.raises(InvalidOperationError), ledger.transaction() as conn:
        commit_tasks_txn(conn, "run-1", batch, {"count": 9}, ts(10))
    with ledger.read() as conn:
        assert get_task(conn, "run-1", "a").state == "running"
        assert get_run(conn, "run-1").working_memory == {"count": 0}


def test_reused_task_materialises_from_pending_with_provenance(ledger: Database) -> None:
    make_run(ledger)
    reused = TaskCompletion(
        "a",
        "succeeded",
        0,
        disposition="reused",
        output={"v": 2},
        source_run_id="run-0",
        source_task_id="a",
        source_attempt=3,
        events=[AuditSpec("repair.task_reused")],
    )
    with ledger.transaction() as conn:
        commit_tasks_txn(conn, "run-1", [reused], None, ts(1))
    with ledger.read() as conn:
        a = get_task(conn, "run-1", "a")
        assert (a.disposition, a.source_run_id, a.source_attempt) == ("reused", "run-0", 3)
        assert a.to_json()["sourceTaskId"] == "a"
        assert get_run(conn, "run-1").working_memory == {"count": 0}  # None keeps memory


@pytest.mark.sqlite_only
def test_checkpoint_checksum_is_verified_on_read(ledger: Database) -> None:
    make_run(ledger)
    ledger.conn.execute("UPDATE checkpoints SET state_json = '{\"tampered\":1}'")
    with pytest.raises(PersistenceError, match="checksum"), ledger.read() as conn:
        list_checkpoints(conn, "run-1")


def test_an_advance_is_one_update_with_every_step_audited(ledger: Database) -> None:
    """``pending`` → ``ready`` → ``running`` in one guarded UPDATE: each state passed is its
    own event, in order, on consecutive sequences; no checkpoint of its own."""
    make_run(ledger)
    with ledger.read() as conn:
        audit_before = len(list_audit(conn, "run-1"))
        checkpoints_before = len(list_checkpoints(conn, "run-1"))
    with ledger.transaction() as conn:
        advance_task_txn(conn, "run-1", "a", ("ready", "running"), ts(3), attempt=2, trace_id="t")
    with ledger.read() as conn:
        task = get_task(conn, "run-1", "a")
        events = list_audit(conn, "run-1")[audit_before:]
        assert len(list_checkpoints(conn, "run-1")) == checkpoints_before
    assert (task.state, task.attempt, task.updated_at) == ("running", 2, ts(3))
    assert [(e.event_type, e.payload, e.trace_id) for e in events] == [
        ("task.ready", {"attempt": 2}, "t"),
        ("task.running", {"attempt": 2}, "t"),
    ]
    assert [e.sequence for e in events] == [audit_before + 1, audit_before + 2]


def test_an_advance_from_an_illegal_state_is_refused(ledger: Database) -> None:
    """The guard is the first step's: a task already running cannot be walked to ready."""
    make_run(ledger)
    _to_running(ledger, "a")
    with pytest.raises(InvalidOperationError), ledger.transaction() as conn:
        advance_task_txn(conn, "run-1", "a", ("ready", "running"), ts(5), attempt=1)
    with pytest.raises(NotFoundError), ledger.transaction() as conn:
        advance_task_txn(conn, "run-1", "zzz", ("ready", "running"), ts(5), attempt=1)
    with ledger.read() as conn:
        assert get_task(conn, "run-1", "a").updated_at == ts(2)
