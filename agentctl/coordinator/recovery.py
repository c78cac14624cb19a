"""Executing recovery plans: retry and repair runs, and compensation runs.

Planning is effect-free and lives in ``agentctl.core.recovery``; this module reads the source
run through the ledger interface into the planner's ``SourceRun``, and turns a compatible plan
into a new source-linked run.

Invariants:
- a blocked plan creates nothing;
- the new run, its reused tasks (succeeded, disposition ``reused``, attempt 0, provenance,
  artifact references), its rebuilt working memory and its audit are one transaction
  (``RunLedger.create_derived_run``), so a derived run never exists half-materialised;
- reused tasks are copied into the new run's own rows: deleting the source run's workspace
  or rows later does not break the new run;
- reused boundaries reserve no budget and dispatch nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from agentctl.coordinator.clock import Clock
from agentctl.coordinator.creation import load_plan, owner_identity, stored_plan
from agentctl.coordinator.local import recorded_delta
from agentctl.core import recovery as rc
from agentctl.core.jsonvalue import JsonObject, JsonValue, as_object
from agentctl.core.plan import Plan, PlannedTask
from agentctl.core.states import RunState, TaskState
from agentctl.errors import AgentctlError, NotFoundError
from agentctl.ledger.artifacts.refs import ArtifactRef, ArtifactRefRecord
from agentctl.ledger.interface import RunLedger
from agentctl.ledger.model import DerivedRun, SourceSnapshot
from agentctl.ledger.runs import NewRun, RunRecord
from agentctl.ledger.tasks import AuditSpec, TaskCompletion, TaskRecord


def load_source(ledger: RunLedger, run_ref: str) -> tuple[RunRecord, rc.SourceRun]:
    """The source run record and its planner view. A task an applied reconciliation completed
    after the run ended is seen as the succeeded boundary it makes (``rc.settle_applied``)."""
    snap = ledger.load_source(run_ref)
    run = snap.run
    arts: dict[str, list[JsonObject]] = {}
    for ref in snap.artifacts:
        arts.setdefault(ref.task_id, []).append(
            {"path": ref.logical_path, "digest": ref.digest, "sizeBytes": ref.size_bytes}
        )
    lineage = _Lineage(ledger, {run.run_id: snap})
    planned = _planned_tasks(run.plan)
    context = _SourceContext(
        _effects_by_task(snap), arts, _needs(planned), _task_vars(planned), lineage
    )
    plan = _source_plan(run)
    source_tasks = {
        t.task_id: rc.settle_applied(context.task(t), _planned_task(plan, t.task_id))
        for t in snap.tasks
    }
    view = rc.SourceRun(
        run_id=run.run_id,
        mode=run.mode,
        state=run.state,
        workflow_name=run.workflow_name,
        workflow_digest=run.workflow_digest,
        tasks=source_tasks,
        parked=_parked(snap),
        inputs=run.inputs or {},
        # The working memory the run started from (None when its plan cannot be loaded: the
        # input rule of retry and repair then has nothing to compare).
        initial_memory=None if plan is None else dict(plan.run.working_memory),
        open_inverses=tuple(
            rc.OpenInverse(t.run_id, t.task_id, t.state, t.effect_id, t.effect_status)
            for t in snap.open_compensations
        ),
    )
    return run, view


def _source_plan(run: RunRecord) -> Plan | None:
    """The source run's own compiled plan, None when it cannot be loaded."""
    try:
        return load_plan(run)
    except AgentctlError:
        return None


def _planned_task(plan: Plan | None, task_id: str) -> PlannedTask | None:
    return plan.task(task_id) if plan is not None and task_id in plan.index else None


def _parked(snap: SourceSnapshot) -> bool:
    """A running run no live coordinator drives, with a task waiting on an uncertain effect:
    what the driver leaves behind when it settles a run as blocked (exit 4)."""
    waiting = any(t.state == TaskState.WAITING_FOR_EFFECT for t in snap.tasks)
    return snap.run.state == RunState.RUNNING and not snap.driven and waiting


