"""A step transaction's settlements written with its next reservation (``SettleLater``): the
row, the reservations and the audit log end as when each settle writes at once, and a row
changed behind this process is read afresh before anything is decided from it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest
from ledger_helpers import make_run, ts

from agentctl.core.jsonvalue import JsonObject
from agentctl.ledger.audit import AuditBuffer, flush_audits_txn, list_audit
from agentctl.ledger.budget import (
    BudgetSnapshot,
    SettleLater,
    budget_snapshot,
    reserve_budget_txn,
    settle_budget_txn,
    write_settled_txn,
)
from agentctl.ledger.connection import Database
from agentctl.ledger.sql import Cursor, Db, Params, dialect_of


def _steps(conn: Db, run_id: str, later: SettleLater | None, step: int) -> bool:
    """One pipelined step: settle the previous reservation, reserve the next."""
    prev, nxt = f"r{step - 1}", f"r{step}"
    settle_budget_txn(
        conn, run_id, prev, {"toolCalls": 1, "outputTokens": 7}, ts(step), later=later
    )
    wanted = {"toolCalls": 1, "outputTokens": 10}
    got = reserve_budget_txn(conn, run_id, nxt, wanted, ts(step), later=later).granted
    write_settled_txn(conn, later, ts(step))
    return got


def _state(ledger: Database, run_id: str) -> tuple[BudgetSnapshot, list[tuple[str, JsonObject]]]:
    with ledger.read() as conn:
        snap = budget_snapshot(conn, run_id)
        events = [(e.event_type, e.payload) for e in list_audit(conn, run_id)]
    return snap, events


def test_settlements_written_with_the_next_reservation_end_as_written_at_once(
    ledger: Database,
) -> None:
    limits = {"maxToolCalls": 5, "maxOutputTokens": 100}
    for run_id in ("at-once", "later"):
        make_run(ledger, run_id, limits=limits)
        with ledger.transaction() as conn:
            assert reserve_budget_txn(conn, run_id, "r0", {"toolCalls": 1}, ts(0)).granted
        for step in range(1, 6):  # the sixth call is refused: 5 at most
            with ledger.transaction() as conn:
                later = SettleLater() if run_id == "later" else None
                assert _steps(conn, run_id, later, step) is (step < 5)
    (once, once_events), (late, late_events) = _state(ledger, "at-once"), _state(ledger, "later")
    assert (late.usage, late.reserved, late.exceeded) == (once.usage, once.reserved, once.exceeded)
    assert late.usage == {"toolCalls": 5, "outputTokens": 35, "totalTokens": 35}
    assert late.exceeded == {"dimension": "toolCalls", "limit": 5, "attempted": 6}
    assert late_events == once_events


def test_a_settlement_with_no_reservation_after_it_is_written_at_the_end(
    ledger: Database,
) -> None:
    make_run(ledger, limits={"maxToolCalls": 2})
    with ledger.transaction() as conn:
        reserve_budget_txn(conn, "run-1", "r1", {"toolCalls": 1}, ts(1))
    with ledger.transaction() as conn:
        later = SettleLater()
        snap = settle_budget_txn(conn, "run-1", "r1", {"toolCalls": 1}, ts(2), later=later)
        assert snap.usage == {"toolCalls": 1} and snap.reserved == {"toolCalls": 0}
        unwritten = budget_snapshot(conn, "run-1")  # the counters wait for a reservation
        assert unwritten.usage == {} and unwritten.reserved == {"toolCalls": 1}
        write_settled_txn(conn, later, ts(2))
        assert budget_snapshot(conn, "run-1") == snap


_OUTSIDE = textwrap.dedent(
    """
    import sys
    from agentctl.ledger.budget import reserve_budget_txn, settle_budget_txn
    from agentctl.ledger import open_ledger

    led = open_ledger(sys.argv[1])._tx
    now = "2024-05-01T12:00:30.000Z"
    run_id, dim, n = sys.argv[2], sys.argv[3], int(sys.argv[4])
    def spend(conn):
        assert reserve_budget_txn(conn, run_id, "outside", {dim: n}, now).granted
        settle_budget_txn(conn, run_id, "outside", {dim: n}, now)
    led.run_write(spend)
    led.close()
    """
)


def _spend_outside(script: Path, url: str, run_id: str, dim: str, n: int) -> None:
    """Another process reserves and settles ``n`` of ``dim`` in the run's budget."""
    argv = [sys.executable, str(script), url, run_id, dim, str(n)]
    subprocess.run(argv, check=True, timeout=120)


