"""The effect protocol's transactions (DESIGN.md §3): compositions of the row-level ``*_txn``.

Each public function here is the body of one ``RunLedger`` step and runs inside the one
``BEGIN IMMEDIATE`` transaction the caller (``SqliteLedger``) opened for it.

Invariants:
- ``record_requests_txn`` commits the task transition, the ``requested`` effect row and the
  budget reservation together, before anything executes (and ``started`` with them on the
  fast path, or the approval pause instead); the previous batch's completions and deferred
  outcome may lead the same transaction (the pipelined commit: one commit per chain step);
- every transaction here writes at most one checkpoint;
- ``record_requests_txn`` writes the run's budget counters once when its remembered row
  holds: a carried outcome's settlement rides in the first reservation's compare-and-set
  (``budget.SettleLater``), or is written before its checkpoint when nothing is reserved;
- ``start_effects_txn`` commits ``started`` for a whole batch; only then is anything sent;
- ``finish_effects_txn`` commits outcomes with their settlement, memory write and tool-call
  finish (the group commit);
- ``commit_batch_txn`` commits outputs, memory, audit and one checkpoint in compiled order.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence

import agentctl.ledger.approvals as approvals
import agentctl.ledger.audit as audit
import agentctl.ledger.budget as budget
import agentctl.ledger.effects as effects
import agentctl.ledger.longterm as longterm
import agentctl.ledger.protocols as protocols
import agentctl.ledger.reconcile as reconcile
import agentctl.ledger.runs as runs
import agentctl.ledger.sessions as sessions
import agentctl.ledger.tasks as tasks
import agentctl.ledger.tool_calls as tool_calls
from agentctl.core.canonical import canonical_json
from agentctl.core.jsonvalue import JsonObject, JsonValue
from agentctl.core.states import can_transition_task
from agentctl.ledger.audit import AuditBuffer, flush_audits_txn
from agentctl.ledger.model import (
    BatchCommit,
    BudgetDenial,
    CallRecord,
    CompensatedPair,
    EffectOutcome,
    EffectStartBatch,
    Finished,
    RequestBatch,
    RequestRow,
    TaskStartBatch,
)
from agentctl.ledger.sql import Db, SqlParam


@functools.lru_cache(maxsize=256)
def transition_path(current: str, target: str) -> tuple[str, ...]:
    """The legal states to walk from ``current`` to ``target`` (target last); cached, as the
    few pairs of states recur on every step."""
    path: list[str] = []
    state = current
    for _ in range(4):
        if can_transition_task(state, target):
            return (*path, target)
        nxt = "ready" if state in ("pending", "retry_scheduled") else "running"
        if not can_transition_task(state, nxt):
            break
        path.append(nxt)
        state = nxt
    raise ValueError(f"no legal path from task state {current} to {target}")


def walk_txn(
    conn: Db,
    run_id: str,
    task_id: str,
    steps: tuple[str, str, int],
    now: str,
    trace_id: str | None,
    *,
    checkpoint: bool = False,
) -> None:
    """Walk a task through the intermediate states from ``steps[0]`` towards ``steps[1]``.

    Every step is audited; with ``checkpoint=False`` the caller's transaction ends with one
    checkpoint of its own.
    """
    current, target, attempt = steps
    for step in transition_path(current, target)[:-1]:
        tasks.transition_task_txn(
            conn,
            run_id,
            task_id,
            step,
            now,
            attempt=attempt,
            trace_id=trace_id,
            checkpoint=checkpoint,
        )


def _to_running_txn(
    conn: Db,
    run_id: str,
    start: tuple[str, str, int],
    now: str,
    trace_id: str,
    buffer: AuditBuffer,
) -> None:
    """Move a task to running (one UPDATE, each step audited into ``buffer``); one found
    running already starts a fresh attempt first."""
    task_id, current, attempt = start
    if current in ("running", "waiting_for_effect"):
        flush_audits_txn(conn, run_id, buffer, now)
        # A fresh attempt after a not-applied/compensated reconciliation.
        tasks.transition_task_txn(
            conn, run_id, task_id, "retry_scheduled", now, trace_id=trace_id, checkpoint=False
        )
        current = "retry_scheduled"
    path = transition_path(current, "running")
    tasks.advance_task_txn(
        conn, run_id, task_id, path, now, attempt=attempt, trace_id=trace_id, buffer=buffer
    )


def record_requests_txn(conn: Db, batch: RequestBatch) -> tuple[BudgetDenial, ...]:
    """The previous batch's completions (``batch.after``) first, then tasks → running, effects
    → requested, budgets reserved, and one checkpoint; returns the budget's denials."""
    runs.refuse_if_cancel_requested_txn(conn, batch.run_id)
    buffer = AuditBuffer()  # the transaction's events, written in one call before its end
    # The carried outcomes' budget settlements ride in the first reservation's counters write.
    later = budget.SettleLater()
    committed = _carried_txn(conn, batch.after, buffer, later)
    found = (_request_one_txn(conn, batch, r, buffer, later) for r in batch.rows)
    denied = [d for d in found if d is not None]
    task_ids = [r.task_id for r in batch.rows]
    budget.write_settled_txn(conn, later, batch.now)
    flush_audits_txn(conn, batch.run_id, buffer, batch.now)
    _checkpoint_txn(conn, batch.run_id, "effects.requested", task_ids, committed, batch.now)
    return tuple(denied)


