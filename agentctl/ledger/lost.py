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
  the claim that continues the run observes it again. An effect its worker said was cut
  before its request left (``requeue_unsent_txn``) did not happen: it ends ``cancelled``, its
  reservation given back, and its task waits ``retry_scheduled`` for the drive that continues
  the run to run it as a new attempt — never uncertain, never parked, sent at most once.
"""

from __future__ import annotations

from collections.abc import Iterable

from agentctl.ledger import effects, reconcile, remote, tasks
from agentctl.ledger.budget_release import release_effect_txn
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


def requeue_unsent_txn(
    conn: Db, run_id: str, cut: Iterable[str], now: str, trace_id: str | None
) -> None:
    """A hand-back: each effect of ``cut`` (ended ``cancelled`` just before, in this txn: its
    request never left its worker) settles its reservation with nothing, and its task, still
    ``running`` that attempt, → ``retry_scheduled``: the drive that continues the run (a
    ``serve``'s claim, ``resume``) runs it as a new attempt, as after a ``not_applied``
    reconciliation, and a run cancelled first cancels it (``CANCELLABLE_TASK_STATES``)."""
    for effect_id in cut:
        eff = effects.get_effect(conn, effect_id)
        release_effect_txn(conn, run_id, effect_id, now, trace_id)
        task = tasks.get_task(conn, run_id, eff.task_id)
        if task.state != "running" or task.attempt != eff.attempt:
            continue
        error = f"task {eff.task_id}: {eff.error}"
        tasks.transition_task_txn(
            conn,
            run_id,
            eff.task_id,
            "retry_scheduled",
            now,
            error=error,
            payload={"attempt": eff.attempt, "error": error},
            trace_id=trace_id,
        )


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
