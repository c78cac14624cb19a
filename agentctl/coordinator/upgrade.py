"""``runs analyze`` and ``runs upgrade``: which reuse metadata a legacy run can be proven to have.

Selective reuse (``retry``, ``repair``) checks a source task's definition fingerprint, output
digest and output-contract fingerprint. Runs recorded before those fields existed have NULLs,
so every task is refused. Nothing is invented: a field is *derived* only from records that
prove it —

- ``definitionFingerprint`` and ``outputContractFingerprint``: from the run's plan, when the
  stored workflow compiles to exactly the recorded plan digest (or the compiled plan is
  stored); otherwise they are *unavailable*;
- ``outputDigest``: the canonical digest of the stored output itself.

Invariants: ``analyze`` and ``upgrade --dry-run`` write nothing; ``upgrade`` writes only what
``analyze`` reports as derived, through ``RunLedger.upgrade_run`` (one transaction, NULL fields
only). ``recommendedRepairRoots`` are the unavailable succeeded tasks with no unavailable task
among their transitive needs: repairing from them re-executes every unprovable task.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from agentctl.coordinator.clock import Clock
from agentctl.coordinator.creation import load_plan, stored_plan_text
from agentctl.coordinator.staging import contract_fingerprint
from agentctl.core.canonical import json_digest
from agentctl.core.jsonvalue import JsonObject, JsonValue
from agentctl.core.plan import Plan, PlannedTask
from agentctl.errors import AgentctlError
from agentctl.ledger import open_ledger
from agentctl.ledger.interface import RunLedger
from agentctl.ledger.runs import RunRecord
from agentctl.ledger.tasks import TaskRecord
from agentctl.ledger.upgrade import RunUpgrade, TaskUpgrade


def _proven_plan(run: RunRecord) -> Plan | None:
    """The run's plan when the records prove it: stored, or recompiled to the same digest."""
    try:
        plan = load_plan(run)
    except AgentctlError:
        return None
    return plan if plan.plan_digest == run.plan_digest else None


@dataclass(frozen=True)
class _Field:
    """One recorded field of a succeeded task: recorded, derivable or unavailable, and from what."""

    status: str  # recorded | derived | unavailable
    value: str | None
    provenance: str | None = None

    def to_json(self) -> JsonObject:
        # `provenance` is null for a recorded field rather than absent: one shape to read.
        return {"status": self.status, "value": self.value, "provenance": self.provenance}

    @property
    def derived(self) -> str | None:
        return self.value if self.status == "derived" else None


def _field(recorded: str | None, derived: str | None, how: str) -> _Field:
    if recorded is not None:
        return _Field("recorded", recorded)
    if derived is not None:
        return _Field("derived", derived, how)
    return _Field("unavailable", None, how)


def _task_fields(record: TaskRecord, task: PlannedTask | None) -> dict[str, _Field]:
    planned = "compiled from the stored workflow, whose plan digest matches the run's"
    if task is None:
        planned = "the stored workflow no longer compiles to the run's plan digest"
    output = None if record.output is None else json_digest(record.output)
    return {
        "definitionFingerprint": _field(
            record.definition_fingerprint, task.definition_fingerprint if task else None, planned
        ),
        "outputDigest": _field(record.output_digest, output, "digest of the stored output"),
        "outputContractFingerprint": _field(
            record.output_contract_fingerprint,
            contract_fingerprint(task) if task else None,
            planned,
        ),
    }


@dataclass(frozen=True)
class _Analysis:
    """What an upgrade of an old run would fill in, task by task, and what it cannot."""

    run: RunRecord
    plan: Plan | None
    fields: dict[str, dict[str, _Field]]  # succeeded task id -> field name -> finding
    upgradeable: list[str]
    unavailable: dict[str, list[str]]

    def to_json(self) -> JsonObject:
        tasks: list[JsonValue] = [
            {"taskId": t, "fields": {n: f.to_json() for n, f in found.items()}}
            for t, found in self.fields.items()
        ]
        return {
            "runId": self.run.run_id,
            "workflow": self.run.workflow_name,
            "planDigest": self.run.plan_digest,
            "planProven": self.plan is not None,
            "storedPlan": self.run.compiled_plan_json is not None,
            "tasks": tasks,
            "upgradeableTasks": list[JsonValue](self.upgradeable),
            "unavailableTasks": [
                {"taskId": t, "fields": list[JsonValue](f)} for t, f in self.unavailable.items()
            ],
            "recommendedRepairRoots": _roots(list(self.unavailable), self.plan),
        }