def _carried_txn(
    conn: Db,
    after: BatchCommit | None,
    buffer: AuditBuffer,
    later: budget.SettleLater | None = None,
) -> JsonObject | None:
    """Commit the completions a start carries, their events into ``buffer`` (their budget
    counters into ``later`` when given); returns their checkpoint state (not written)."""
    if after is None:
        return None
    return commit_batch_txn(conn, after, checkpoint=False, buffer=buffer, later=later)


def _checkpoint_txn(
    conn: Db,
    run_id: str,
    event: str,
    task_ids: Sequence[str],
    committed: JsonObject | None,
    now: str,
) -> None:
    """The transaction's one checkpoint; the completions it carried are listed in it too."""
    tasks_json: list[JsonValue] = [{"taskId": t} for t in task_ids]
    state: JsonObject = {"runId": run_id, "event": event, "tasks": tasks_json}
    if committed is not None:
        state["committed"] = committed["tasks"]
        if "workingMemoryDigest" in committed:
            state["workingMemoryDigest"] = committed["workingMemoryDigest"]
    audit.write_checkpoint_txn(conn, run_id, state, now)


def _request_one_txn(
    conn: Db, batch: RequestBatch, row: RequestRow, buffer: AuditBuffer, later: budget.SettleLater
) -> BudgetDenial | None:
    """One task to running with its effect requested; the denial when the budget refused it."""
    run_id, now, trace_id = batch.run_id, batch.now, batch.trace_id
    start = (row.task_id, row.from_state, row.attempt)
    _to_running_txn(conn, run_id, start, now, trace_id, buffer)
    if row.budget:  # `budget.reserved` joins the buffer after the task's events
        outcome = budget.reserve_budget_txn(
            conn,
            run_id,
            row.effect.effect_id,
            row.budget,
            now,
            trace_id=trace_id,
            buffer=buffer,
            later=later,
            task_id=row.task_id,
        )
        if not outcome.granted:  # the overrun is recorded; no effect row is
            return BudgetDenial.of(row.task_id, outcome.exceeded)
    # DESIGN.md §8 fast path: the request still commits before anything executes, but
    # `requested` and `started` share this one transaction (one row, both events audited).
    held = row.approval_reason is not None
    effects.insert_effect_txn(conn, row.effect, now, started=not held, buffer=buffer)
    if held:
        flush_audits_txn(conn, run_id, buffer, now)
        _pause_for_approval_txn(conn, run_id, row, now, trace_id)
    return None


def _pause_for_approval_txn(
    conn: Db, run_id: str, row: RequestRow, now: str, trace_id: str
) -> None:
    """The pause transaction: task and effect wait, an approval row is pending."""
    tasks.transition_task_txn(
        conn,
        run_id,
        row.task_id,
        "waiting_for_approval",
        now,
        attempt=row.attempt,
        trace_id=trace_id,
        checkpoint=False,
    )
    request = approvals.NewApproval(
        run_id=run_id,
        task_id=row.task_id,
        effect_id=row.effect.effect_id,
        reason=row.approval_reason or "approval required",
        capability=row.capability or row.effect.operation,
        risk=row.effect.risk,
        redacted_input=row.effect.request,
        expected_effect=row.effect.effect_class,
        trace_id=trace_id,
    )
    approvals.insert_approval_txn(conn, request, now)


def start_tasks_txn(conn: Db, batch: TaskStartBatch) -> None:
    """Move tasks that record their own effects as they go (agents) to running, after the
    completions the batch carries; one checkpoint."""
    runs.refuse_if_cancel_requested_txn(conn, batch.run_id)
    buffer = AuditBuffer()
    committed = _carried_txn(conn, batch.after, buffer)
    for s in batch.starts:
        start = (s.task_id, s.from_state, s.attempt)
        _to_running_txn(conn, batch.run_id, start, batch.now, batch.trace_id, buffer)
    task_ids = [s.task_id for s in batch.starts]
    flush_audits_txn(conn, batch.run_id, buffer, batch.now)
    _checkpoint_txn(conn, batch.run_id, "tasks.started", task_ids, committed, batch.now)


