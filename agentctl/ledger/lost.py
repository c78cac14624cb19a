"""What a claim finds a lost coordinator left behind: ``resume`` and a ``serve``'s takeover.

Invariants (spec/cli.md §4, docs/operations.md §7):
- every ``started`` effect of the run becomes ``uncertain`` — it may have run — except one
  whose remote work has a durable handle (``ledger.remote``): it is observed again;
- a task still ``running`` on an uncertain effect nobody has reconciled is parked
  ``waiting_for_effect``, as the driver parks a task whose step timed out: however its effect
  became uncertain, the run tells one story (inspect, retry/repair's parked source) and waits
  for the operator's reconciliation;
- the unresolved effects are returned: any of them blocks the claim;
- a stopping ``serve`` that hands its run back (``park_uncertain_txn``) parks the tasks its
  cut effects leave undecided the same way, in its own transaction: the run it leaves is the
  run a claim would find, not one whose tasks still say ``running`` with nobody driving them.
  A continuable effect it leaves ``started`` (its task ``running``), as a crash leaves it:
  the claim that continues the run observes it again.
"""

from __future__ import annotations

from agentctl.ledger import effects, reconcile, remote, tasks
from agentctl.ledger.effects import EffectRecord
from agentctl.ledger.sql import Db


def judge_lost_txn(conn: Db, run_id: str, now: str, trace_id: str | None) -> list[EffectRecord]:
    """Started effects uncertain, their tasks parked; the effects that block the claim."""
    lost = effects.LOST_BY_CRASH
    effects.mark_uncertain_txn(
        conn, run_id, now, why=lost, keep=remote.CONTINUABLE, trace_id=trace_id
    )
    blocked = reconcile.unresolved_effects(conn, run_id)
    _park_txn(conn, run_id, blocked, now, trace_id)
    return blocked


def park_uncertain_txn(conn: Db, run_id: str, now: str, trace_id: str | None) -> None:
    """A hand-back: each task running on an uncertain effect nobody reconciled → parked, as
    ``judge_lost_txn`` parks it (the effects were made uncertain just before, in this txn)."""
    _park_txn(conn, run_id, reconcile.unresolved_effects(conn, run_id), now, trace_id)


def _park_txn(
    conn: Db, run_id: str, blocked: list[EffectRecord], now: str, trace_id: str | None
) -> None:
    """Each task running the attempt an uncertain effect belongs to → ``waiting_for_effect``,
    its error worded as the driver words a timed-out one (``effect outcome uncertain: …``)."""
    rows = conn.execute(
        "SELECT task_id, attempt FROM task_states WHERE run_id = ? AND state = 'running'",
        (run_id,),
    ).fetchall()
    running = {str(r[0]): int(r[1]) for r in rows}
    for eff in blocked:
        if eff.status != "uncertain" or running.get(eff.task_id) != eff.attempt:
            continue
        del running[eff.task_id]  # a task with several such effects is parked once
        tasks.transition_task_txn(
            conn,
            run_id,
            eff.task_id,
            "waiting_for_effect",
            now,
            error=f"effect outcome uncertain: {eff.error}",
            trace_id=trace_id,
        )
