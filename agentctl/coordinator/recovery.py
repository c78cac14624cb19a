"""Executing recovery plans: retry and repair runs, and compensation runs.

Planning is effect-free and lives in ``agentctl.core.recovery``; this module reads the source
run from the ledger into the planner's ``SourceRun``, and turns a compatible plan into a new
source-linked run.

Invariants:
- a blocked plan creates nothing;
- the new run, its reused tasks (succeeded, disposition ``reused``, attempt 0, provenance,
  artifact references), its rebuilt working memory and its audit are one transaction, so a
  derived run never exists half-materialised;
- reused tasks are copied into the new run's own rows: deleting the source run's workspace
  or rows later does not break the new run;
- reused boundaries reserve no budget and dispatch nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agentctl.coordinator.clock import Clock
from agentctl.coordinator.creation import owner_identity, stored_plan_text
from agentctl.core import recovery as rc
from agentctl.core.plan import Plan
from agentctl.ledger import audit, effects, reconcile, runs, tasks
from agentctl.ledger.artifacts.refs import ArtifactRef, list_refs
from agentctl.ledger.artifacts.store import blob_problem, open_artifact_store
from agentctl.ledger.connection import Ledger


def load_source(ledger: Ledger, run_ref: str) -> tuple[Any, rc.SourceRun]:
    """The source run record and its planner view."""
    with ledger.read() as conn:
        run = runs.find_run(conn, run_ref)
        records = tasks.list_tasks(conn, run.run_id)
        found = effects.list_effects(conn, run.run_id)
        recs = reconcile.list_reconciliations(conn, run_id=run.run_id)
        refs = list_refs(conn, run_id=run.run_id)
    latest = {r.effect_id: r.status for r in recs}
    needs = {t["id"]: tuple(t.get("needs") or ()) for t in (run.plan or {}).get("tasks", [])}
    by_task: dict[str, list[rc.SourceEffect]] = {}
    for e in found:
        by_task.setdefault(e.task_id, []).append(
            rc.SourceEffect(
                effect_id=e.effect_id,
                task_id=e.task_id,
                attempt=e.attempt,
                operation=e.operation,
                effect_class=e.effect_class,
                idempotency=e.idempotency,
                status=e.status,
                confirmed=e.confirmed,
                reconciliation=latest.get(e.effect_id),
            )
        )
    arts: dict[str, list[dict[str, Any]]] = {}
    for ref in refs:
        arts.setdefault(ref.task_id, []).append(
            {"path": ref.logical_path, "digest": ref.digest, "sizeBytes": ref.size_bytes}
        )
    source_tasks = {t.task_id: _source_task(t, by_task, arts, needs) for t in records}
    view = rc.SourceRun(
        run_id=run.run_id,
        mode=run.mode,
        state=run.state,
        workflow_name=run.workflow_name,
        workflow_digest=run.workflow_digest,
        tasks=source_tasks,
    )
    return run, view


def _source_task(
    t: Any,
    by_task: Mapping[str, list[rc.SourceEffect]],
    arts: Mapping[str, list[dict[str, Any]]],
    needs: Mapping[str, tuple[str, ...]],
) -> rc.SourceTask:
    return rc.SourceTask(
        task_id=t.task_id,
        state=t.state,
        attempt=t.attempt,
        disposition=t.disposition,
        output=t.output,
        definition_fingerprint=t.definition_fingerprint,
        input_digest=t.input_digest,
        output_contract_fingerprint=t.output_contract_fingerprint,
        output_digest=t.output_digest,
        state_delta=t.state_delta,
        artifacts=tuple(arts.get(t.task_id, ())),
        effects=tuple(by_task.get(t.task_id, ())),
        needs=needs.get(t.task_id, ()),
    )


def artifact_checker(ledger: Ledger) -> Any:
    """``artifact_ok(digest, size)``: the blob's bytes exist and hash to their digest."""
    store = open_artifact_store(ledger)

    def ok(digest: str, size: int) -> bool:
        return blob_problem(store.blob_path(digest), digest, size) is None

    return ok


