"""Run lifecycle transactions and snapshot reads behind ``RunLedger``: create, resume, stop.

Each ``*_txn`` here is the body of one ``RunLedger`` step inside the caller's one
``BEGIN IMMEDIATE`` transaction; each ``read_*`` runs inside one read snapshot.

Invariants:
- a run is created together with its lease (a created run always has an owner);
- a derived run (retry, repair, replay) is one transaction: run, copied tasks, memory, audit
  and lease — it never exists half-materialised;
- claiming a run for resume refuses terminal runs and queued ones (only a ``serve`` drives
  those), takes the lease and turns every ``started`` effect (whose outcome died with the
  previous coordinator) into ``uncertain`` and parks its task ``waiting_for_effect``
  (``ledger.lost``) — except one whose remote work has a durable handle (``ledger.remote``):
  it is observed again;
- stopping or settling a run releases only a lease its own process holds; a ``serve`` that
  hands its run back leaves a started effect with a durable remote handle started, as a
  crash would, for the claim that continues the run to observe; any stop ends a started
  effect its worker said was never sent ``cancelled``, never ``uncertain``;
- a compensation run is never created (nor queued) while an open compensation run of the same
  source holds one of its inverses unfinished: an inverse never runs in two runs at once.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import agentctl.ledger.approvals as approvals
import agentctl.ledger.audit as audit
import agentctl.ledger.effects as effects
import agentctl.ledger.leases as leases
import agentctl.ledger.longterm as longterm
import agentctl.ledger.reconcile as reconcile
import agentctl.ledger.remote as remote
import agentctl.ledger.runs as runs
import agentctl.ledger.streams as streams
import agentctl.ledger.tasks as tasks
import agentctl.ledger.tool_calls as tool_calls
from agentctl.core.jsonvalue import JsonObject, JsonValue
from agentctl.core.states import CANCELLABLE_TASK_STATES, TERMINAL_TASK_STATES
from agentctl.errors import BlockedError, InvalidOperationError, NotFoundError
from agentctl.ledger.artifacts.refs import list_refs
from agentctl.ledger.budget import WALL_TIME, record_exceeded_txn
from agentctl.ledger.budget_known import read_known
from agentctl.ledger.budget_release import release_unstarted_txn
from agentctl.ledger.lost import judge_lost_txn, park_uncertain_txn, requeue_unsent_txn
from agentctl.ledger.model import (
    CancelRun,
    DerivedRun,
    InflightEffect,
    LiveState,
    MemoryEntry,
    OpenCompensationTask,
    Owner,
    ResumeClaim,
    SettleRun,
    SourceSnapshot,
)
from agentctl.ledger.rows import parse_ts
from agentctl.ledger.sql import Db
from agentctl.ledger.steps import walk_txn

TERMINAL_RUN = frozenset({"succeeded", "failed", "cancelled"})
_IN_FLIGHT = frozenset({"running", "waiting_for_effect", "waiting_for_approval"})
_OPEN_WHEN_PAUSED = frozenset({"pending", "ready", "retry_scheduled", "waiting_for_approval"})


# Why a stopped run's open tasks ended ``cancelled`` (their ``error``): the one wording of
# every path that stops a run for good — ``cancel`` of an undriven run, a driven cancel
# (SIGINT, ``cancel``, ``--timeout-seconds``), a wall-time failure, a run failing after a task.
RUN_CANCELLED = "the run was cancelled"
TASK_FAILED = "the run stopped after a task failed"


def cancelled_task_error(state: str, why: str) -> str:
    """The error of a task cancelled from ``state`` because its run stopped ``why``: one
    that never started (``pending``) says so."""
    return f"not started: {why}" if state == "pending" else why


def create_run_txn(
    conn: Db, run: runs.NewRun, order: tuple[str, ...], owner: Owner, now: str
) -> None:
    """The run (tasks, budget, audit, checkpoint) and its lease."""
    refuse_held_inverses_txn(conn, run, order)
    runs.create_run_txn(conn, run, order, now)
    leases.acquire_run_lease_txn(conn, run.run_id, owner.pid, owner.create_time, now)


def create_derived_run_txn(conn: Db, d: DerivedRun) -> None:
    """A run materialised from another one; see ``model.DerivedRun`` for the order."""
    run_id, trace_id, now = d.run.run_id, d.run.trace_id, d.now
    runs.create_run_txn(conn, d.run, d.task_order, now)
    # The run-level decision (``retry.created``: its roots, what it reuses) before what follows
    # from it (each ``task_reused``, a replay's walks).
    for ev in d.events:
        audit.append_audit_txn(conn, run_id, ev.event_type, ev.payload, now, trace_id=trace_id)
    if d.walk:
        _walk_recorded_txn(conn, run_id, d.completions, d.working_memory, now, trace_id)
    else:
        memory = d.working_memory
        tasks.commit_tasks_txn(conn, run_id, d.completions, memory, now, trace_id=trace_id)
    if d.final_state is not None:
        runs.set_run_state_txn(
            conn, run_id, d.final_state, now, output=d.final_output, trace_id=trace_id
        )
    if d.stream_source is not None:
        streams.copy_stream_events_txn(conn, d.stream_source, run_id)
    if d.owner is not None:
        leases.acquire_run_lease_txn(conn, run_id, d.owner.pid, d.owner.create_time, now)


# A recorded task walks ready → running → its recorded state, as it once ran (spec/cli.md §5
# replay); a skipped one — and one cancelled before it started — goes there directly.
_DIRECT = frozenset({"skipped", "cancelled"})


def _walk_recorded_txn(
    conn: Db,
    run_id: str,
    completions: tuple[tasks.TaskCompletion, ...],
    memory: JsonValue,
    now: str,
    trace_id: str,
) -> None:
    """Each recorded task's walk and then its completion, task by task in order, so the audit
    reads as the source ran (pending → succeeded is an edge for reuse, not for a replay)."""
    for c in completions:
        steps = ("pending", c.state, c.attempt)
        if c.state not in _DIRECT:
            tasks.transition_task_txn(conn, run_id, c.task_id, "ready", now, trace_id=trace_id)
            steps = ("ready", c.state, c.attempt)
        walk_txn(conn, run_id, c.task_id, steps, now, trace_id, checkpoint=True)
        tasks.commit_tasks_txn(conn, run_id, (c,), None, now, trace_id=trace_id)
    tasks.commit_tasks_txn(conn, run_id, (), memory, now, trace_id=trace_id)


def claim_for_resume_txn(
    conn: Db, run_ref: str, owner: Owner, now: str, trace_id: str | None = None
) -> ResumeClaim:
    """Refuse terminal runs; started effects become uncertain and their tasks wait for the
    operator (``ledger.lost``; the events name ``trace_id``, the resume's); take the lease
    unless unresolved effects block the resume. A blocked resume leaves the run row as it was."""
    run = runs.find_run_head(conn, run_ref)
    if run.state in TERMINAL_RUN:
        raise InvalidOperationError(
            f"run {run.run_id} is {run.state}; resume continues only running or paused runs "
            "(use retry, repair or fork for a new run)",
            run_id=run.run_id,
        )
    if run.state == "queued":  # a serve may claim it at any moment: one driver only
        raise InvalidOperationError(
            f"run {run.run_id} is queued: it waits for an `agentctl serve` to claim it "
            "(cancel it to drop it); resume continues only running or paused runs",
            run_id=run.run_id,
        )
    _refuse_superseded(conn, run.run_id)
    # A live other owner refuses the resume before any effect is judged abandoned.
    leases.refuse_other_owner_txn(conn, run.run_id, owner.pid, owner.create_time, now)
    # A started effect with a durable remote handle lost only its observer: it stays started
    # and the resumed drive observes the same remote work (ledger.remote).
    blocked = tuple(judge_lost_txn(conn, run.run_id, now, trace_id))
    if not blocked:
        leases.take_run_lease_txn(conn, run.run_id, owner.pid, owner.create_time, now)
    return ResumeClaim(run, blocked)


def _refuse_superseded(conn: Db, run_id: str) -> None:
    """A run parked on an uncertain effect that a repair or retry already took as its source
    is not driven again: its closure's work would run in both runs (docs/operations.md §7)."""
    row = conn.execute(
        "SELECT run_id, mode FROM runs WHERE source_run_id = ? AND mode IN ('repair', 'retry')"
        " ORDER BY created_at LIMIT 1",
        (run_id,),
    ).fetchone()
    if row is not None:
        raise InvalidOperationError(
            f"run {run_id} was taken over by {row[1]} run {row[0]}; resuming it as well would "
            "run that work twice (inspect or resume the derived run instead)",
            run_id=run_id,
        )


def raise_cancel_flag_txn(conn: Db, run_ref: str, now: str) -> str:
    """A cancel request's first transaction: the durable cancel flag of the queued, running or
    paused run ``run_ref`` names (else ``NotFoundError``); returns the run's id."""
    run_id = runs.find_run_head(conn, run_ref).run_id
    runs.raise_cancel_flag_txn(conn, run_id, now)
    return run_id


def request_cancel_txn(
    conn: Db, run_id: str, now: str, trace_id: str | None = None
) -> runs.RunRecord:
    """A cancel request's second transaction, once the flag is raised: its audit event, and an
    undriven run cancelled at once; returns the run after it. Every event written here names
    ``trace_id``, the cancelling invocation's.

    A paused run keeps its state, its approvals and its flag (spec/cli.md §6: the request is
    for another process to observe): the next ``resume`` (or a ``serve``'s claim) honours it
    at its first boundary, before any work, and ends the run ``cancelled`` (exit 130).
    A queued run, a running run a ``serve`` handed back (no owner) and a running run whose
    ``run``/``resume`` died (its local owner's process is gone) are cancelled here: nothing
    is driving them that could honour the flag, and a ``resume`` of a crashed run stops at
    its unresolved effects before it reaches the flag. Such a run's started effects become
    uncertain, as a driven cancel leaves them. A run being driven honours the flag itself —
    maybe before this transaction commits, in which case the run is already over and the
    request is not audited after its end.
    """
    run = runs.get_run(conn, run_id)
    if run.state not in ("queued", "running", "paused"):
        return run
    runs.record_cancel_request_txn(conn, run.run_id, now, trace_id=trace_id)
    if run.state == "running" and (
        run.owner_pid is None or leases.has_dead_local_owner(conn, run.run_id)
    ):
        # (a hand-back made them uncertain already, but for those with a remote handle)
        lost = effects.LOST_BY_CRASH
        effects.mark_uncertain_txn(conn, run.run_id, now, why=lost, trace_id=trace_id)
        cancel_undriven_txn(conn, run.run_id, now, trace_id)
        if run.owner_pid is not None:  # the dead owner's lease goes with its run
            leases.release_run_lease_txn(conn, run.run_id, run.owner_pid, now)
    elif run.state == "queued":
        _cancel_unowned_txn(conn, run.run_id, now, _OPEN_WHEN_PAUSED, trace_id)
    return runs.get_run(conn, run.run_id)


def cancel_undriven_txn(conn: Db, run_id: str, now: str, trace_id: str | None) -> None:
    """Cancel a started run nothing drives, its started effects judged uncertain already: by
    ``cancel`` of a run whose driver died, or by a ``serve`` that took one over with its cancel
    flag set (its previous holder died before honouring it)."""
    _cancel_unowned_txn(conn, run_id, now, _OPEN_WHEN_PAUSED | CANCELLABLE_TASK_STATES, trace_id)


def _cancel_unowned_txn(
    conn: Db, run_id: str, now: str, open_states: frozenset[str], trace_id: str | None
) -> None:
    """Pending approvals closed (their effects cancelled), open tasks cancelled, run cancelled;
    the reservations of effects that never started settled with nothing."""
    approvals.close_pending_txn(conn, run_id, now, RUN_CANCELLED, trace_id=trace_id)
    _end_unstarted_txn(conn, run_id, now, RUN_CANCELLED, trace_id)
    for task in tasks.list_tasks(conn, run_id):
        if task.state in open_states:
            why = cancelled_task_error(task.state, RUN_CANCELLED)
            tasks.transition_task_txn(
                conn, run_id, task.task_id, "cancelled", now, error=why, trace_id=trace_id
            )
    runs.set_run_state_txn(conn, run_id, "cancelled", now, trace_id=trace_id)


def cancel_run_txn(conn: Db, stop: CancelRun) -> None:
    """Stop in-flight work durably, in this one transaction: the started effects its workers
    said were never sent (``stop.unsent``) → cancelled, the other started effects → uncertain
    (their reservations stay active until reconciled), tasks → cancelled saying why; a run
    stopped for good settles the reservations of effects that never started or were never
    sent with nothing (``budget_release``) and ends with every task terminal
    (``_close_parked_txn``). A stopping ``serve`` hands its run back instead (``running``): no
    task is cancelled, an effect whose remote work has a durable handle stays ``started`` (its
    task ``running``: the serve that continues the run observes it again, ``ledger.remote``),
    each task on an effect made uncertain here is parked ``waiting_for_effect``, as a claim of
    the run would park it, and each one never sent gives its reservation back, its task
    waiting ``retry_scheduled`` for its next attempt (``ledger.lost``)."""
    run_id, now, trace_id = stop.run_id, stop.now, stop.trace_id
    cancelled = [  # never sent: first, or they would be uncertain
        cut.effect_id
        for cut in stop.unsent
        if effects.cancel_unsent_txn(conn, cut.effect_id, now, why=cut.error, trace_id=trace_id)
    ]
    stopped = effects.STOPPED_IN_FLIGHT if stop.reason is None else stop.reason
    # A hand-back cut only the observer of remote work with a durable handle: it stays
    # started, and the serve that continues the run observes it again (``ledger.remote``).
    keep = remote.CONTINUABLE if stop.state == "running" else None
    effects.mark_uncertain_txn(conn, run_id, now, why=stopped, keep=keep, trace_id=trace_id)
    why = stop.reason or RUN_CANCELLED
    for task_id in stop.cancel_tasks:  # in flight (or ready): they started, or were about to
        tasks.transition_task_txn(
            conn, run_id, task_id, "cancelled", now, error=why, trace_id=trace_id
        )
    if stop.reason is not None:
        _record_wall_time_txn(conn, run_id, now, trace_id)
    if stop.state == "running":  # a stopping ``serve`` hands the run back: its requested
        # effects still run when another ``serve`` continues it, and the tasks its cut
        # effects leave undecided wait for their reconciliation, as a claim would park them
        park_uncertain_txn(conn, run_id, now, trace_id)
        # (a cancelled effect in a task still running would read as its approval rejected)
        requeue_unsent_txn(conn, run_id, cancelled, now, trace_id)
    else:
        _close_parked_txn(conn, stop)
        _end_unstarted_txn(conn, run_id, now, stop.reason or RUN_CANCELLED, trace_id)
        error = stop.reason
        runs.set_run_state_txn(conn, run_id, stop.state, now, error=error, trace_id=trace_id)
    leases.release_run_lease_txn(conn, run_id, stop.pid, now)


def _close_parked_txn(conn: Db, stop: CancelRun) -> None:
    """A run stopped for good while a task waited for its approval (a sibling was still
    running, or the wall time ran out before the approved effect could start): the approval is
    closed (``cancelled``, its effect ``cancelled``) and the task ``cancelled``, as ``cancel``
    of a paused run does — else a terminal run would keep an open approval an operator could
    still approve, and a task in flight that ``replay`` refuses for ever. The tasks that never
    started are cancelled too, whether the run ends ``cancelled`` or ``failed`` (its wall time
    ran out): a terminal run has every task terminal, as ``settle_run_txn`` leaves one."""
    why = stop.reason or RUN_CANCELLED
    resolver = "agentctl cancel" if stop.state == "cancelled" else "agentctl budget"
    run_id, now, trace_id = stop.run_id, stop.now, stop.trace_id
    approvals.close_pending_txn(conn, run_id, now, why, resolver=resolver, trace_id=trace_id)
    for task in tasks.list_tasks(conn, run_id):
        if task.state in ("waiting_for_approval", "pending"):
            error = cancelled_task_error(task.state, why)
            tasks.transition_task_txn(
                conn, run_id, task.task_id, "cancelled", now, error=error, trace_id=trace_id
            )


def _end_unstarted_txn(conn: Db, run_id: str, now: str, why: str, trace_id: str | None) -> None:
    """A run stopped for good: what never started never will — each ``requested`` effect
    (approved, or recorded before a worker took it) ends ``cancelled``, its held tool call with
    it, as a closed approval's effect does; then every reservation of such an effect settles
    with nothing (``budget_release``). A terminal run keeps no effect a drive could still run."""
    for effect_id in effects.cancel_requested_txn(conn, run_id, now, why=why, trace_id=trace_id):
        tool_calls.move_held_tool_call_txn(conn, effect_id, "cancelled", now, error=why)
    release_unstarted_txn(conn, run_id, now, trace_id)


def _record_wall_time_txn(conn: Db, run_id: str, now: str, trace_id: str | None) -> None:
    """The wall-time overrun is the budget's ``exceeded`` record (as any other dimension's):
    ``{dimension: wallTimeSeconds, limit, attempted}`` with the whole seconds since creation,
    audited ``budget.exceeded`` with a checkpoint; an earlier overrun stays the one recorded."""
    known, exceeded = read_known(conn, run_id)
    limit = known.limits.get(WALL_TIME)
    if exceeded is not None or limit is None:
        return
    started = parse_ts(runs.get_run(conn, run_id).created_at)
    elapsed = math.ceil((parse_ts(now) - started).total_seconds())
    over: JsonObject = {
        "dimension": WALL_TIME,
        "limit": limit,
        "attempted": max(elapsed, limit + 1),
    }
    record_exceeded_txn(conn, run_id, over, now, trace_id)


def settle_run_txn(conn: Db, settle: SettleRun) -> None:
    """End a drive; a failed run ends with every task terminal (never started → cancelled)
    and, like a cancelled one, settles the reservations of effects that never started with
    nothing (``budget_release``): it is terminal, so nothing can run them any more (an effect
    approved, or still waiting for its approval, among them). A run that stays ``running``
    or ``paused`` keeps them for the drive that continues it. A failed run's pending approvals
    are closed first (``cancelled``, their effects ``cancelled``; a later approve is refused),
    as a cancelled run's are: a task's failure ended the run while a sibling still waited."""
    run_id, now, trace = settle.run_id, settle.now, settle.trace_id
    if settle.state == "failed":
        approvals.close_pending_txn(
            conn, run_id, now, TASK_FAILED, resolver="agentctl failure", trace_id=trace
        )
    for task_id in settle.never_started:
        tasks.transition_task_txn(
            conn,
            run_id,
            task_id,
            "cancelled",
            now,
            error=cancelled_task_error("pending", TASK_FAILED),
            trace_id=trace,
        )
    if settle.state == "failed":
        _end_unstarted_txn(conn, run_id, now, TASK_FAILED, trace)
    if settle.state != "running":
        runs.set_run_state_txn(
            conn, run_id, settle.state, now, output=settle.output, trace_id=trace
        )
    leases.release_run_lease_txn(conn, run_id, settle.pid, now)


def read_live(conn: Db, run_id: str) -> LiveState:
    """The run, its tasks (states, not outputs: those are read when a task needs them), and
    the latest effect (+ reconciliation) of each task in flight."""
    inputs, memory = runs.get_run_state(conn, run_id)
    records = tuple(tasks.list_live_tasks(conn, run_id))
    inflight = []
    for t in records:
        if t.state not in _IN_FLIGHT:
            continue
        eff = effects.latest_effect_for(conn, run_id, t.task_id, t.attempt)
        if eff is None:
            continue
        recs = reconcile.list_reconciliations(conn, effect_id=eff.effect_id)
        handle = remote.get_handle(conn, eff.effect_id)
        inflight.append(InflightEffect(t.task_id, eff, recs[-1] if recs else None, handle))
    return LiveState(inputs, memory, records, tuple(inflight))


def read_source(conn: Db, run_ref: str) -> SourceSnapshot:
    run = runs.find_run(conn, run_ref)
    return SourceSnapshot(
        run=run,
        tasks=tuple(tasks.list_tasks(conn, run.run_id)),
        effects=tuple(effects.list_effects(conn, run.run_id)),
        reconciliations=tuple(reconcile.list_reconciliations(conn, run_id=run.run_id)),
        artifacts=tuple(list_refs(conn, run_id=run.run_id)),
        driven=leases.has_live_owner(conn, run.run_id),
        open_compensations=(
            *_open_compensations(conn, run.run_id),
            *_unsettled_inverses(conn, run.run_id),
        ),
    )


def refuse_held_inverses_txn(conn: Db, run: runs.NewRun, order: Sequence[str]) -> None:
    """Refuse a compensation run one of whose inverses an open compensation run of the same
    source still holds (a task of it that has not ended). The planner blocks that case
    (``compensation_in_progress``); two ``compensate`` invocations that planned at the same
    time both passed it, so the creating transaction checks again: only one runs the inverse."""
    if run.mode != "compensation" or run.source_run_id is None:
        return
    wanted = set(order)
    for held in _open_compensations(conn, run.source_run_id):
        if held.task_id in wanted and held.state not in TERMINAL_TASK_STATES:
            raise BlockedError(
                f"compensation run {held.run_id} of run {run.source_run_id} has not finished "
                f"{held.task_id} ({held.state}); resume or cancel it first",
                run_id=run.source_run_id,
                trace_id=run.trace_id,
            )


def _open_compensations(conn: Db, run_id: str) -> tuple[OpenCompensationTask, ...]:
    """The tasks of the compensation runs sourced from ``run_id`` that have not ended: an
    ended run (failed, cancelled) holds nothing, whatever its tasks were left as."""
    rows = conn.execute(
        "SELECT t.run_id, t.task_id, t.state FROM runs r"
        " JOIN task_states t ON t.run_id = r.run_id"
        " WHERE r.source_run_id = ? AND r.mode = 'compensation'"
        " AND r.state IN ('queued', 'running', 'paused')"
        " ORDER BY r.created_at, r.run_id, t.position",
        (run_id,),
    ).fetchall()
    return tuple(OpenCompensationTask(row[0], row[1], row[2]) for row in rows)


def _unsettled_inverses(conn: Db, run_id: str) -> tuple[OpenCompensationTask, ...]:
    """The inverses of ended compensation runs sourced from ``run_id`` that may have taken
    effect without their source effects saying ``compensated``: an effect started or
    uncertain (cut off by a cancel, a signal, a crash), unless reconciled ``not_applied``; or
    reconciled ``applied``. Planning the inverse again could undo the same thing twice."""
    rows = conn.execute(
        "SELECT e.run_id, e.task_id, t.state, e.effect_id FROM runs r"
        " JOIN effects e ON e.run_id = r.run_id"
        " JOIN task_states t ON t.run_id = e.run_id AND t.task_id = e.task_id"
        " WHERE r.source_run_id = ? AND r.mode = 'compensation'"
        " AND r.state NOT IN ('queued', 'running', 'paused')"
        " AND e.status IN ('started', 'uncertain')"
        " ORDER BY r.created_at, r.run_id, t.position",
        (run_id,),
    ).fetchall()
    found: list[OpenCompensationTask] = []
    for run, task, state, effect_id in rows:
        recs = reconcile.list_reconciliations(conn, effect_id=effect_id)
        last = recs[-1].status if recs else None
        if last in (None, "applied"):
            status = "applied" if last else "uncertain"
            found.append(OpenCompensationTask(run, task, state, effect_id, status))
    return tuple(found)


def read_recorded_result(conn: Db, effect_id: str) -> JsonValue:
    """The result to reuse for an effect that already happened (confirmed or applied).

    None when there is nothing to reuse (no such effect yet, or not confirmed).
    """
    try:
        found = effects.get_effect(conn, effect_id)
    except NotFoundError:  # a call this attempt has not made yet
        return None
    if found.status == "succeeded":
        return found.result
    recs = reconcile.list_reconciliations(conn, effect_id=effect_id)
    if recs and recs[-1].status == "applied":
        return recs[-1].result
    return None


def read_memory(conn: Db, namespace: str, key: str, now: str) -> MemoryEntry:
    """A long-term memory entry (expired entries are absent)."""
    return longterm.get_entry(conn, namespace, key, now)
