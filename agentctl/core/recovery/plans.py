"""The retry/repair plan value and its JSON (``agentctl.dev/retry-plan/v1``, ``repair-plan/v1``).

Invariants:
- ``reuse`` and ``execute`` are disjoint and in target compiled order; a task blocked from
  reuse is in neither; ``compatible`` is exactly "no blocks".
- ``to_json`` returns fresh containers every call (callers may mutate the result) and is a
  pure function of the plan, so equal plans always print byte-identical JSON.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from agentctl.core.jsonvalue import JsonArray, JsonObject, JsonValue
from agentctl.core.plan import Plan
from agentctl.core.recovery.model import Block

RETRY_PLAN_API = "agentctl.dev/retry-plan/v1"
REPAIR_PLAN_API = "agentctl.dev/repair-plan/v1"

PlanKind = Literal["retry", "repair"]


@dataclass(frozen=True)
class RecoveryPlan:
    """A retry, repair or fork decided: which tasks are reused, run again or blocked."""

    kind: PlanKind
    compatible: bool  # False ⇒ the CLI prints the plan, exits 3, creates no run
    source_run_id: str
    source_workflow_digest: str
    target_workflow_digest: str
    roots: tuple[str, ...]
    reuse: tuple[str, ...]  # target ids materialised from the source, in target order
    execute: tuple[str, ...]  # target ids that run fresh, in target order
    blocked: tuple[Block, ...]
    warnings: tuple[str, ...]
    tasks: tuple[JsonObject, ...]  # [{taskId, disposition, reason}]
    failed_only: bool = False
    reason: str | None = None
    rerun_tasks: tuple[str, ...] = ()  # executed tasks the source also had
    new_tasks: tuple[str, ...] = ()  # target tasks the source did not have
    removed_tasks: tuple[str, ...] = ()  # source tasks the target does not have
    changed_tasks: tuple[str, ...] = ()  # tasks whose definition fingerprint changed
    fresh_effect_summary: Mapping[str, JsonValue] = field(default_factory=dict)
    approval_summary: Mapping[str, JsonValue] = field(default_factory=dict)
    estimated_provider_tasks: int = 0

    def to_json(self) -> JsonObject:
        retry = self.kind == "retry"
        data: JsonObject = {
            "apiVersion": RETRY_PLAN_API if retry else REPAIR_PLAN_API,
            "compatible": self.compatible,
            "sourceRunId": self.source_run_id,
            "sourceWorkflowDigest": self.source_workflow_digest,
            "targetWorkflowDigest": self.target_workflow_digest,
            "retryRoots" if retry else "repairRoots": list(self.roots),
            "reusedTasks": list(self.reuse),
            "rerunTasks": list(self.rerun_tasks),
            "newTasks": list(self.new_tasks),
            "removedTasks": list(self.removed_tasks),
            "changedTasks": list(self.changed_tasks),
            "blockedReuse": [block.to_json() for block in self.blocked],
            "freshEffectSummary": copy.deepcopy(dict(self.fresh_effect_summary)),
            "approvalSummary": copy.deepcopy(dict(self.approval_summary)),
            "estimatedProviderTasks": self.estimated_provider_tasks,
            "warnings": list(self.warnings),
            "tasks": [dict(row) for row in self.tasks],
            "reason": self.reason,
        }
        if retry:
            data["failedOnly"] = self.failed_only
            data["workflowDigest"] = self.target_workflow_digest
        return data


def fresh_effect_summary(target: Plan, execute: Iterable[str]) -> JsonObject:
    """What executing ``execute`` may do to the world, from the plan's static requirements."""
    chosen = set(execute)
    by_class: dict[str, int] = {}
    operations: JsonArray = []
    for entry in _effect_entries(target):
        if entry.get("task") not in chosen or entry.get("effectClass") == "pure":
            continue
        effect_class = str(entry.get("effectClass"))
        by_class[effect_class] = by_class.get(effect_class, 0) + 1
        operations.append(
            {
                "taskId": entry.get("task"),
                "operation": entry.get("operation"),
                "effectClass": effect_class,
                "risk": entry.get("risk"),
            }
        )
    return {
        "total": len(operations),
        "byClass": {name: count for name, count in sorted(by_class.items())},
        "operations": operations,
    }


def approval_summary(target: Plan, execute: Iterable[str]) -> JsonObject:
    """Which executed tasks may stop for an approval under the target's policy."""
    chosen = set(execute)
    tasks: JsonArray = []
    for entry in _effect_entries(target):
        task_id = entry.get("task")
        if task_id in chosen and entry.get("approvalPossible") and task_id not in tasks:
            tasks.append(str(task_id))
    return {"approvalPossible": len(tasks), "tasks": tasks}


def estimated_provider_tasks(target: Plan, execute: Iterable[str]) -> int:
    chosen = set(execute)
    return sum(1 for task in target.tasks if task.id in chosen and task.kind == "agent")


def _effect_entries(target: Plan) -> list[Mapping[str, JsonValue]]:
    entries = target.requirements.get("effects") or []
    return [entry for entry in entries if isinstance(entry, Mapping)]
