"""The synchronous operations the CLI calls: run, resume, cancel, inspect, list, effects.

Each function opens the ledger, does one job and returns JSON-ready data or a ``RunOutcome``.
Invariant: ``run`` compiles and validates inputs before the database is even opened, so a
bad workflow or bad input never creates state.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import trio

from agentctl.coordinator.clock import Clock
from agentctl.coordinator.service import (
    DriveRequest,
    Progress,
    RunOutcome,
    check_resumable,
    create_run,
    drive_run,
    outcome_or_raise,
)
from agentctl.core.plan import Plan
from agentctl.errors import InvalidOperationError, ValidationError
from agentctl.ledger.interface import RunLedger
from agentctl.ledger.model import ReconcileRequest
from agentctl.ledger.sqlite_ledger import open_ledger

DEFAULT_DB = ".agentctl/runtime.db"
SUPPORTED_ACTIONS = frozenset(
    {
        "builtin.assign",
        "builtin.assert",
        "builtin.memory.read",
        "builtin.memory.write",
        "builtin.read",
        "builtin.write",
        "builtin.shell.exec",
        "builtin.long_term_memory.read",
        "builtin.long_term_memory.write",
    }
)


def run_trio(fn: Any, *args: Any) -> Any:
    """``trio.run``, with a nursery's exception group unwrapped to the error a user should see."""
    try:
        return trio.run(fn, *args)
    except BaseExceptionGroup as group:
        raise _first_leaf(group) from group


def _first_leaf(group: BaseExceptionGroup[Any]) -> BaseException:
    from agentctl.errors import AgentctlError

    leaves: list[BaseException] = []
    stack: list[BaseException] = [group]
    while stack:
        exc = stack.pop(0)
        if isinstance(exc, BaseExceptionGroup):
            stack.extend(exc.exceptions)
        else:
            leaves.append(exc)
    for leaf in leaves:
        if isinstance(leaf, AgentctlError):
            return leaf
    for leaf in leaves:
        if isinstance(leaf, KeyboardInterrupt):
            return leaf
    return leaves[0] if leaves else group


def resolve_inputs(
    defaults: Mapping[str, Any],
    inputs_json: str | None,
    inputs_file_text: str | None,
    pairs: Sequence[str],
) -> dict[str, Any]:
    """spec.inputs ← --inputs / --inputs-file object ← each --input KEY=VALUE (JSON else text)."""
    merged = dict(defaults)
    if inputs_json is not None and inputs_file_text is not None:
        raise ValidationError("--inputs and --inputs-file are mutually exclusive")
    text = inputs_json if inputs_json is not None else inputs_file_text
    if text is not None:
        try:
            given = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValidationError(f"run inputs are not valid JSON: {exc}") from exc
        if not isinstance(given, dict):
            raise ValidationError("run inputs must be a JSON object")
        merged.update(given)
    for pair in pairs:
        key, eq, raw = pair.partition("=")
        if not eq or not key:
            raise ValidationError(f"--input expects KEY=VALUE, got {pair!r}")
        try:
            merged[key] = json.loads(raw)
        except json.JSONDecodeError:
            merged[key] = raw
    return merged


def check_executable(
    plan: Plan, document: Mapping[str, Any], *, file: str | None = None, locate: Any = None
) -> None:
    """Refuse, before any state exists, a workflow using what this version cannot execute."""
    from agentctl.errors import Diagnostic

    found: list[Diagnostic] = []
    spec = document["spec"]
    for task in plan.tasks:
        gap = _capability_gap(task, spec)
        if gap is None:
            continue
        what, path = gap
        line, column = (locate(path) if locate else None) or (None, None)
        found.append(
            Diagnostic(
                "unsupported_capability",
                f"this version of agentctl cannot run {what} yet",
                file=file,
                line=line,
                column=column,
                path=path,
                help="`agentctl check` and `plan` accept it; run does not",
            )
        )
    if found:
        raise ValidationError(
            "the workflow uses features this version cannot run", diagnostics=found
        )