def test_a_row_spent_behind_this_process_is_read_afresh_and_its_overshoot_recorded(
    ledger: Database, db_path: Path, tmp_path: Path
) -> None:
    """Another process spends a call after this one remembered the row: the deferred
    settlement looks within the limit against the remembered row, over it against the real
    one, so the overshoot is recorded and the reservation after it refused."""
    make_run(ledger, limits={"maxToolCalls": 2})
    with ledger.transaction() as conn:
        assert reserve_budget_txn(conn, "run-1", "r1", {"toolCalls": 1}, ts(1)).granted
    script = tmp_path / "outside.py"
    script.write_text(_OUTSIDE)
    url = getattr(ledger, "url", str(db_path))
    _spend_outside(script, url, "run-1", "toolCalls", 1)
    with ledger.transaction() as conn:
        later = SettleLater()
        settle_budget_txn(conn, "run-1", "r1", {"toolCalls": 2}, ts(2), later=later)
        got = reserve_budget_txn(conn, "run-1", "r2", {"toolCalls": 1}, ts(3), later=later)
        write_settled_txn(conn, later, ts(3))
    # The refusal after the overshoot (usage 3) names what r2 would reach: 3 + 1.
    over = {"dimension": "toolCalls", "limit": 2, "attempted": 4}
    assert not got.granted and got.exceeded == over
    snap, events = _state(ledger, "run-1")
    assert snap.usage == {"toolCalls": 3} and snap.reserved == {"toolCalls": 0}
    assert snap.exceeded == over
    overshoot = {**over, "attempted": 3}  # recorded by the settle, then the refusal's
    exceeded = [("budget.exceeded", overshoot), ("budget.exceeded", over)]
    assert [e for e in events if e[0] == "budget.exceeded"] == exceeded


def _settle_over_a_stale_row(
    ledger: Database,
    db_path: Path,
    tmp_path: Path,
    settle: Callable[[Db, str, SettleLater | None], None],
) -> None:
    """Runs "at-once" and "later", each with two reservations and a row another process
    then spends on; ``settle`` runs in one transaction, given a SettleLater for "later"."""
    script = tmp_path / "outside.py"
    script.write_text(_OUTSIDE)
    url = getattr(ledger, "url", str(db_path))
    for run_id in ("at-once", "later"):
        make_run(ledger, run_id, limits={"maxOutputTokens": 10})
        with ledger.transaction() as conn:
            for r in ("r1", "r2"):
                assert reserve_budget_txn(conn, run_id, r, {"outputTokens": 1}, ts(1)).granted
        _spend_outside(script, url, run_id, "outputTokens", 5)
        with ledger.transaction() as conn:
            settle(conn, run_id, SettleLater() if run_id == "later" else None)


def test_two_settlements_in_one_transaction_over_a_stale_row_audit_as_written_at_once(
    ledger: Database, db_path: Path, tmp_path: Path
) -> None:
    """The row changes behind this process; then one transaction settles two effects, the
    first over the limit only against the real row. The overshoot is recorded for the first
    (its ``attempted`` without the second's spend), as when each settle writes at once."""

    def settle_two(conn: Db, run_id: str, later: SettleLater | None) -> None:
        settle_budget_txn(conn, run_id, "r1", {"outputTokens": 6}, ts(2), later=later)
        settle_budget_txn(conn, run_id, "r2", {"outputTokens": 3}, ts(2), later=later)
        write_settled_txn(conn, later, ts(2))

    _settle_over_a_stale_row(ledger, db_path, tmp_path, settle_two)
    (once, once_events), (late, late_events) = _state(ledger, "at-once"), _state(ledger, "later")
    assert once.exceeded == {"dimension": "outputTokens", "limit": 10, "attempted": 11}
    assert (late.usage, late.reserved, late.exceeded) == (once.usage, once.reserved, once.exceeded)
    assert late_events == once_events


def _settle_between_events(conn: Db, run_id: str, later: SettleLater | None, mid: bool) -> None:
    """A task event pending, the effect settled (over the real row), another event, the next
    reservation; the events go through the step's buffer (written at once without ``later``,
    as before the buffer reached the settle; ``mid``: the buffer is written in between)."""
    buffer = AuditBuffer()
    buffer.add("task.succeeded", {"attempt": 1, "error": None}, "t1")
    if later is None:
        flush_audits_txn(conn, run_id, buffer, ts(2))
    settle_budget_txn(conn, run_id, "r1", {"toolCalls": 2}, ts(2), later=later, buffer=buffer)
    if mid:
        flush_audits_txn(conn, run_id, buffer, ts(2))
    buffer.add("task.running", {"attempt": 1}, "t2")
    reserve_budget_txn(conn, run_id, "r2", {"toolCalls": 1}, ts(3), buffer=buffer, later=later)
    write_settled_txn(conn, later, ts(3))
    flush_audits_txn(conn, run_id, buffer, ts(3))