def _planned_tasks(plan: JsonValue) -> list[JsonObject]:
    """The task entries of a source plan's printed form.

    ``tasks`` is keyed by task id in runs created since issue 14, a list before: both are read.
    """
    tasks = as_object(plan).get("tasks")
    entries = list(tasks.values()) if isinstance(tasks, dict) else tasks
    return [as_object(entry) for entry in entries] if isinstance(entries, list) else []


def _needs(planned: list[JsonObject]) -> dict[str, tuple[str, ...]]:
    """Each task's needs in the source plan."""
    found: dict[str, tuple[str, ...]] = {}
    for task in planned:
        needs = task.get("needs")
        found[str(task["id"])] = tuple(str(n) for n in needs) if isinstance(needs, list) else ()
    return found


def _task_vars(planned: list[JsonObject]) -> dict[str, JsonObject]:
    """Each task's variables as the source run was compiled with them (every layer merged,
    the command line's too); a task whose plan entry has none is left out."""
    found: dict[str, JsonObject] = {}
    for task in planned:
        value = task.get("vars")
        if isinstance(value, dict):
            found[str(task["id"])] = value
    return found


def _effects_by_task(snap: SourceSnapshot) -> dict[str, list[rc.SourceEffect]]:
    """A run's effects as the planner sees them, by task, each with its latest reconciliation
    (an applied one with its recorded result and the memory delta resume commits with it)."""
    latest = {r.effect_id: r for r in snap.reconciliations}  # oldest first: the last wins
    by_task: dict[str, list[rc.SourceEffect]] = {}
    for e in snap.effects:
        found = latest.get(e.effect_id)
        applied = None
        if found is not None and found.status == "applied" and found.result is not None:
            applied = rc.AppliedResult(found.result, recorded_delta(e.operation, e.request))
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
                reconciliation=None if found is None else found.status,
                applied=applied,
            )
        )
    return by_task


@dataclass(frozen=True)
class _Inherited:
    """A reused task's effects in the run that executed it, and the attempt that ended it
    there (None for a task its own run executed)."""

    effects: tuple[rc.SourceEffect, ...]
    attempt: int | None


@dataclass(frozen=True)
class _Lineage:
    """The runs a source's reused tasks came from, each read once (``inherited``)."""

    ledger: RunLedger
    snaps: dict[str, SourceSnapshot]

    def inherited(self, task: TaskRecord) -> _Inherited | None:
        """The effects of the run that executed ``task`` (a reused task: its provenance is
        followed back through every retry or repair that reused it again; reconciliations as
        they are now) and the attempt that ended it there; no effects for a task its own run
        executed; None when a run on the way is gone. Provenance always names an older run,
        so the walk ends."""
        while task.disposition == "reused":
            run_id, name = task.source_run_id, task.source_task_id or task.task_id
            snap = None if run_id is None else self._snapshot(run_id)
            found = [t for t in snap.tasks if t.task_id == name] if snap is not None else []
            if snap is None or not found:
                return None
            if found[0].disposition != "reused":
                return _Inherited(tuple(_effects_by_task(snap).get(name, ())), found[0].attempt)
            task = found[0]
        return _Inherited((), None)

    def _snapshot(self, run_id: str) -> SourceSnapshot | None:
        if run_id not in self.snaps:
            try:
                self.snaps[run_id] = self.ledger.load_source(run_id)
            except NotFoundError:
                return None
        return self.snaps[run_id]


@dataclass(frozen=True)
class _SourceContext:
    """A source run's effects, artifacts and needs by task, read once for its recovery records."""

    by_task: Mapping[str, list[rc.SourceEffect]]
    arts: Mapping[str, list[JsonObject]]
    needs: Mapping[str, tuple[str, ...]]
    vars: Mapping[str, JsonObject]
    lineage: _Lineage

    def task(self, t: TaskRecord) -> rc.SourceTask:
        found = self.lineage.inherited(t)
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
            artifacts=tuple(self.arts.get(t.task_id, ())),
            effects=tuple(self.by_task.get(t.task_id, ())),
            needs=self.needs.get(t.task_id, ()),
            vars=self.vars.get(t.task_id),
            inherited_effects=None if found is None else found.effects,
            inherited_attempt=None if found is None else found.attempt,
        )