def _capability_gap(task: Any, spec: Mapping[str, Any]) -> tuple[str, str] | None:
    """(what, dotted path) of an unsupported feature this task uses, or None."""
    if task.kind == "agent":
        agent = (spec.get("agents") or {}).get(task.agent or "") or {}
        name = agent.get("provider")
        kind = ((spec.get("providers") or {}).get(name) or {}).get("kind")
        if kind != "fake":
            return (
                f"{kind} providers (task {task.id}); only fake runs",
                f"spec.providers.{name}.kind",
            )
    elif task.kind == "action":
        kind = ((spec.get("actions") or {}).get(task.action or "") or {}).get("kind")
        if kind not in SUPPORTED_ACTIONS:
            return f"action kind {kind} (task {task.id})", f"spec.actions.{task.action}.kind"
    return None


def preflight_containers(plan: Plan, document: Mapping[str, Any]) -> None:
    """Fail closed before any state exists: every container action's engine and image."""
    from agentctl.sandbox.container import preflight

    actions = document["spec"].get("actions") or {}
    wanted = set()
    for task in plan.tasks:
        action = actions.get(task.action or "") if task.kind == "action" else None
        if action and action.get("isolation") == "container" and action.get("container"):
            box = action["container"]
            wanted.add((str(box.get("runtime") or "auto"), str(box["image"])))

    async def check_all() -> None:
        for runtime, image in sorted(wanted):
            await preflight(runtime, image)

    if wanted:
        run_trio(check_all)


def start_run(
    *,
    document: Mapping[str, Any],
    plan: Plan,
    plan_json: Any,
    inputs: Mapping[str, Any],
    db: str,
    workspace: str,
    timeout_s: float | None,
    progress: Progress | None = None,
    on_created: Any = None,
    check_mode: bool = False,
    diff: bool = False,
    file: str | None = None,
    locate: Any = None,
) -> RunOutcome:
    check_executable(plan, document, file=file, locate=locate)
    preflight_containers(plan, document)
    clock = Clock()
    root = os.path.abspath(workspace)
    with open_ledger(db) as ledger:
        run_id, trace_id = create_run(
            ledger,
            plan=plan,
            document=document,
            plan_json=plan_json,
            inputs=inputs,
            workspace=root,
            clock=clock,
            mode="check" if check_mode else "execute",
        )
        if on_created is not None:
            on_created(run_id, trace_id)
        req = DriveRequest(
            ledger,
            run_id,
            trace_id,
            plan,
            document,
            root,
            timeout_s,
            progress,
            clock,
            check_mode=check_mode,
            diff=diff,
        )
        outcome = run_trio(drive_run, req)
    if outcome.state == "failed" and _automatic_compensation(document):
        outcome = _compensate_after_failure(outcome, db, root, timeout_s)
    return outcome_or_raise(outcome)


def _automatic_compensation(document: Mapping[str, Any]) -> bool:
    settings = document["spec"].get("compensation") or {}
    return settings.get("onFailure") == "automatic"


def _compensate_after_failure(
    outcome: RunOutcome, db: str, workspace: str, timeout_s: float | None
) -> RunOutcome:
    """``compensation.onFailure: automatic``: run the inverse actions of a failed run."""
    name, data, _code = compensate(
        outcome.run_id,
        db=db,
        tasks_filter=None,
        plan_only=False,
        workspace=workspace,
        timeout_s=timeout_s,
    )
    note = (
        f"automatic compensation {data.get('runId')} ended {data.get('state')}"
        if name == "CompensationOutcome"
        else "automatic compensation had nothing executable to run"
    )
    return dataclasses.replace(outcome, errors={**outcome.errors, "compensation": note})


def resume(
    run_ref: str,
    *,
    db: str,
    workspace: str | None,
    timeout_s: float | None,
    progress: Progress | None = None,
    diff: bool = False,
) -> RunOutcome:
    from agentctl.core.compiler import compile_workflow

    clock = Clock()
    with open_ledger(_existing(db)) as ledger:
        run = check_resumable(ledger, run_ref, clock)
        plan = compile_workflow(run.workflow)
        trace_id = clock.new_id("trace")
        base = os.path.abspath(workspace or run.base_path or os.getcwd())
        req = DriveRequest(
            ledger,
            run.run_id,
            trace_id,
            plan,
            run.workflow,
            base,
            timeout_s,
            progress,
            clock,
            check_mode=run.mode == "check",
            diff=diff,
        )
        return outcome_or_raise(run_trio(drive_run, req))