@pytest.mark.parametrize("mid", [False, True])
def test_a_deferred_settlement_records_its_overshoot_after_the_events_before_it(
    ledger: Database, db_path: Path, tmp_path: Path, mid: bool
) -> None:
    """A deferred settlement keeps the step's events in its buffer; when the row, read
    afresh, shows an overshoot, the events added before the settle are written first and
    those after it stay after the record — the audit log as when the settle wrote at once."""
    script = tmp_path / "outside.py"
    script.write_text(_OUTSIDE)
    url = getattr(ledger, "url", str(db_path))
    for run_id in ("at-once", "later"):
        make_run(ledger, run_id, limits={"maxToolCalls": 2})
        with ledger.transaction() as conn:
            assert reserve_budget_txn(conn, run_id, "r1", {"toolCalls": 1}, ts(1)).granted
        _spend_outside(script, url, run_id, "toolCalls", 1)
        with ledger.transaction() as conn:
            later = SettleLater() if run_id == "later" else None
            _settle_between_events(conn, run_id, later, mid)
    (once, once_events), (late, late_events) = _state(ledger, "at-once"), _state(ledger, "later")
    kinds = [kind for kind, _ in late_events if not kind.startswith("run.")]
    assert kinds[-4:] == ["task.succeeded", "budget.exceeded", "task.running", "budget.exceeded"]
    # The last record: the reservation refused after the overshoot (usage 3), reaching 3 + 1.
    assert late.exceeded == once.exceeded == {"dimension": "toolCalls", "limit": 2, "attempted": 4}
    assert late_events == once_events


class _Recording:
    """A transaction's connection that notes each statement's SQL before running it."""

    def __init__(self, conn: Db, seen: list[str]) -> None:
        self.conn, self.seen = conn, seen
        self.dialect = dialect_of(conn)

    def execute(self, sql: str, parameters: Params = (), /) -> Cursor:
        self.seen.append(sql)
        return self.conn.execute(sql, parameters)

    def executemany(self, sql: str, seq_of_parameters: Iterable[Params], /) -> Cursor:
        self.seen.append(sql)
        return self.conn.executemany(sql, seq_of_parameters)


def test_a_settle_told_what_was_held_ends_as_one_that_reads_it_back(ledger: Database) -> None:
    """``held`` (the amounts the caller reserved) spares the read back: the counters, the
    reservations and the audit log end the same, and a repeated settle changes nothing."""
    wanted = {"toolCalls": 1, "outputTokens": 10}
    statements: dict[str, list[str]] = {"read": [], "held": []}
    for run_id in ("read", "held"):
        make_run(ledger, run_id, limits={"maxToolCalls": 5})
        held = wanted if run_id == "held" else None
        with ledger.transaction() as conn:
            assert reserve_budget_txn(conn, run_id, "r1", wanted, ts(1)).granted
        for step in (2, 3):  # the second settle is a repeat
            with ledger.transaction() as conn:
                later, spent = SettleLater(), {"toolCalls": 1, "outputTokens": 7}
                seen = _Recording(conn, statements[run_id])
                settle_budget_txn(seen, run_id, "r1", spent, ts(step), later=later, held=held)
                write_settled_txn(conn, later, ts(step))
    # Told what was held, the settle reads nothing back (no RETURNING); otherwise it does.
    assert not any("RETURNING" in sql for sql in statements["held"])
    assert any("RETURNING" in sql for sql in statements["read"])
    (read, read_events), (told, told_events) = _state(ledger, "read"), _state(ledger, "held")
    assert told.usage == read.usage == {"toolCalls": 1, "outputTokens": 7, "totalTokens": 7}
    assert told.reserved == read.reserved == {"toolCalls": 0, "outputTokens": 0, "totalTokens": 0}
    assert told_events == read_events


def _two_settles_with_events(conn: Db, run_id: str, later: SettleLater | None) -> None:
    """Two outcomes settled in one transaction, each after its task's event; the first over
    the real row. Without ``later`` each event and settle is written at once."""
    buffer = AuditBuffer()
    for n, (reservation, spent) in enumerate((("r1", 6), ("r2", 3)), start=1):
        buffer.add("task.succeeded", {"attempt": 1, "error": None}, f"t{n}")
        if later is None:
            flush_audits_txn(conn, run_id, buffer, ts(2))
        spend = {"outputTokens": spent}
        settle_budget_txn(conn, run_id, reservation, spend, ts(2), later=later, buffer=buffer)
    write_settled_txn(conn, later, ts(2))
    flush_audits_txn(conn, run_id, buffer, ts(2))


def test_a_second_settle_writes_the_deferred_ones_overshoot_before_its_own_events(
    ledger: Database, db_path: Path, tmp_path: Path
) -> None:
    """The second settle cannot defer: it writes the first (deferred) one before the events
    held in the buffer, so the first's overshoot sits between the two tasks' events."""
    _settle_over_a_stale_row(ledger, db_path, tmp_path, _two_settles_with_events)
    (_, once_events), (_, late_events) = _state(ledger, "at-once"), _state(ledger, "later")
    kinds = [kind for kind, _ in late_events if not kind.startswith("run.")]
    assert kinds[-3:] == ["task.succeeded", "budget.exceeded", "task.succeeded"]
    assert late_events == once_events
