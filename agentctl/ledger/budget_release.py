"""Settling the budget reservations a run's normal outcomes never settle: an uncertain
effect's, when an operator reconciles it, and a stopped run's effects that never started.

A reservation is keyed by its effect's id (spec/cli.md §7). An effect that became uncertain
(a crash, a stop, a lost worker after it started) has no outcome to settle it, so its
reservation stays ``active`` and counts against the limits until the operator says what
happened:

- ``settle_reconciled_txn`` (in the reconciliation's transaction): the first ``applied`` or
  ``not_applied`` record settles it with ``core.reconciled_spend`` — ``not_applied`` nothing,
  ``applied`` the actual the result tells (a model call's usage priced at the rates the
  coordinator read from the run's plan), else the amount reserved (an upper bound stays
  one). Only an ``active`` reservation is settled: an earlier record's is never counted
  again (an uncertain outcome — a timeout, a lost worker or connection — settles nothing, so
  its reservation is still active here);
- ``release_effect_txn``: an effect whose approval is rejected never runs, nor one a
  ``serve``'s hand-back cut before its request left; its reservation settles with nothing in
  the rejection's (the hand-back's) transaction;
- ``release_unstarted_txn`` (when a run is stopped for good, in the transaction that ends it:
  cancelled, or ended failed — a failed drive or its wall time): a reservation whose effect
  never started — no effect row, or one ``requested``, ``waiting_for_approval`` or
  ``cancelled`` (a closed approval, or a ``requested`` one the stop cancelled first:
  ``lifecycle._end_unstarted_txn``) that will not run — settles with nothing. A started (now
  ``uncertain``) effect's stays active until it is reconciled: a spend may have happened. A
  run that stays resumable (paused, blocked, handed back by a ``serve``) keeps them all,
  but for an effect a ``serve``'s hand-back cut before its request left its worker: ended
  ``cancelled``, it never runs, so ``release_effect_txn`` gives its reservation back there
  (``ledger.lost.requeue_unsent_txn``; its task's next attempt reserves its own).
"""

from __future__ import annotations

from collections.abc import Mapping

from agentctl.core.jsonvalue import JsonValue
from agentctl.core.reconciled_spend import reconciled_spend
from agentctl.ledger.budget import settle_budget_txn
from agentctl.ledger.budget_known import held_amounts
from agentctl.ledger.effects import EffectRecord
from agentctl.ledger.sql import Db

_ACTIVE = (
    "SELECT amounts_json FROM budget_reservations"
    " WHERE run_id = ? AND reservation_id = ? AND status = 'active'"
)
_UNSTARTED = (
    "SELECT r.reservation_id, r.amounts_json FROM budget_reservations r"
    " LEFT JOIN effects e ON e.effect_id = r.reservation_id AND e.run_id = r.run_id"
    " WHERE r.run_id = ? AND r.status = 'active' AND (e.effect_id IS NULL"
    " OR e.status IN ('requested', 'waiting_for_approval', 'cancelled'))"
    " ORDER BY r.created_at, r.reservation_id"
)


def settle_reconciled_txn(
    conn: Db,
    effect: EffectRecord,
    status: str,
    result: JsonValue,
    now: str,
    trace_id: str | None,
    rates: Mapping[str, int] | None = None,
) -> None:
    """Settle the active reservation of ``effect`` that an ``applied`` or ``not_applied``
    reconciliation concludes (``rates``: a model call's price); none active: nothing changes."""
    run_id, effect_id = effect.run_id, effect.effect_id
    held = _active_held(conn, run_id, effect_id)
    if held is not None:
        spent = reconciled_spend(effect.operation, held, status, result, rates)
        settle_budget_txn(conn, run_id, effect_id, spent, now, trace_id=trace_id, held=held)


def release_unstarted_txn(conn: Db, run_id: str, now: str, trace_id: str | None) -> None:
    """Settle with nothing every active reservation of the stopped run ``run_id`` whose effect
    never started and will not run (see the module doc); audited under ``trace_id``, the
    stopping invocation's."""
    for row in conn.execute(_UNSTARTED, (run_id,)).fetchall():
        held = held_amounts(row[1])
        settle_budget_txn(conn, run_id, str(row[0]), {}, now, trace_id=trace_id, held=held)


def release_effect_txn(
    conn: Db, run_id: str, effect_id: str, now: str, trace_id: str | None
) -> None:
    """Settle with nothing the active reservation of an effect that will never run (its
    approval was rejected, or a hand-back cut it unsent, by the invocation of ``trace_id``);
    none active: nothing changes."""
    held = _active_held(conn, run_id, effect_id)
    if held is not None:
        settle_budget_txn(conn, run_id, effect_id, {}, now, trace_id=trace_id, held=held)


def _active_held(conn: Db, run_id: str, effect_id: str) -> dict[str, int] | None:
    """What the effect's reservation holds while it is active; None: none, or settled (read
    first: a settle of a reservation that never existed is an error)."""
    row = conn.execute(_ACTIVE, (run_id, effect_id)).fetchone()
    return None if row is None else held_amounts(row[0])