def start_effects_txn(conn: Db, batch: EffectStartBatch) -> None:
    """Commit ``started`` for a batch; approved tasks move back to running first."""
    runs.refuse_if_cancel_requested_txn(conn, batch.run_id)
    for task_id in batch.approved_tasks:
        tasks.transition_task_txn(
            conn, batch.run_id, task_id, "running", batch.now, trace_id=batch.trace_id
        )
    for effect_id in batch.effect_ids:
        effects.start_effect_txn(conn, effect_id, batch.now, trace_id=batch.trace_id)


def record_and_start_call_txn(conn: Db, call: CallRecord) -> JsonObject | None:
    """Reserve, record and start one agent call; returns the overrun when the budget refuses
    it or a pure tool call it carries (then naming that call's ``tool`` and ``toolCallId``).

    A refusal still commits (the ``budget.exceeded`` record is durable) but records no effect;
    the carried calls granted before it keep their rows.
    """
    new, now = call.effect, call.now
    runs.refuse_if_cancel_requested_txn(conn, new.run_id)
    refused = tool_calls.insert_answered_txn(conn, new.run_id, call.answered, now, new.trace_id)
    if refused is not None:
        return refused
    outcome = budget.reserve_budget_txn(
        conn,
        new.run_id,
        new.effect_id,
        call.reserve,
        now,
        trace_id=new.trace_id,
        task_id=new.task_id,
    )
    if not outcome.granted:
        return outcome.exceeded or {}
    effects.insert_effect_txn(conn, new, now, started=True)
    if call.tool_call_id is not None:
        tool_calls.insert_tool_call_txn(
            conn,
            new.run_id,
            call.tool_call_id,
            new.task_id,
            call.tool or "",
            call.tool_input,
            now,
            effect_id=new.effect_id,
            attempt=new.attempt,
            provider_call_id=call.provider_call_id,
        )
    start = call.model_call_start()
    if start is not None:
        sessions.open_call_txn(conn, start, now)
    return None


def _audit_columns(o: EffectOutcome) -> dict[str, SqlParam] | None:
    """The row's audit columns when the caller inserted it (it names them), else None: the
    UPDATE returns them."""
    if o.operation is None:
        return None
    return {
        "run_id": o.run_id,
        "task_id": o.task_id,
        "attempt": o.attempt,
        "operation": o.operation,
        "status": o.status,
    }


def _finish_one_txn(
    conn: Db,
    o: EffectOutcome,
    buffer: AuditBuffer | None = None,
    text: str | None = None,
    later: budget.SettleLater | None = None,
) -> None:
    """An effect's outcome; its memory write, settlement, tool-call row and protocol evidence
    land with it. ``buffer`` collects its event; ``text``: the result's canonical JSON;
    ``later``: where the settlement's counters wait for the transaction's next reserve."""
    effects.finish_effect_txn(
        conn,
        o.effect_id,
        o.status,
        o.now,
        result=o.result,
        error=o.error,
        result_text=text,
        buffer=buffer,
        known=_audit_columns(o),
        trace_id=o.trace_id,
    )
    if o.long_term_put is not None:
        flush_audits_txn(conn, o.run_id, buffer, o.now)  # it may audit: keep the order
        longterm.put_txn(conn, o.long_term_put, o.now)
    if o.spent is not None:
        _settle_txn(conn, o, o.spent, buffer, later)
    if o.tool_call_id is not None:
        output = o.result if o.tool_output is None else o.tool_output
        tool_calls.finish_tool_call_txn(
            conn, o.run_id, o.tool_call_id, o.status, o.now, output=output, error=o.error
        )
    if o.model_call:
        sessions.settle_txn(conn, o.effect_id, o.status, o.result, o.now)
    if o.protocol is not None and not o.protocol.empty:
        protocols.record_protocol_txn(conn, o.effect_id, o.protocol, o.now)


def _settle_txn(
    conn: Db,
    o: EffectOutcome,
    spent: Mapping[str, int],
    buffer: AuditBuffer | None,
    later: budget.SettleLater | None,
) -> None:
    """The outcome's budget settlement; it writes ``buffer`` first if it audits (a deferred
    one does not)."""
    budget.settle_budget_txn(
        conn,
        o.run_id,
        o.effect_id,
        spent,
        o.now,
        trace_id=o.trace_id,
        later=later,
        buffer=buffer,
        held=o.held,
        task_id=o.task_id,
    )


def finish_effects_txn(conn: Db, outcomes: Sequence[EffectOutcome]) -> None:
    """Several effect outcomes in one transaction (the group commit)."""
    for outcome in outcomes:
        _finish_one_txn(conn, outcome)