def replay(run_ref: str, *, db: str) -> RunOutcome:
    """A recorded replay of a terminal run: nothing executes."""
    from agentctl.coordinator import lineage

    with _open(db) as ledger:
        # A replay prints its outcome with the source's exit code, even when it failed.
        return lineage.replay(ledger, run_ref, Clock())


def fork(
    run_ref: str,
    *,
    db: str,
    workspace: str | None,
    timeout_s: float | None,
    progress: Progress | None = None,
    on_created: Any = None,
    diff: bool = False,
) -> RunOutcome:
    """A new run linked to the source that executes everything again with fresh effects."""
    from agentctl.coordinator import lineage
    from agentctl.core.compiler import compile_workflow

    clock = Clock()
    with _open(db) as ledger:
        source = ledger.find_run(run_ref)
        plan = compile_workflow(source.workflow)
        check_executable(plan, source.workflow)
        preflight_containers(plan, source.workflow)
        run_id, trace_id = lineage.new_fork(ledger, source, list(plan.order), clock)
        if on_created is not None:
            on_created(run_id, trace_id)
        base = os.path.abspath(workspace or source.base_path or os.getcwd())
        req = DriveRequest(
            ledger,
            run_id,
            trace_id,
            plan,
            source.workflow,
            base,
            timeout_s,
            progress,
            clock,
            diff=diff,
        )
        return outcome_or_raise(run_trio(drive_run, req))


def _existing(db: str) -> str:
    from agentctl.errors import NotFoundError

    if not Path(db).exists():
        raise NotFoundError(f"database {db} does not exist")
    return db


def _open(db: str) -> contextlib.AbstractContextManager[RunLedger]:
    """The existing ledger at ``db`` (``NotFoundError`` if there is none), closed on exit."""
    return open_ledger(_existing(db))


def cancel(run_ref: str, *, db: str) -> dict[str, Any]:
    with _open(db) as ledger:
        run = ledger.request_cancel(run_ref, Clock().now())
    return {"runId": run.run_id, "requested": True}


def list_runs(*, db: str, state: str | None, limit: int) -> dict[str, Any]:
    with _open(db) as ledger:
        return ledger.list_runs(state=state, limit=limit).to_json()


def inspect(run_ref: str, *, db: str) -> dict[str, Any]:
    with _open(db) as ledger:
        return ledger.inspect_run(run_ref).to_json()


def effects_list(run_ref: str, *, db: str, task: str | None) -> dict[str, Any]:
    with _open(db) as ledger:
        return ledger.list_effects(run_ref, task).to_json()


def effects_inspect(effect_id: str, *, db: str) -> dict[str, Any]:
    with _open(db) as ledger:
        return ledger.inspect_effect(effect_id).to_json()


def effects_reconcile(
    effect_id: str,
    *,
    db: str,
    status: str,
    reason: str,
    actor: str,
    evidence: Any,
    result: Any,
    compensation_effect_id: str | None,
) -> dict[str, Any]:
    clock = Clock()
    request = ReconcileRequest(
        effect_id=effect_id,
        status=status.replace("-", "_"),
        actor=actor,
        reason=reason,
        evidence=evidence,
        result=result,
        compensation_effect_id=compensation_effect_id,
        now=clock.now(),
        reconciliation_id=clock.new_id("reconciliation"),
        trace_id=clock.new_id("trace"),
    )
    with _open(db) as ledger:
        return ledger.reconcile_effect(request).to_json()


