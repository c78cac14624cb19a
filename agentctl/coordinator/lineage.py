"""Runs derived from another run: recorded replay and fork.

Invariants:
- replay executes nothing: it dispatches no effect, calls no executor, reads no credential;
  it copies a terminal source's task records (disposition ``recorded``) into a new run whose
  tasks still walk legal transitions, after verifying the source's artifact bytes, and its
  stream events, each linked to its source row;
- a replay ends in its source's state (a failed source replays as failed);
- fork re-runs the same workflow, plan and inputs from the initial memory with fresh effects;
  it drives the source's stored plan and stores it with the fork (resume never recompiles).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from agentctl.coordinator.clock import Clock
from agentctl.coordinator.creation import owner_identity, stored_plan
from agentctl.coordinator.launch import naming_run
from agentctl.coordinator.service import RunOutcome
from agentctl.core.plan import Plan
from agentctl.errors import InvalidOperationError
from agentctl.ledger.artifacts.refs import ArtifactRef, ArtifactRefRecord
from agentctl.ledger.interface import RunLedger
from agentctl.ledger.model import DerivedRun
from agentctl.ledger.runs import NewRun, RunRecord
from agentctl.ledger.tasks import AuditSpec, TaskCompletion, TaskRecord

TERMINAL_RUN = frozenset({"succeeded", "failed", "cancelled"})
IN_FLIGHT = frozenset({"ready", "running", "waiting_for_approval", "waiting_for_effect"})


def replay(ledger: RunLedger, source_ref: str, clock: Clock) -> RunOutcome:
    """Create a recorded replay of a terminal run; returns its outcome."""
    snap = ledger.load_source(source_ref)
    source, records, refs = snap.run, snap.tasks, snap.artifacts
    # Every invocation has its own trace (spec/cli.md §1): a refusal names it too, as resume's
    # do, so a script can correlate the attempt it made; a replay run created carries it.
    trace_id = clock.new_id("trace")
    with naming_run(source.run_id, trace_id):
        _check_replayable(source, records)
        if refs:
            ledger.verify_artifacts(clock.now(), sorted({r.digest for r in refs}))
    run_id = clock.new_id("replay")
    derived = DerivedRun(
        run=_derived(source, run_id, trace_id, "replay"),
        task_order=tuple(t.task_id for t in records),
        completions=_recorded(records, refs, source.run_id),
        working_memory=source.working_memory,
        now=clock.now(),
        walk=True,
        final_state=source.state,
        final_output=source.output,
        stream_source=source.run_id,
    )
    ledger.create_derived_run(derived)
    errors = {t.task_id: t.error for t in records if t.error}
    return RunOutcome(run_id, trace_id, source.state, source.output, errors)


def _check_replayable(source: RunRecord, records: Sequence[TaskRecord]) -> None:
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


def _derived(source: RunRecord, run_id: str, trace_id: str, mode: str) -> NewRun:
    return NewRun(
        run_id=run_id,
        mode=mode,
        workflow_name=source.workflow_name,
        workflow_digest=source.workflow_digest,
        plan_digest=source.plan_digest,
        workflow=source.workflow,
        plan=source.stored_plan,  # derived again on read when empty
        inputs=source.inputs,
        working_memory=source.working_memory,
        trace_id=trace_id,
        base_path=source.base_path,
        parent_run_id=source.run_id,
        compiled_plan_json=source.compiled_plan_json,
    )


def _recorded(
    records: Sequence[TaskRecord], refs: Sequence[ArtifactRefRecord], source_run_id: str
) -> tuple[TaskCompletion, ...]:
    """The source's non-pending tasks as ``recorded`` completions (pending ones stay)."""
    by_task: dict[str, list[ArtifactRef]] = {}
    for ref in refs:
        by_task.setdefault(ref.task_id, []).append(
            ArtifactRef(ref.logical_path, ref.digest, ref.size_bytes, ref.media_type)
        )
    return tuple(
        TaskCompletion(
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
            artifacts=tuple(by_task.get(t.task_id, ())),
            decision=t.decision,
            source_run_id=source_run_id,
            source_task_id=t.task_id,
            source_attempt=t.attempt,
            events=(AuditSpec(f"task.{t.state}", {"recordedFrom": source_run_id}),),
        )
        for t in records
        if t.state != "pending"
    )


def new_fork(
    ledger: RunLedger, source: RunRecord, plan: Plan, clock: Clock, ids: tuple[str, str]
) -> None:
    """Create a fork of a run: same workflow, plan and inputs, initial memory, fresh effects;
    ``ids``: its ``fork-`` run id and trace id, minted by the caller before this write."""
    run_id, trace_id = ids
    new = dataclasses.replace(
        _derived(source, run_id, trace_id, "fork"),
        working_memory=dict(plan.run.working_memory),
        budget_limits=plan.run.budget_limits(),
        compiled_plan_json=stored_plan(plan),
    )
    record_fork(ledger, new, plan.order, clock.now())


def record_fork(ledger: RunLedger, new: NewRun, order: Sequence[str], now: str) -> None:
    """Store the fork under this process's lease, in one write."""
    ledger.create_run(new, order, owner_identity(), now)
