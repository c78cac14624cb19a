"""``run_report``: a run's lineage (ancestors and descendants) and its attempts, read through
``RunLedger`` from a real SQLite file."""

from __future__ import annotations

from pathlib import Path

from ledger_helpers import ledger_target, make_run, ts

from agentctl.ledger import open_ledger
from agentctl.ledger.audit import append_audit_txn
from agentctl.ledger.connection import Database


def _family(ledger: Database) -> None:
    """run-1 ← retry-2 ← retry-3, and run-1 ← repair-4 (a sibling branch of retry-2)."""
    make_run(ledger, "run-1", now=ts(0))
    make_run(ledger, "retry-2", mode="retry", source_run_id="run-1", now=ts(1))
    make_run(ledger, "retry-3", mode="retry", source_run_id="retry-2", now=ts(2))
    make_run(ledger, "repair-4", mode="repair", source_run_id="run-1", now=ts(3))


def test_lineage_has_ancestors_the_run_and_descendants_only(
    ledger: Database, db_path: Path
) -> None:
    _family(ledger)
    led = open_ledger(ledger_target(ledger, db_path))
    middle = led.run_report("retry-2")
    assert [(r.run_id, r.relation) for r in middle.lineage] == [
        ("run-1", "ancestor"),
        ("retry-2", "self"),
        ("retry-3", "descendant"),
    ]
    assert [r.run_id for r in middle.children()] == ["retry-3"]
    root = led.run_report("run-1")
    assert [r.run_id for r in root.lineage] == ["run-1", "retry-2", "repair-4", "retry-3"]
    assert [r.run_id for r in root.children()] == ["retry-2", "repair-4"]
    assert led.run_report("retry-3").children() == ()
    led.close()


def test_attempts_follow_retries_and_approval_pauses(ledger: Database, db_path: Path) -> None:
    make_run(ledger, tasks=("a", "b"))
    events = [
        ("task.running", "a", {"attempt": 1}, 1),
        ("task.retry_scheduled", "a", {"attempt": 1}, 3),
        ("task.ready", "a", {"attempt": 2}, 4),
        ("task.running", "a", {"attempt": 2}, 5),
        ("task.waiting_for_approval", "a", {"attempt": 2}, 6),
        ("task.running", "a", {"attempt": 2}, 20),  # approved: the same attempt goes on
        ("task.running", "b", {"attempt": 1}, 21),
        ("task.succeeded", "a", {"attempt": 2}, 25),
    ]
    with ledger.transaction() as conn:
        for kind, task, payload, second in events:
            append_audit_txn(conn, "run-1", kind, payload, ts(second), task_id=task)
    led = open_ledger(ledger_target(ledger, db_path))
    spans = led.run_report("run-1").attempts()
    led.close()
    assert [(s.task_id, s.attempt, s.outcome, s.duration_seconds) for s in spans] == [
        ("a", 1, "retry_scheduled", 2.0),
        ("a", 2, "succeeded", 20.0),
        ("b", 1, "running", None),  # still open
    ]
