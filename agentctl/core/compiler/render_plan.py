"""The JSON ``data`` of the ``plan`` and ``check`` commands (spec/cli.md §1).

``plan_to_json``: {name, workflowDigest, planDigest, order, maxConcurrency, predictability
(the plan's least predictable task), requirements {providers, tools, effects, processes},
tasks [{id, kind, uses, needs, ..., predictability}], budget}. ``check_result_json``:
{valid, workflow, workflowDigest, planDigest, tasks}.

Invariant: both are pure functions of the ``Plan``; nothing here re-reads the document.
"""

from __future__ import annotations

from typing import Any

from agentctl.core.compiler.serialize import task_json
from agentctl.core.plan import Plan

_RANK = {"fully_predictable": 0, "partially_predictable": 1, "requires_execution": 2}


def task_predictability(plan: Plan) -> dict[str, str]:
    """Each task's predictability: its main effect's, or fully predictable for pure tasks."""
    found = {task.id: "fully_predictable" for task in plan.tasks}
    for effect in plan.requirements.get("effects") or []:
        operation = str(effect.get("operation", ""))
        if operation.startswith(("action:", "agent:")):
            found[str(effect["task"])] = str(effect["predictability"])
    return found


def plan_to_json(plan: Plan) -> dict[str, Any]:
    per_task = task_predictability(plan)
    overall = max(per_task.values(), key=_RANK.__getitem__, default="fully_predictable")
    requirements = {
        key: plan.requirements.get(key) or []
        for key in ("providers", "tools", "effects", "processes")
    }
    return {
        "name": plan.name,
        "workflowDigest": plan.workflow_digest,
        "planDigest": plan.plan_digest,
        "order": list(plan.order),
        "maxConcurrency": plan.max_concurrency,
        "predictability": overall,
        "requirements": requirements,
        "tasks": [{**task_json(task), "predictability": per_task[task.id]} for task in plan.tasks],
        "budget": plan.requirements.get("budgets"),
    }


def check_result_json(plan: Plan) -> dict[str, Any]:
    return {
        "valid": True,
        "workflow": plan.name,
        "workflowDigest": plan.workflow_digest,
        "planDigest": plan.plan_digest,
        "tasks": len(plan.tasks),
    }
