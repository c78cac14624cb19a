"""The JSON ``data`` of the ``plan`` and ``check`` commands (spec/cli.md §1, issue 14 item 7).

``plan_to_json``: {name, workflowDigest, planDigest, order, maxConcurrency, predictability
(the plan's least predictable task), requirements {providers, tools, effects, processes},
tasks {ID: {id, kind, uses {kind, name}, needs, ..., predictability, routeGuards?,
expansion?}}, budget}. ``check_result_json``: {valid, workflow, workflowDigest, planDigest,
tasks}.

Invariants:
- both are pure functions of the ``Plan``; nothing here re-reads the document;
- the printed shape is for people and scripts only: the plan digest is computed from the
  compiler's own canonical task shape (``serialize.task_json``), never from this one, so
  reshaping the printed plan never changes a digest;
- ``tasks`` is keyed by task id and keeps compiled order (JSON object order); ``order`` stays
  the authoritative sequence.
"""

from __future__ import annotations

from typing import Any

from agentctl.core.compiler.serialize import task_json
from agentctl.core.plan import Plan, PlannedTask

_RANK = {"fully_predictable": 0, "partially_predictable": 1, "requires_execution": 2}
# How each compiled task kind is printed as ``uses.kind``.
_USES_KIND = {
    "action": "action",
    "agent": "agent",
    "router": "router",
    "aggregate": "aggregate",
    "loop_aggregate": "loop_aggregate",
    "subworkflow_input": "subworkflow_input",
    "subworkflow_output": "subworkflow_aggregate",
}


def task_predictability(plan: Plan) -> dict[str, str]:
    """Each task's predictability: its main effect's, or fully predictable for pure tasks."""
    found = {task.id: "fully_predictable" for task in plan.tasks}
    for effect in plan.requirements.get("effects") or []:
        operation = str(effect.get("operation", ""))
        if operation.startswith(("action:", "agent:")):
            found[str(effect["task"])] = str(effect["predictability"])
    return found


def uses_json(task: PlannedTask) -> dict[str, Any]:
    """``{kind, name}``: what the task runs; a sub-workflow's name carries its version."""
    name: str | None = task.uses.partition(":")[2] or None
    if task.subworkflow is not None:
        name = task.subworkflow
    return {"kind": _USES_KIND.get(task.kind, task.kind), "name": name}


def route_guards(plan: Plan) -> dict[str, list[dict[str, Any]]]:
    """Per destination task: the routers that select it, with the case values that do."""
    guards: dict[str, list[dict[str, Any]]] = {}
    for router in plan.tasks:
        if router.route is None:
            continue
        selecting: dict[str, dict[str, Any]] = {}
        for case in router.route.cases:
            for dest in case.tasks:
                guard = selecting.setdefault(dest, _guard(router))
                guard["equals"].append(case.equals)
        for dest in router.route.default:
            selecting.setdefault(dest, _guard(router))["default"] = True
        for dest, guard in selecting.items():
            guards.setdefault(dest, []).append(guard)
    return guards


def _guard(router: PlannedTask) -> dict[str, Any]:
    select = router.route.select if router.route is not None else None
    return {"router": router.id, "select": select, "equals": [], "default": False}


def expansion_json(task: PlannedTask, plan: Plan) -> dict[str, Any] | None:
    """Where an expanded child comes from: ``{parent, kind, index}``."""
    if task.parent is None:
        return None
    parent = plan.task(task.parent)
    kinds = {"loop_aggregate": "loop", "subworkflow_output": "subworkflow"}
    kind = kinds.get(parent.kind, "matrix" if "matrix" in task.bindings else "foreach")
    keys = {"foreach": "foreachIndex", "matrix": "matrixIndex", "loop": "loopIndex"}
    index = task.bindings.get(keys.get(kind, ""))
    return {"parent": task.parent, "kind": kind, "index": index}


def printed_task(task: PlannedTask, plan: Plan, predictability: str, guards: Any) -> Any:
    printed: dict[str, Any] = {**task_json(task), "uses": uses_json(task)}
    printed["predictability"] = predictability
    if task.id in guards:
        printed["routeGuards"] = guards[task.id]
    expansion = expansion_json(task, plan)
    if expansion is not None:
        printed["expansion"] = expansion
    return printed


def plan_to_json(plan: Plan) -> dict[str, Any]:
    per_task = task_predictability(plan)
    overall = max(per_task.values(), key=_RANK.__getitem__, default="fully_predictable")
    requirements = {
        key: plan.requirements.get(key) or []
        for key in ("providers", "tools", "effects", "processes")
    }
    guards = route_guards(plan)
    return {
        "name": plan.name,
        "workflowDigest": plan.workflow_digest,
        "planDigest": plan.plan_digest,
        "order": list(plan.order),
        "maxConcurrency": plan.max_concurrency,
        "predictability": overall,
        "requirements": requirements,
        "tasks": {t.id: printed_task(t, plan, per_task[t.id], guards) for t in plan.tasks},
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