def recover(
    kind: str,
    *,
    document: Mapping[str, Any],
    target: Plan,
    plan_json: Any,
    source_ref: str,
    db: str,
    roots: Sequence[str],
    failed_only: bool,
    plan_only: bool,
    restart_successful: bool,
    reason: str | None,
    workspace: str | None,
    timeout_s: float | None,
    progress: Progress | None = None,
) -> tuple[str, dict[str, Any], int]:
    """Plan a retry or repair of ``source_ref``; run it unless planning only or blocked.

    Returns (envelope kind, data, exit code): a blocked plan is printed with exit 3 and
    creates nothing.
    """
    from agentctl.coordinator import recovery
    from agentctl.core import recovery as rc

    clock = Clock()
    title = "Retry" if kind == "retry" else "Repair"
    with _open(db) as ledger:
        source_run, source = recovery.load_source(ledger, source_ref)
        ok = recovery.artifact_checker(ledger)
        if kind == "retry":
            planned = rc.plan_retry(
                source,
                target,
                failed_only=failed_only,
                roots=roots,
                restart_successful=restart_successful,
                artifact_ok=ok,
            )
        else:
            planned = rc.plan_repair(
                source,
                target,
                roots=roots,
                restart_successful=restart_successful,
                artifact_ok=ok,
                reason=reason,
            )
        if plan_only or not planned.compatible:
            return f"{title}Plan", planned.to_json(), 0 if planned.compatible else 3
        check_executable(target, document)
        preflight_containers(target, document)
        base = os.path.abspath(workspace or source_run.base_path or os.getcwd())
        run_id, trace_id = recovery.create_derived_run(
            ledger,
            source_run=source_run,
            source=source,
            recovery=planned,
            target=target,
            document=document,
            plan_json=plan_json,
            inputs=source_run.inputs or {},
            workspace=base,
            reason=reason,
            clock=clock,
        )
        req = DriveRequest(
            ledger, run_id, trace_id, target, document, base, timeout_s, progress, clock
        )
        outcome = outcome_or_raise(run_trio(drive_run, req))
        refs = ledger.list_artifacts(run_id).to_json()["references"]
    data = {
        **outcome.to_json(),
        "sourceRunId": source.run_id,
        "reusedTasks": list(planned.reuse),
        "executedTasks": list(planned.execute),
        "artifacts": refs,
    }
    return (
        f"{title}Outcome",
        data,
        {"succeeded": 0, "paused": 3, "cancelled": 130}.get(outcome.state, 4),
    )


def compensate(
    source_ref: str,
    *,
    db: str,
    tasks_filter: Sequence[str] | None,
    plan_only: bool,
    workspace: str | None,
    timeout_s: float | None,
    progress: Progress | None = None,
) -> tuple[str, dict[str, Any], int]:
    """Plan (and run) the declared inverse actions of a terminal run's confirmed mutations."""
    from agentctl.coordinator import recovery
    from agentctl.core import recovery as rc
    from agentctl.core.compiler import compile_workflow, plan_to_json

    clock = Clock()
    with _open(db) as ledger:
        source_run, source = recovery.load_source(ledger, source_ref)
        if source_run.state not in ("succeeded", "failed", "cancelled"):
            raise InvalidOperationError(
                f"run {source_run.run_id} is {source_run.state}; compensate needs a terminal run"
            )
        source_plan = compile_workflow(source_run.workflow)
        planned = rc.plan_compensation(source, source_plan, tasks=tasks_filter)
        data = planned.to_json()
        if plan_only or not planned.executable:
            return "CompensationPlan", data, 0 if planned.complete else 3
        document = rc.compensation_document(source_run.workflow, planned)
        plan = compile_workflow(document)
        base = os.path.abspath(workspace or source_run.base_path or os.getcwd())
        run_id, trace_id = create_run(
            ledger,
            plan=plan,
            document=document,
            plan_json=plan_to_json(plan),
            inputs=source_run.inputs or {},
            workspace=base,
            clock=clock,
            mode="compensation",
            source_run_id=source_run.run_id,
        )
        links = {s.compensation_task_id: s.source_effect_ids for s in planned.steps}
        req = DriveRequest(
            ledger,
            run_id,
            trace_id,
            plan,
            document,
            base,
            timeout_s,
            progress,
            clock,
            compensates=links,
        )
        outcome = run_trio(drive_run, req)
    result = {**outcome.to_json(), "sourceRunId": source_run.run_id, "plan": data}
    return "CompensationOutcome", result, 0 if outcome.state == "succeeded" else 4
