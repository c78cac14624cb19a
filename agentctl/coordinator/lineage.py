"""Runs derived from another run: recorded replay and fork.

Invariants:
- replay executes nothing: it dispatches no effect, calls no executor, reads no credential;
  it copies a terminal source's task records (disposition ``recorded``) into a new run whose
  tasks still walk legal transitions, after verifying the source's artifact bytes;
- a replay ends in its source's state (a failed source replays as failed);
- fork re-runs the same workflow, plan and inputs from the initial memory with fresh effects;
  it drives the source's stored plan and stores it with the fork (resume never recompiles).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from agentctl.coordinator.clock import Clock
from agentctl.coordinator.creation import owner_identity, stored_plan_text
from agentctl.coordinator.records import transition_path
from agentctl.coordinator.service import RunOutcome
from agentctl.core.plan import Plan
from agentctl.errors import InvalidOperationError
from agentctl.ledger import runs, tasks
from agentctl.ledger.artifacts.refs import ArtifactRef, list_refs
from agentctl.ledger.artifacts.store import open_artifact_store
from agentctl.ledger.connection import Ledger

TERMINAL_RUN = frozenset({"succeeded", "failed", "cancelled"})
IN_FLIGHT = frozenset({"ready", "running", "waiting_for_approval", "waiting_for_effect"})


def replay(ledger: Ledger, source_ref: str, clock: Clock) -> RunOutcome:
    """Create a recorded replay of a terminal run; returns its outcome."""
    with ledger.read() as conn:
        source = runs.find_run(conn, source_ref)
        records = tasks.list_tasks(conn, source.run_id)
        refs = list_refs(conn, run_id=source.run_id)
    _check_replayable(source, records)
    if refs:
        open_artifact_store(ledger).verify(clock.now(), sorted({r.digest for r in refs}))
    run_id, trace_id = clock.new_id("replay"), clock.new_id("trace")
    with ledger.transaction() as conn:
        now = clock.now()
        runs.create_run_txn(
            conn, _derived(source, run_id, trace_id, "replay"), [t.task_id for t in records], now
        )
        _copy_tasks_txn(conn, run_id, records, refs, source, now, trace_id)
        runs.set_run_state_txn(
            conn, run_id, source.state, now, output=source.output, trace_id=trace_id
        )
    errors = {t.task_id: t.error for t in records if t.error}
    return RunOutcome(run_id, trace_id, source.state, source.output, errors)


def _check_replayable(source: Any, records: list[Any]) -> None:
    if source.state not in TERMINAL_RUN:
        raise InvalidOperationError(
            f"run {source.run_id} is {source.state}; only a terminal run can be replayed",
            run_id=source.run_id,
        )
    busy = [t.task_id for t in records if t.state in IN_FLIGHT]
    if busy:
        raise InvalidOperationError(
            f"run {source.run_id} has tasks still in flight ({', '.join(busy[:5])}); "
            "reconcile and resume it before replaying",
            run_id=source.run_id,
        )


def _derived(source: Any, run_id: str, trace_id: str, mode: str) -> runs.NewRun:
    return runs.NewRun(
        run_id=run_id,
        mode=mode,
        workflow_name=source.workflow_name,
        workflow_digest=source.workflow_digest,
        plan_digest=source.plan_digest,
        workflow=source.workflow,
        plan=source.plan,
        inputs=source.inputs,
        working_memory=source.working_memory,
        trace_id=trace_id,
        base_path=source.base_path,
        parent_run_id=source.run_id,
        compiled_plan_json=source.compiled_plan_json,
    )


def _copy_tasks_txn(
    conn: Any,
    run_id: str,
    records: list[Any],
    refs: list[Any],
    source: Any,
    now: str,
    trace_id: str,
) -> None:
    by_task: dict[str, list[ArtifactRef]] = {}
    for ref in refs:
        by_task.setdefault(ref.task_id, []).append(
            ArtifactRef(ref.logical_path, ref.digest, ref.size_bytes, ref.media_type)
        )
    completions = []
    for t in records:
        if t.state == "pending":
            continue
        for step in transition_path("pending", t.state)[:-1]:
            tasks.transition_task_txn(
                conn, run_id, t.task_id, step, now, attempt=t.attempt, trace_id=trace_id
            )
        completions.append(_recorded(t, tuple(by_task.get(t.task_id, ())), source.run_id))
    tasks.commit_tasks_txn(conn, run_id, completions, source.working_memory, now, trace_id=trace_id)


def _recorded(t: Any, artifacts: tuple[ArtifactRef, ...], source_run_id: str) -> Any:
    """The completion that copies one source task record into a replay."""
    return tasks.TaskCompletion(
        task_id=t.task_id,
        state=t.state,
        attempt=t.attempt,
        disposition="recorded",
        output=t.output,
        error=t.error,
        definition_fingerprint=t.definition_fingerprint,
        input_digest=t.input_digest,
        output_contract_fingerprint=t.output_contract_fingerprint,
        output_digest=t.output_digest,
        state_delta=t.state_delta,
        artifacts=artifacts,
        decision=t.decision,
        source_run_id=source_run_id,
        source_task_id=t.task_id,
        source_attempt=t.attempt,
        events=(tasks.AuditSpec(f"task.{t.state}", {"recordedFrom": source_run_id}),),
    )


def new_fork(ledger: Ledger, source: Any, plan: Plan, clock: Clock) -> tuple[str, str]:
    """Create a fork of a run: same workflow, plan and inputs, initial memory, fresh effects."""
    run_id, trace_id = clock.new_id("fork"), clock.new_id("trace")
    new = dataclasses.replace(
        _derived(source, run_id, trace_id, "fork"),
        working_memory=dict(plan.run.working_memory),
        budget_limits=plan.run.budget_limits(),
        compiled_plan_json=stored_plan_text(plan),
    )
    pid, ctime = owner_identity()
    with ledger.transaction() as conn:
        now = clock.now()
        runs.create_run_txn(conn, new, list(plan.order), now)
        runs.acquire_run_lease_txn(conn, run_id, pid, ctime, now)
    return run_id, trace_id
