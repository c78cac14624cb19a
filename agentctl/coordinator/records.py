"""The coordinator's transactions: compositions of ledger ``*_txn`` calls, one per protocol step.

Each function here runs inside one ``BEGIN IMMEDIATE`` transaction opened by ``Store.write``.

Invariants (DESIGN.md §3):
- ``record_requests_txn`` commits the task transition, the ``requested`` effect row and the
  budget reservation together, before anything executes;
- ``start_effects_txn`` commits ``started`` for a whole batch; only then is anything sent;
- ``commit_batch_txn`` commits outputs, memory, audit and one checkpoint in compiled order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agentctl.core.states import can_transition_task
from agentctl.errors import NotFoundError
from agentctl.ledger import approvals, audit, budget, effects, tasks
from agentctl.ledger.artifacts.refs import ArtifactRef


@dataclass(frozen=True)
class Finished:
    """A task's final (or retry) state for this batch, ready to commit."""

    task_id: str
    from_state: str
    state: str
    attempt: int
    output: Any = None
    error: str | None = None
    decision: Any = None
    definition_fingerprint: str | None = None
    input_digest: str | None = None
    output_contract_fingerprint: str | None = None
    state_delta: Any = None
    artifacts: tuple[ArtifactRef, ...] = ()
    lease_ids: tuple[str, ...] = ()


def transition_path(current: str, target: str) -> list[str]:
    """The legal states to walk from ``current`` to ``target`` (target last)."""
    path: list[str] = []
    state = current
    for _ in range(4):
        if can_transition_task(state, target):
            return [*path, target]
        nxt = "ready" if state in ("pending", "retry_scheduled") else "running"
        if not can_transition_task(state, nxt):
            break
        path.append(nxt)
        state = nxt
    raise ValueError(f"no legal path from task state {current} to {target}")


def _walk_txn(
    conn: Any,
    run_id: str,
    task_id: str,
    current: str,
    target: str,
    attempt: int,
    now: str,
    trace_id: str,
) -> None:
    # Intermediate steps are audited; the caller's transaction ends with one checkpoint.
    for step in transition_path(current, target)[:-1]:
        tasks.transition_task_txn(
            conn, run_id, task_id, step, now, attempt=attempt, trace_id=trace_id, checkpoint=False
        )


@dataclass(frozen=True)
class RequestRow:
    task_id: str
    from_state: str
    attempt: int
    effect: effects.NewEffect
    budget: Mapping[str, int]
    approval_reason: str | None = None  # set when policy requires an approval first


def record_requests_txn(
    conn: Any, run_id: str, rows: Sequence[RequestRow], now: str, trace_id: str
) -> list[str]:
    """Tasks → running, effects → requested, budgets reserved; returns the denied task ids."""
    denied: list[str] = []
    for row in rows:
        current = row.from_state
        if current in ("running", "waiting_for_effect"):
            # A fresh attempt after a not-applied/compensated reconciliation.
            tasks.transition_task_txn(
                conn, run_id, row.task_id, "retry_scheduled", now, trace_id=trace_id,
                checkpoint=False,
            )  # fmt: skip
            current = "retry_scheduled"
        _walk_txn(conn, run_id, row.task_id, current, "running", row.attempt, now, trace_id)
        tasks.transition_task_txn(
            conn, run_id, row.task_id, "running", now, attempt=row.attempt, trace_id=trace_id,
            checkpoint=False,
        )  # fmt: skip
        if row.budget:
            outcome = budget.reserve_budget_txn(
                conn, run_id, row.effect.effect_id, row.budget, now, trace_id=trace_id
            )
            if not outcome.granted:  # the overrun is recorded; no effect row is
                denied.append(row.task_id)
                continue
        effects.insert_effect_txn(conn, row.effect, now)
        if row.approval_reason is not None:
            _pause_for_approval_txn(conn, run_id, row, now, trace_id)
        else:
            # DESIGN.md §8 fast path: the request still commits before anything executes,
            # but `requested` and `started` share this one transaction.
            effects.start_effect_txn(conn, row.effect.effect_id, now)
    _checkpoint_txn(conn, run_id, "effects.requested", [r.task_id for r in rows], now)
    return denied


def _checkpoint_txn(conn: Any, run_id: str, event: str, task_ids: Sequence[str], now: str) -> None:
    state = {"runId": run_id, "event": event, "tasks": [{"taskId": t} for t in task_ids]}
    audit.write_checkpoint_txn(conn, run_id, state, now)


