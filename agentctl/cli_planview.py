"""The human views of recovery: ``repair``/``retry``/``compensate`` plans and outcomes.

A plan is read before it is run: the view says whether it can run, which tasks are reused and
which execute, how many fresh effects and approvals that means, and — when it is blocked — each
block's task, rule and message, which says what to pass instead. An outcome says which run was
made, from which source, what it reused and executed, then the run's output as ``run`` prints it.
Invariants: run and task ids are printed whole; nothing is shown that the data does not hold;
``--output json`` (or ``--verbose``, under the view) keeps every field.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from agentctl.core.jsonvalue import JsonObject, JsonValue, as_list, as_object
from agentctl.render import Settings, dump_json, paint_state, paused_line

View = Callable[[Settings], str]
LABEL = 10  # width of a plan line's label


def _names(value: JsonValue) -> str:
    items = [str(v) for v in as_list(value)]
    return ", ".join(items) if items else "-"


def _row(label: str, value: str) -> str:
    return f"  {label.ljust(LABEL)} {value}"


def _blocks(items: JsonValue, task_key: str) -> list[str]:
    lines = []
    for item in (as_object(b) for b in as_list(items)):
        task = item.get(task_key) or "-"  # a block of the whole plan names no task
        lines.append(f"  {task}  {item.get('rule')}")
        lines.append(f"    {item.get('message')}")
    return ["", "blocked:", *lines] if lines else []


def _warnings(items: JsonValue) -> list[str]:
    """The plan's warnings, each on its own line: they name work the plan leaves out (a task's
    effects that belong to an earlier run, a result not carried over), which no other line
    shows — a plan with nothing to run must not read as nothing to do."""
    lines = [f"warning: {w}" for w in as_list(items)]
    return ["", *lines] if lines else []


def _executing(data: JsonObject) -> JsonValue:
    """The tasks the plan runs, in plan order: ``rerunTasks`` names only those the source also
    had (a closure task an unreconciled effect blocks among them), so a new task that executes
    — a root, or a dependant of one — is found by its ``execute`` disposition."""
    rerun = [str(t) for t in as_list(data.get("rerunTasks"))]
    rows = [as_object(t) for t in as_list(data.get("tasks"))]
    picked: list[JsonValue] = [
        str(row.get("taskId"))
        for row in rows
        if row.get("taskId") in rerun or row.get("disposition") == "execute"
    ]
    return picked + [t for t in rerun if t not in picked]


def _effects(data: JsonObject) -> str:
    fresh = as_object(data.get("freshEffectSummary"))
    by_class = as_object(fresh.get("byClass"))
    classes = ", ".join(f"{k} {v}" for k, v in sorted(by_class.items()))
    approvals = as_object(data.get("approvalSummary")).get("approvalPossible", 0)
    total = f"{fresh.get('total', 0)}" + (f" ({classes})" if classes else "")
    return f"{total}; approvals possible: {approvals}"


def recovery_plan_view(kind: str, data: JsonObject) -> View:
    """``repair --plan`` / ``retry --plan``: what would be reused and executed, or why not."""

    def human(_settings: Settings) -> str:
        verdict = "can run" if data.get("compatible") else "blocked"
        lines = [f"{kind} plan for run {data.get('sourceRunId')}: {verdict}"]
        roots_key = "repairRoots" if kind == "repair" else "retryRoots"
        lines.append(_row("roots", _names(data.get(roots_key))))
        lines.append(_row("reuse", _names(data.get("reusedTasks"))))
        lines.append(_row("execute", _names(_executing(data))))
        for label, key in (("new", "newTasks"), ("removed", "removedTasks")):
            if as_list(data.get(key)):
                lines.append(_row(label, _names(data.get(key))))
        if as_list(data.get("changedTasks")):
            lines.append(_row("changed", _names(data.get("changedTasks"))))
        lines.append(_row("effects", _effects(data)))
        if data.get("reason"):
            lines.append(_row("reason", str(data.get("reason"))))
        lines += _blocks(data.get("blockedReuse"), "taskId")
        lines += _warnings(data.get("warnings"))
        return "\n".join(lines) + "\n"

    return human


def compensation_plan_view(data: JsonObject) -> View:
    """``compensate --plan``: each inverse action in the order it would run, and the blocks."""

    def human(_settings: Settings) -> str:
        state = "can run" if data.get("executable") else "nothing to run"
        if as_list(data.get("blocked")):
            state = "blocked" if not data.get("executable") else "can run part of it"
        lines = [f"compensation plan for run {data.get('sourceRunId')}: {state}"]
        for task in (as_object(t) for t in as_list(data.get("tasks"))):
            undo = f"{task.get('sourceTaskId')} ← {task.get('compensationTaskId')}"
            lines.append(f"  {undo}  (action {task.get('action')})")
            lines += [f"    undoes effect {e}" for e in as_list(task.get("sourceEffectIds"))]
        done = as_list(data.get("alreadyCompensatedEffects"))
        if done:
            lines.append(f"  already compensated: {len(done)} effect(s)")
        lines += _blocks(data.get("blocked"), "taskId")
        lines += _warnings(data.get("warnings"))
        return "\n".join(lines) + "\n"

    return human


def _outcome_lines(data: JsonObject, color: bool) -> list[str]:
    state = paint_state(str(data.get("state")), color)
    lines = [f"run {data.get('runId')}: {state}  (from {data.get('sourceRunId')})"]
    for label, key in (
        ("reused", "reusedTasks"),
        ("executed", "executedTasks"),
        ("undone", "compensatedTasks"),
    ):
        if key in data:
            lines.append(_row(label, _names(data.get(key))))
    if data.get("output") is not None:
        lines.append(dump_json(data.get("output"), indent=2))
    if data.get("state") == "paused":
        lines.append(paused_line(str(data.get("runId"))))
    return lines


def recovery_outcome_view(data: JsonObject) -> View:
    """A repair, retry or compensation run that ended (or paused): what it did, its output."""
    return lambda settings: "\n".join(_outcome_lines(data, settings.use_color(sys.stdout)))


def recovery_view(kind: str, data: JsonObject) -> View:
    """The view of any recovery envelope, by its ``kind``."""
    if kind in ("RepairPlan", "RetryPlan"):
        return recovery_plan_view(kind.removesuffix("Plan").lower(), data)
    if kind == "CompensationPlan":
        return compensation_plan_view(data)
    return recovery_outcome_view(data)