def artifact_checker(ledger: RunLedger) -> Callable[[str, int], bool]:
    """``artifact_ok(digest, size)``: the blob's bytes exist and hash to their digest."""
    ledger.open_artifacts()
    return ledger.blob_intact


@dataclass(frozen=True)
class DerivedTarget:
    """The run a retry or repair creates: its plan, document, inputs and workspace."""

    plan: Plan
    document: Mapping[str, JsonValue]
    plan_json: JsonObject
    inputs: Mapping[str, JsonValue]
    workspace: str
    reason: str | None


def create_derived_run(
    ledger: RunLedger,
    source: rc.SourceRun,
    recovery: rc.RecoveryPlan,
    target: DerivedTarget,
    clock: Clock,
    ids: tuple[str, str],
) -> None:
    """One transaction: the run, its reused tasks, rebuilt memory, audit and lease; ``ids``:
    its run and trace ids, minted by the caller (``new_run_ids``) before this write."""
    mode = recovery.kind
    run_id, trace_id = ids
    reused = {tid: source.tasks[tid] for tid in recovery.reuse}
    memory = rc.rebuild_memory(dict(target.plan.run.working_memory), target.plan, reused)
    new = NewRun(
        run_id=run_id,
        mode=mode,
        workflow_name=target.plan.name,
        workflow_digest=target.plan.workflow_digest,
        plan_digest=target.plan.plan_digest,
        workflow=dict(target.document),
        plan=target.plan_json,
        inputs=dict(target.inputs),
        working_memory=memory,
        trace_id=trace_id,
        base_path=target.workspace,
        parent_run_id=source.run_id,
        source_run_id=source.run_id,
        roots=list(recovery.roots),
        reason=target.reason,
        budget_limits=target.plan.run.budget_limits(),
        compiled_plan_json=stored_plan(target.plan),
    )
    ledger.create_derived_run(_derived(ledger, new, source, recovery, target.plan, clock))


def _derived(
    ledger: RunLedger,
    new: NewRun,
    source: rc.SourceRun,
    recovery: rc.RecoveryPlan,
    target: Plan,
    clock: Clock,
) -> DerivedRun:
    """The reused tasks as completions (with the source's artifact references) and the
    ``<mode>.created`` audit event."""
    mode = recovery.kind
    refs = _refs_by_task(ledger.list_artifacts(source.run_id).references)
    done = tuple(
        _reuse_completion(source.tasks[tid], refs, source.run_id, mode) for tid in recovery.reuse
    )
    payload: JsonObject = {
        "sourceRunId": source.run_id,
        "roots": list[JsonValue](recovery.roots),
        "reason": new.reason,
        "reused": list[JsonValue](recovery.reuse),
        "execute": list[JsonValue](recovery.execute),
    }
    return DerivedRun(
        run=new,
        task_order=tuple(target.order),
        completions=done,
        working_memory=new.working_memory,
        now=clock.now(),
        events=(AuditSpec(f"{mode}.created", payload),),
        owner=owner_identity(),
    )


def _refs_by_task(records: tuple[ArtifactRefRecord, ...]) -> dict[str, list[ArtifactRef]]:
    out: dict[str, list[ArtifactRef]] = {}
    for ref in records:
        out.setdefault(ref.task_id, []).append(
            ArtifactRef(ref.logical_path, ref.digest, ref.size_bytes, ref.media_type)
        )
    return out


def _reuse_completion(
    t: rc.SourceTask, refs: Mapping[str, list[ArtifactRef]], source_run_id: str, mode: str
) -> TaskCompletion:
    provenance: JsonObject = {"sourceRunId": source_run_id, "sourceAttempt": t.attempt}
    if t.settled_by is not None:  # its output is that effect's applied reconciliation result
        provenance["settledByEffect"] = t.settled_by
    return TaskCompletion(
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
        events=(AuditSpec(f"{mode}.task_reused", provenance),),
    )