def _add_events(buffer: AuditBuffer, item: tasks.TaskCompletion, trace_id: str | None) -> None:
    """Audit a task's state change, after the states it passed (``Finished.passed``); a
    condition or route decision is audited with it (first)."""
    task_id = item.task_id
    passed = item.passed if isinstance(item, Finished) else ()
    if passed:
        body = _passed_payload(item.attempt)
        for state in passed:
            buffer.add(f"task.{state}", body, task_id, trace_id)
    if item.decision is not None and "expression" in item.decision:
        buffer.add("task.condition_evaluated", dict(item.decision), task_id, trace_id)
    buffer.add(f"task.{item.state}", _final_payload(item.attempt, item.error), task_id, trace_id)
    for extra in item.events:  # a ``Finished``'s own: what its completion adds (rare)
        buffer.add(extra.event_type, extra.payload, task_id, trace_id)


@functools.lru_cache(maxsize=64, typed=True)
def _passed_payload(attempt: int) -> JsonObject:
    """A passed state's payload, as a walked transition's (``tasks.advance_task_txn``); shared
    like ``_final_payload``'s (read, NEVER changed)."""
    return {"attempt": attempt}


@functools.lru_cache(maxsize=64, typed=True)  # typed: an attempt 1 is never a True or 1.0
def _final_payload(attempt: int, error: str | None) -> JsonObject:
    """A completion event's payload, one object per distinct value (read, NEVER changed: the
    objects are shared by every event of that value in the process): the
    consecutive completions of a batch (a chain's group: all ``{attempt: 1, error: null}``)
    then share one encoding in the ``AuditBuffer`` instead of one each."""
    return {"attempt": attempt, "error": error}


def _finish_outcomes_txn(
    conn: Db,
    batch: BatchCommit,
    buffer: AuditBuffer,
    later: budget.SettleLater | None,
) -> dict[int, str]:
    """The batch's effect outcomes, their events into ``buffer``; returns each result's
    canonical JSON by the result's id (a task's output is most often that very value), and
    the outputs' the driver encoded already (``output_text``), which a result reuses."""
    known = {id(i.output): i.output_text for i in batch.items if i.output_text is not None}
    for o in batch.outcomes:
        text = None
        if o.result is not None:
            text = known.get(id(o.result))
            if text is None:
                text = known[id(o.result)] = canonical_json(o.result)
        _finish_one_txn(conn, o, buffer, text, later)
    return known


def commit_batch_txn(
    conn: Db,
    batch: BatchCommit,
    *,
    checkpoint: bool = True,
    buffer: AuditBuffer | None = None,
    later: budget.SettleLater | None = None,
) -> JsonObject:
    """Walk each task to its committed state and commit the batch in compiled order; returns
    the checkpoint's state (written here unless ``checkpoint=False``). The audit events go
    into ``buffer`` when given (the caller writes them), else they are written here; the
    budget settlements' counters into ``later`` when given (the caller writes them)."""
    run_id, now, trace_id = batch.run_id, batch.now, batch.trace_id
    events = AuditBuffer() if buffer is None else buffer
    known = _finish_outcomes_txn(conn, batch, events, later) if batch.outcomes else None

    def walk(item: tasks.TaskCompletion) -> None:
        """Just before ``item``'s completion, after the tasks before it in compiled order."""
        if not isinstance(item, Finished) or not transition_path(item.from_state, item.state)[:-1]:
            return  # already one step from its committed state: nothing to walk
        flush_audits_txn(conn, run_id, events, now)  # the walk audits directly: in order
        steps = (item.from_state, item.state, item.attempt)
        walk_txn(conn, run_id, item.task_id, steps, now, trace_id)

    writing = tasks.CompletionWriting(events, known, _add_events, before=walk)
    state = tasks.commit_tasks_txn(
        conn,
        run_id,
        batch.items,
        batch.memory,
        now,
        trace_id=trace_id,
        checkpoint=False,
        written=writing,
    )
    if batch.compensated or buffer is None:
        flush_audits_txn(conn, run_id, events, now)
    if checkpoint:
        audit.write_checkpoint_txn(conn, run_id, state, now)
    if batch.compensated:
        compensated_txn(conn, run_id, batch.compensated, now, trace_id)
    return state


def compensated_txn(
    conn: Db,
    compensation_run_id: str,
    pairs: Sequence[CompensatedPair],
    now: str,
    trace_id: str,
) -> None:
    """Append ``compensated`` to each source effect whose inverse effect just confirmed."""
    for pair in pairs:
        evidence: JsonObject = {
            "kind": "compensation_run",
            "runId": compensation_run_id,
            "effectId": pair.inverse_effect_id,
        }
        reconcile.reconcile_effect_txn(
            conn,
            pair.source_effect_id,
            "compensated",
            "agentctl-compensation",
            f"inverse action confirmed in {compensation_run_id}",
            evidence,
            None,
            pair.inverse_effect_id,
            now,
            reconciliation_id=pair.reconciliation_id,
            trace_id=trace_id,
        )
