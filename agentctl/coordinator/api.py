"""The synchronous operations the CLI calls: run, resume, cancel, inspect, list, effects.

Each function opens the ledger, does one job and returns JSON-ready data or a ``RunOutcome``.
Invariant: ``run`` compiles and validates inputs before the database is even opened, so a
bad workflow or bad input never creates state.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import trio

from agentctl.coordinator.clock import Clock
from agentctl.coordinator.creation import load_plan
from agentctl.coordinator.service import (
    DriveRequest,
    Progress,
    RunOutcome,
    check_resumable,
    create_run,
    drive_run,
    outcome_or_raise,
)
from agentctl.core import registry
from agentctl.core.plan import Plan, PlannedTask
from agentctl.errors import Diagnostic, InvalidOperationError, ValidationError
from agentctl.ledger import reconcile, runs, stats
from agentctl.ledger.connection import Ledger, open_ledger

DEFAULT_DB = ".agentctl/runtime.db"


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


def check_executable(plan: Plan, *, file: str | None = None, locate: Any = None) -> None:
    """Refuse, before any state exists, a workflow using what this version cannot execute."""
    found: list[Diagnostic] = []
    for task in plan.tasks:
        gap = _capability_gap(task)
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


def _capability_gap(task: PlannedTask) -> tuple[str, str] | None:
    """(what, dotted path) of a registry operation this task uses that does not run yet."""
    entry = task.entry
    if task.kind == "agent" and task.agent_config is not None:
        if entry is None or not entry.runnable:
            name, kind = task.agent_config.provider_name, task.agent_config.provider_kind
            runnable = [op.name for op in registry.entries("model") if op.runnable]
            only = ", ".join(name.removeprefix(registry.MODEL_PREFIX) for name in runnable)
            return f"{kind} providers (task {task.id}); only {only} runs", (
                f"spec.providers.{name}.kind"
            )
    elif task.kind == "action" and (entry is None or not entry.runnable):
        return f"action kind {task.operation} (task {task.id})", f"spec.actions.{task.action}.kind"
    return None


def preflight_containers(plan: Plan) -> None:
    """Fail closed before any state exists: every container action's engine and image."""
    from agentctl.sandbox.container import preflight

    wanted = set()
    for task in plan.tasks:
        action = task.action_config if task.kind == "action" else None
        box = action.get("container") if action and action.get("isolation") == "container" else None
        if isinstance(box, dict):
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
    check_executable(plan, file=file, locate=locate)
    preflight_containers(plan)
    clock = Clock()
    root = os.path.abspath(workspace)
    mode = "check" if check_mode else "execute"
    with open_ledger(db) as ledger:
        run_id, trace_id = create_run(
            ledger,
            plan=plan,
            document=document,
            plan_json=plan_json,
            inputs=inputs,
            workspace=root,
            clock=clock,
            mode=mode,
        )
        if on_created is not None:
            on_created(run_id, trace_id)
        req = DriveRequest(ledger, run_id, trace_id, plan, root, timeout_s, progress, clock)
        outcome = run_trio(drive_run, dataclasses.replace(req, check_mode=check_mode, diff=diff))
    if outcome.state == "failed" and plan.run.compensation.get("onFailure") == "automatic":
        outcome = _compensate_after_failure(outcome, db, root, timeout_s)
    return outcome_or_raise(outcome)


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
    """Continue a run with the plan it was created with (loaded, not compiled again)."""
    clock = Clock()
    with open_ledger(_existing(db)) as ledger:
        run = check_resumable(ledger, run_ref, clock)
        plan = load_plan(run)
        trace_id = clock.new_id("trace")
        base = os.path.abspath(workspace or run.base_path or os.getcwd())
        req = DriveRequest(ledger, run.run_id, trace_id, plan, base, timeout_s, progress, clock)
        req = dataclasses.replace(req, check_mode=run.mode == "check", diff=diff)
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

    clock = Clock()
    with _open(db) as ledger:
        with ledger.read() as conn:
            source = runs.find_run(conn, run_ref)
        plan = load_plan(source)
        check_executable(plan)
        preflight_containers(plan)
        run_id, trace_id = lineage.new_fork(ledger, source, plan, clock)
        if on_created is not None:
            on_created(run_id, trace_id)
        base = os.path.abspath(workspace or source.base_path or os.getcwd())
        req = DriveRequest(ledger, run_id, trace_id, plan, base, timeout_s, progress, clock)
        return outcome_or_raise(run_trio(drive_run, dataclasses.replace(req, diff=diff)))


def _existing(db: str) -> str:
    from agentctl.errors import NotFoundError

    if not Path(db).exists():
        raise NotFoundError(f"database {db} does not exist")
    return db


def _open(db: str) -> Ledger:
    return open_ledger(_existing(db))


def cancel(run_ref: str, *, db: str) -> dict[str, Any]:
    clock = Clock()
    with _open(db) as ledger, ledger.transaction() as conn:
        run = runs.find_run(conn, run_ref)
        runs.request_cancel_txn(conn, run.run_id, clock.now())
    return {"runId": run.run_id, "requested": True}


def list_runs(*, db: str, state: str | None, limit: int) -> dict[str, Any]:
    with _open(db) as ledger, ledger.read() as conn:
        return stats.run_list(conn, state=state, limit=limit)