def _analysis(run: RunRecord, records: list[TaskRecord], plan: Plan | None) -> _Analysis:
    found = _Analysis(run, plan, {}, [], {})
    for record in (r for r in records if r.state == "succeeded"):
        task = plan.task(record.task_id) if plan and record.task_id in plan.index else None
        fields = _task_fields(record, task)
        missing = [name for name, f in fields.items() if f.status == "unavailable"]
        if missing:
            found.unavailable[record.task_id] = missing
        elif any(f.status == "derived" for f in fields.values()):
            found.upgradeable.append(record.task_id)
        found.fields[record.task_id] = fields
    return found


def _roots(unavailable: list[str], plan: Plan | None) -> list[JsonValue]:
    if plan is None:
        return list(unavailable)
    needs: Mapping[str, tuple[str, ...]] = {t.id: t.needs for t in plan.tasks}
    bad = set(unavailable)
    return [t for t in unavailable if not (_ancestors(t, needs) & bad)]


def _ancestors(task_id: str, needs: Mapping[str, tuple[str, ...]]) -> set[str]:
    seen: set[str] = set()
    stack = list(needs.get(task_id, ()))
    while stack:
        current = stack.pop()
        if current not in seen:
            seen.add(current)
            stack.extend(needs.get(current, ()))
    return seen


def _load(ledger: RunLedger, run_ref: str) -> tuple[RunRecord, list[TaskRecord], Plan | None]:
    run = ledger.find_run(run_ref)
    records = list(ledger.inspect_run(run.run_id).tasks)
    return run, records, _proven_plan(run)


def analyze(run_ref: str, *, db: str) -> JsonObject:
    with open_ledger(db) as ledger:
        return _analysis(*_load(ledger, run_ref)).to_json()


def upgrade(run_ref: str, *, db: str, dry_run: bool) -> JsonObject:
    """Write what ``analyze`` derives (unless ``dry_run``); the analysis after the upgrade."""
    with open_ledger(db) as ledger:
        run, records, plan = _load(ledger, run_ref)
        before = _analysis(run, records, plan)
        store_plan = plan is not None and run.compiled_plan_json is None
        if dry_run:
            return {**before.to_json(), "dryRun": True, "upgradedTasks": []}
        if not (before.upgradeable or store_plan):
            # Nothing written, so no upgrade record exists to name.
            return {**before.to_json(), "dryRun": False, "upgradedTasks": [], "upgradeId": None}
        ids = list(before.upgradeable)
        clock = Clock()
        upgrade_id = clock.new_id("upgrade")  # spec/cli.md §2's id kinds: names this upgrade
        summary: JsonObject = {"upgradeId": upgrade_id, "upgradedTasks": list[JsonValue](ids)}
        ledger.upgrade_run(
            RunUpgrade(
                run_id=run.run_id,
                tasks=tuple(_task_upgrade(i, before.fields[i]) for i in ids),
                compiled_plan_json=stored_plan_text(plan) if plan and store_plan else None,
                summary={**summary, "storedPlan": store_plan},
                now=clock.now(),
                trace_id=clock.new_id("trace"),  # the command's own
            )
        )
        after = _analysis(*_load(ledger, run.run_id)).to_json()
    return {**after, "dryRun": False, **summary}


def _task_upgrade(task_id: str, fields: Mapping[str, _Field]) -> TaskUpgrade:
    return TaskUpgrade(
        task_id,
        fields["definitionFingerprint"].derived,
        fields["outputDigest"].derived,
        fields["outputContractFingerprint"].derived,
    )