def create_derived_run(
    ledger: Ledger,
    *,
    source_run: Any,
    source: rc.SourceRun,
    recovery: rc.RecoveryPlan,
    target: Plan,
    document: Mapping[str, Any],
    plan_json: Any,
    inputs: Mapping[str, Any],
    workspace: str,
    reason: str | None,
    clock: Clock,
) -> tuple[str, str]:
    """One transaction: the run, its reused tasks, rebuilt memory, audit and lease."""
    mode = recovery.kind
    run_id, trace_id = clock.new_id(mode), clock.new_id("trace")
    reused = {tid: source.tasks[tid] for tid in recovery.reuse}
    memory = rc.rebuild_memory(dict(target.run.working_memory), target, reused)
    new = runs.NewRun(
        run_id=run_id,
        mode=mode,
        workflow_name=target.name,
        workflow_digest=target.workflow_digest,
        plan_digest=target.plan_digest,
        workflow=document,
        plan=plan_json,
        inputs=dict(inputs),
        working_memory=memory,
        trace_id=trace_id,
        base_path=workspace,
        parent_run_id=source.run_id,
        source_run_id=source.run_id,
        roots=list(recovery.roots),
        reason=reason,
        budget_limits=target.run.budget_limits(),
        compiled_plan_json=stored_plan_text(target),
    )
    _create_derived(ledger, new, target, source, recovery, reused, clock)
    return run_id, trace_id


def _create_derived(
    ledger: Ledger,
    new: runs.NewRun,
    target: Plan,
    source: rc.SourceRun,
    recovery: rc.RecoveryPlan,
    reused: Mapping[str, rc.SourceTask],
    clock: Clock,
) -> None:
    """The derived run's one transaction: run, reused tasks, memory, audit and lease."""
    pid, ctime = owner_identity()
    mode, run_id, trace_id = new.mode, new.run_id, new.trace_id
    payload = {
        "sourceRunId": source.run_id,
        "roots": list(recovery.roots),
        "reason": new.reason,
        "reused": list(recovery.reuse),
        "execute": list(recovery.execute),
    }
    with ledger.transaction() as conn:
        now = clock.now()
        runs.create_run_txn(conn, new, list(target.order), now)
        refs = _source_refs(conn, source.run_id)
        done = [_reuse_completion(reused[tid], refs, source.run_id, mode) for tid in recovery.reuse]
        tasks.commit_tasks_txn(conn, run_id, done, new.working_memory, now, trace_id=trace_id)
        audit.append_audit_txn(conn, run_id, f"{mode}.created", payload, now, trace_id=trace_id)
        runs.acquire_run_lease_txn(conn, run_id, pid, ctime, now)


def _source_refs(conn: Any, run_id: str) -> dict[str, list[ArtifactRef]]:
    out: dict[str, list[ArtifactRef]] = {}
    for ref in list_refs(conn, run_id=run_id):
        out.setdefault(ref.task_id, []).append(
            ArtifactRef(ref.logical_path, ref.digest, ref.size_bytes, ref.media_type)
        )
    return out


def _reuse_completion(
    t: rc.SourceTask, refs: Mapping[str, list[ArtifactRef]], source_run_id: str, mode: str
) -> tasks.TaskCompletion:
    return tasks.TaskCompletion(
        task_id=t.task_id,
        state="succeeded",
        attempt=0,
        disposition="reused",
        output=t.output,
        definition_fingerprint=t.definition_fingerprint,
        input_digest=t.input_digest,
        output_contract_fingerprint=t.output_contract_fingerprint,
        output_digest=t.output_digest,
        state_delta=t.state_delta,
        artifacts=tuple(refs.get(t.task_id, ())),
        source_run_id=source_run_id,
        source_task_id=t.task_id,
        source_attempt=t.attempt,
        events=(
            tasks.AuditSpec(
                f"{mode}.task_reused", {"sourceRunId": source_run_id, "sourceAttempt": t.attempt}
            ),
        ),
    )


def compensated_reconciliations_txn(
    conn: Any,
    compensation_run_id: str,
    pairs: Sequence[tuple[str, str]],
    now: str,
    trace_id: str,
) -> None:
    """Append ``compensated`` to each source effect whose inverse effect just confirmed."""
    for source_effect, inverse_effect in pairs:
        reconcile.reconcile_effect_txn(
            conn,
            source_effect,
            "compensated",
            "agentctl-compensation",
            f"inverse action confirmed in {compensation_run_id}",
            {"kind": "compensation_run", "runId": compensation_run_id, "effectId": inverse_effect},
            None,
            inverse_effect,
            now,
            trace_id=trace_id,
        )