def _pause_for_approval_txn(
    conn: Any, run_id: str, row: RequestRow, now: str, trace_id: str
) -> None:
    """The pause transaction: task and effect wait, an approval row is pending."""
    tasks.transition_task_txn(
        conn, run_id, row.task_id, "waiting_for_approval", now, attempt=row.attempt,
        trace_id=trace_id, checkpoint=False,
    )  # fmt: skip
    approvals.insert_approval_txn(
        conn,
        approvals.NewApproval(
            run_id=run_id,
            task_id=row.task_id,
            effect_id=row.effect.effect_id,
            reason=row.approval_reason or "approval required",
            capability=row.effect.operation,
            risk=row.effect.risk,
            redacted_input=row.effect.request,
            expected_effect=row.effect.effect_class,
            trace_id=trace_id,
        ),
        now,
    )


def start_tasks_txn(
    conn: Any, run_id: str, rows: Sequence[tuple[str, str, int]], now: str, trace_id: str
) -> None:
    """Move tasks that record their own effects as they go (agents) to running."""
    for task_id, current, attempt in rows:
        if current in ("running", "waiting_for_effect"):
            tasks.transition_task_txn(conn, run_id, task_id, "retry_scheduled", now,
                                      trace_id=trace_id)  # fmt: skip
            current = "retry_scheduled"
        _walk_txn(conn, run_id, task_id, current, "running", attempt, now, trace_id)
        tasks.transition_task_txn(conn, run_id, task_id, "running", now, attempt=attempt,
                                  trace_id=trace_id)  # fmt: skip


def start_effects_txn(
    conn: Any,
    run_id: str,
    effect_ids: Sequence[str],
    approved_tasks: Sequence[str],
    now: str,
    trace_id: str,
) -> None:
    """Commit ``started`` for a batch; approved tasks move back to running first."""
    for task_id in approved_tasks:
        tasks.transition_task_txn(conn, run_id, task_id, "running", now, trace_id=trace_id)
    for effect_id in effect_ids:
        effects.start_effect_txn(conn, effect_id, now)


def finish_effect_txn(
    conn: Any,
    run_id: str,
    effect_id: str,
    status: str,
    now: str,
    result: Any,
    error: str | None,
    spent: Mapping[str, int] | None,
    trace_id: str,
    long_term_put: tuple[str, str, Any] | None = None,
) -> None:
    """An effect's outcome; a long-term memory write lands in the same transaction."""
    effects.finish_effect_txn(conn, effect_id, status, now, result=result, error=error)
    if long_term_put is not None:
        namespace, key, value = long_term_put
        approvals.memory_put_txn(conn, namespace, key, value, now)
    if spent is not None:
        budget.settle_budget_txn(conn, run_id, effect_id, spent, now, trace_id=trace_id)


def _events(item: Finished) -> tuple[tasks.AuditSpec, ...]:
    """Audit a task's state change; a condition or route decision is audited with it."""
    final = tasks.AuditSpec(f"task.{item.state}", {"attempt": item.attempt, "error": item.error})
    if isinstance(item.decision, Mapping) and "expression" in item.decision:
        return (tasks.AuditSpec("task.condition_evaluated", dict(item.decision)), final)
    return (final,)


def long_term_get(conn: Any, namespace: str, key: str, now: str) -> tuple[bool, Any]:
    """(found, value) of a long-term memory entry (expired entries are absent)."""
    try:
        return True, approvals.memory_get(conn, namespace, key, now)
    except NotFoundError:
        return False, None


def finish_many_txn(conn: Any, finishes: Sequence[tuple[Any, ...]]) -> None:
    """Several effect outcomes in one transaction (group commit of one batch's results)."""
    for args in finishes:
        finish_effect_txn(conn, *args)


def commit_batch_txn(
    conn: Any,
    run_id: str,
    items: Sequence[Finished],
    memory: Any,
    now: str,
    trace_id: str,
    compensated: Sequence[tuple[str, str]] = (),
    finishes: Sequence[tuple[Any, ...]] = (),
) -> None:
    """Walk each task to its committed state and commit the batch in compiled order.

    ``finishes`` are effect outcomes not yet committed (a batch of one effect commits its
    outcome with its completion: one transaction instead of two).
    """
    finish_many_txn(conn, finishes)
    completions = []
    for item in items:
        _walk_txn(
            conn, run_id, item.task_id, item.from_state, item.state, item.attempt, now, trace_id
        )
        completions.append(
            tasks.TaskCompletion(
                task_id=item.task_id,
                state=item.state,
                attempt=item.attempt,
                output=item.output,
                error=item.error,
                decision=item.decision,
                definition_fingerprint=item.definition_fingerprint,
                input_digest=item.input_digest,
                output_contract_fingerprint=item.output_contract_fingerprint,
                state_delta=item.state_delta,
                events=_events(item),
                artifacts=item.artifacts,
                ingest_lease_ids=item.lease_ids,
            )
        )
    tasks.commit_tasks_txn(conn, run_id, completions, memory, now, trace_id=trace_id)
    if compensated:
        # Late import: recovery builds on this module.
        from agentctl.coordinator.recovery import compensated_reconciliations_txn

        compensated_reconciliations_txn(conn, run_id, compensated, now, trace_id)