def inspect(run_ref: str, *, db: str) -> dict[str, Any]:
    with _open(db) as ledger, ledger.read() as conn:
        return stats.run_inspection(conn, runs.find_run(conn, run_ref).run_id)


def effects_list(run_ref: str, *, db: str, task: str | None) -> dict[str, Any]:
    with _open(db) as ledger, ledger.read() as conn:
        return stats.effect_list(conn, runs.find_run(conn, run_ref).run_id, task)


def effects_inspect(effect_id: str, *, db: str) -> dict[str, Any]:
    with _open(db) as ledger, ledger.read() as conn:
        return stats.effect_inspection(conn, effect_id)


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
    with _open(db) as ledger, ledger.transaction() as conn:
        record = reconcile.reconcile_effect_txn(
            conn,
            effect_id,
            status.replace("-", "_"),
            actor,
            reason,
            evidence,
            result,
            compensation_effect_id,
            clock.now(),
            reconciliation_id=clock.new_id("reconciliation"),
            trace_id=clock.new_id("trace"),
        )
    return dict(record.to_json())


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
    """Plan a retry or repair; run it unless planning only or blocked (exit 3, creates nothing)."""
    from agentctl.coordinator import recovery
    from agentctl.core import recovery as rc

    title = "Retry" if kind == "retry" else "Repair"
    with _open(db) as ledger:
        source_run, source = recovery.load_source(ledger, source_ref)
        ok = recovery.artifact_checker(ledger)
        options = {"roots": roots, "restart_successful": restart_successful, "artifact_ok": ok}
        planned = (
            rc.plan_retry(source, target, failed_only=failed_only, **options)
            if kind == "retry"
            else rc.plan_repair(source, target, reason=reason, **options)
        )
        if plan_only or not planned.compatible:
            return f"{title}Plan", planned.to_json(), 0 if planned.compatible else 3
        derived = _Derived(document, target, plan_json, workspace, reason, timeout_s, progress)
        outcome, refs = _run_derived(ledger, source_run, source, planned, derived)
    return f"{title}Outcome", _recovered(outcome, source.run_id, planned, refs), _code(outcome)


def _recovered(outcome: RunOutcome, source: str, planned: Any, refs: Any) -> dict[str, Any]:
    return {
        **outcome.to_json(),
        "sourceRunId": source,
        "reusedTasks": list(planned.reuse),
        "executedTasks": list(planned.execute),
        "artifacts": refs,
    }


def _code(outcome: RunOutcome) -> int:
    return {"succeeded": 0, "paused": 3, "cancelled": 130}.get(outcome.state, 4)


@dataclasses.dataclass(frozen=True)
class _Derived:
    """What a retry or repair run is made of, besides its source and recovery plan."""

    document: Mapping[str, Any]
    target: Plan
    plan_json: Any
    workspace: str | None
    reason: str | None
    timeout_s: float | None
    progress: Progress | None


def _run_derived(
    ledger: Ledger, source_run: Any, source: Any, planned: Any, d: _Derived
) -> tuple[RunOutcome, Any]:
    """Create and drive the derived run; returns its outcome and its artifact references."""
    from agentctl.coordinator import recovery

    check_executable(d.target)
    preflight_containers(d.target)
    clock = Clock()
    base = os.path.abspath(d.workspace or source_run.base_path or os.getcwd())
    run_id, trace_id = recovery.create_derived_run(
        ledger,
        source_run=source_run,
        source=source,
        recovery=planned,
        target=d.target,
        document=d.document,
        plan_json=d.plan_json,
        inputs=source_run.inputs or {},
        workspace=base,
        reason=d.reason,
        clock=clock,
    )
    req = DriveRequest(ledger, run_id, trace_id, d.target, base, d.timeout_s, d.progress, clock)
    outcome = outcome_or_raise(run_trio(drive_run, req))
    with ledger.read() as conn:
        return outcome, stats.artifact_list(conn, run_id)["references"]


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

    with _open(db) as ledger:
        source_run, source = recovery.load_source(ledger, source_ref)
        if source_run.state not in ("succeeded", "failed", "cancelled"):
            raise InvalidOperationError(
                f"run {source_run.run_id} is {source_run.state}; compensate needs a terminal run"
            )
        planned = rc.plan_compensation(source, load_plan(source_run), tasks=tasks_filter)
        data = planned.to_json()
        if plan_only or not planned.executable:
            return "CompensationPlan", data, 0 if planned.complete else 3
        where = workspace or source_run.base_path or os.getcwd()
        outcome = _run_compensation(ledger, source_run, planned, where, timeout_s, progress)
    result = {**outcome.to_json(), "sourceRunId": source_run.run_id, "plan": data}
    return "CompensationOutcome", result, 0 if outcome.state == "succeeded" else 4


def _run_compensation(
    ledger: Ledger,
    source_run: Any,
    planned: Any,
    workspace: str,
    timeout_s: float | None,
    progress: Progress | None,
) -> RunOutcome:
    """Compile the compensation document, create its source-linked run and drive it."""
    from agentctl.core import recovery as rc
    from agentctl.core.compiler import compile_workflow, plan_to_json

    clock = Clock()
    document = rc.compensation_document(source_run.workflow, planned)
    plan = compile_workflow(document)
    base = os.path.abspath(workspace)
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
    req = DriveRequest(ledger, run_id, trace_id, plan, base, timeout_s, progress, clock)
    outcome: RunOutcome = run_trio(drive_run, dataclasses.replace(req, compensates=links))
    return outcome
