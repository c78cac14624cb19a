"""The CLI's recovery operations over terminal runs: retry, repair and compensate.

Each plans first (effect-free, ``agentctl.core.recovery``) and creates a run only when the
plan is executable and not ``--plan-only``; it returns (envelope kind, data, exit code).

Invariant: a blocked or plan-only request creates no state (exit 3 when blocked).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agentctl.coordinator import recovery
from agentctl.coordinator.clock import Clock
from agentctl.coordinator.creation import load_plan, new_run_ids
from agentctl.coordinator.egress_preflight import preflight_egress
from agentctl.coordinator.launch import (
    check_executable,
    driving_run,
    naming_run,
    preflight_containers,
    require_workspace,
    run_exists,
    run_trio,
)
from agentctl.coordinator.service import (
    DriveRequest,
    Progress,
    RunOutcome,
    create_run,
    drive_run,
    outcome_or_raise,
)
from agentctl.core import recovery as rc
from agentctl.core.jsonvalue import JsonObject, JsonValue, as_object
from agentctl.core.plan import Plan
from agentctl.errors import CancelledRunError, InvalidOperationError
from agentctl.ledger import open_ledger
from agentctl.ledger.interface import RunLedger
from agentctl.ledger.runs import RunRecord
from agentctl.sigint import received as interrupt_received

Envelope = tuple[str, JsonObject, int]
_RECOVERY_EXIT = {"succeeded": 0, "paused": 3, "cancelled": 130}


@dataclass(frozen=True)
class Driving:
    """How a derived run is driven: the run-style flags of the command that makes it."""

    timeout_s: float | None = None
    progress: Progress | None = None
    interactive: bool = False  # ``--interactive``: no policy ``nonInteractive`` denial
    diff: bool = False  # ``--diff``: write results carry a unified diff

    def applied(self, req: DriveRequest) -> DriveRequest:
        return dataclasses.replace(
            req, progress=self.progress, interactive=self.interactive, diff=self.diff
        )


@dataclass(frozen=True)
class RecoveryRequest:
    """A retry or repair as the CLI asked for it."""

    kind: str  # retry | repair
    roots: Sequence[str]
    failed_only: bool
    restart_successful: bool
    reason: str | None


def recover(
    kind: str,
    *,
    document: Mapping[str, Any],
    target: Plan,
    plan_json: JsonObject,
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
    interactive: bool = False,
    diff: bool = False,
    inputs: JsonObject | None = None,
) -> Envelope:
    """Plan a retry or repair of ``source_ref``; run it unless planning only or blocked.
    ``inputs``: the input flags' values, laid over the source run's (None: no flag given).
    The source run's inputs lie over the target's ``spec.inputs``: an input the target adds
    has its default, one both declare keeps the value the source ran with.
    Returns (envelope kind, data, exit code): a blocked plan is exit 3 and creates nothing."""
    ask = RecoveryRequest(kind, roots, failed_only, restart_successful, reason)
    with open_ledger(db) as ledger:
        source_run, source = recovery.load_source(ledger, source_ref)
        target_defaults = document["spec"].get("inputs") or {}
        run_inputs = {**target_defaults, **(source_run.inputs or {}), **(inputs or {})}
        planned = _plan(ledger, ask, source, target, run_inputs)
        if plan_only or not planned.compatible:
            return f"{kind.capitalize()}Plan", planned.to_json(), 0 if planned.compatible else 3
        check_executable(target)
        preflight_containers(target)
        preflight_egress(target)
        base = os.path.abspath(workspace or source_run.base_path or os.getcwd())
        require_workspace(base, target.run.policy)
        derived = recovery.DerivedTarget(target, document, plan_json, run_inputs, base, reason)
        driving = Driving(timeout_s, progress, interactive, diff)
        run_id, outcome = _run_derived(ledger, source, planned, derived, Clock(), driving)
        refs = ledger.list_artifacts(run_id).to_json()["references"]
    data = _recovered(_settled(outcome, derived, db, timeout_s), planned, source.run_id, refs)
    return f"{kind.capitalize()}Outcome", data, _RECOVERY_EXIT.get(outcome.state, 4)


def _run_derived(
    ledger: RunLedger,
    source: rc.SourceRun,
    planned: rc.RecoveryPlan,
    derived: recovery.DerivedTarget,
    clock: Clock,
    driving: Driving,
) -> tuple[str, RunOutcome]:
    """Create the derived run and drive it; returns its id and outcome (see ``_settled``).
    The ids come first, as for ``run``: an interrupt at or after the creating write names the
    run it leaves (``driving_run``), one before its commit names none."""
    run_id, trace_id = new_run_ids(clock)
    with driving_run(run_id, trace_id, exists=run_exists(ledger, run_id)):
        recovery.create_derived_run(ledger, source, planned, derived, clock, (run_id, trace_id))
        req = DriveRequest(ledger, run_id, trace_id, derived.plan, derived.workspace)
        req = driving.applied(dataclasses.replace(req, timeout_s=driving.timeout_s, clock=clock))
        with naming_run(run_id):
            return run_id, run_trio(drive_run, req)


def _settled(
    outcome: RunOutcome, derived: recovery.DerivedTarget, db: str, timeout_s: float | None
) -> RunOutcome:
    """A derived run's (raising) outcome, after automatic compensation when it failed and its
    workflow asks for it, as any failed terminal run (``api.auto_compensated``); called once
    the ledger is closed, since the compensation opens its own."""
    if rc.compensates_automatically(derived.plan, outcome.state, "execute"):
        outcome = compensate_after_failure(outcome, db, derived.workspace, timeout_s)
    return outcome_or_raise(outcome)


def compensate_after_failure(
    outcome: RunOutcome, db: str, workspace: str, timeout_s: float | None
) -> RunOutcome:
    """``compensation.onFailure: automatic``: run the inverse actions of a failed run; the
    outcome's errors name the compensation run and how it ended.

    A SIGINT/SIGTERM is the user's stop, as during the compensation's own drive (which it
    cancels): one that came once the failed run was settled starts no compensation, and one
    landing outside the compensation's drive ends it there. Either way the failed run stays
    the command's outcome (exit 4, naming the run), never a bare "interrupted"."""
    try:
        return _compensated_after_failure(outcome, db, workspace, timeout_s)
    except KeyboardInterrupt:
        left = f"`agentctl compensate {outcome.run_id} --plan` shows what is left"
        return _with_note(
            outcome, f"automatic compensation interrupted (SIGINT or SIGTERM); {left}"
        )


def _compensated_after_failure(
    outcome: RunOutcome, db: str, workspace: str, timeout_s: float | None
) -> RunOutcome:
    later = f"`agentctl compensate {outcome.run_id}` runs what is left"
    if interrupt_received():
        note = f"automatic compensation not started: interrupted (SIGINT or SIGTERM); {later}"
        return _with_note(outcome, note)
    try:
        name, data, _code = compensate(
            outcome.run_id,
            db=db,
            tasks_filter=None,
            plan_only=False,
            workspace=workspace,
            timeout_s=timeout_s,
            raising=False,
        )
    except CancelledRunError as exc:  # ``driving_run``: it names the compensation run it left
        later = f"`agentctl inspect {exc.run_id}` shows where compensation run {exc.run_id} stopped"
        note = f"automatic compensation interrupted (SIGINT or SIGTERM); {later}"
        return _with_note(outcome, note)
    note = (
        f"automatic compensation {data.get('runId')} ended {data.get('state')}"
        if name == "CompensationOutcome"
        else "automatic compensation had nothing executable to run"
    )
    return _with_note(outcome, note)


def _with_note(outcome: RunOutcome, note: str) -> RunOutcome:
    return dataclasses.replace(outcome, errors={**outcome.errors, "compensation": note})


def _plan(
    ledger: RunLedger,
    ask: RecoveryRequest,
    source: rc.SourceRun,
    target: Plan,
    inputs: Mapping[str, JsonValue],
) -> rc.RecoveryPlan:
    ok = recovery.artifact_checker(ledger)
    if ask.kind == "retry":
        return rc.plan_retry(
            source,
            target,
            failed_only=ask.failed_only,
            roots=ask.roots,
            restart_successful=ask.restart_successful,
            artifact_ok=ok,
            reason=ask.reason,
            inputs=inputs,
        )
    return rc.plan_repair(
        source,
        target,
        roots=ask.roots,
        restart_successful=ask.restart_successful,
        artifact_ok=ok,
        reason=ask.reason,
        inputs=inputs,
    )


def continued(data: JsonObject, outcome: RunOutcome, db: str) -> tuple[JsonObject, int]:
    """A retry/repair outcome whose paused run was carried on (``--interactive``): the run's
    state and output now, and its artifacts as they are now; and the exit code they mean."""
    with open_ledger(db, verify=False) as ledger:
        refs = ledger.list_artifacts(outcome.run_id).to_json()["references"]
    merged: JsonObject = {**data, "state": outcome.state, "output": outcome.output}
    merged["artifacts"] = refs
    return merged, _RECOVERY_EXIT.get(outcome.state, 4)


def _recovered(
    outcome: RunOutcome, planned: rc.RecoveryPlan, source_run_id: str, refs: JsonValue
) -> JsonObject:
    return {
        **outcome.to_json(),
        "sourceRunId": source_run_id,
        "reusedTasks": list(planned.reuse),
        "executedTasks": list(planned.execute),
        "artifacts": refs,
    }


def compensate(
    source_ref: str,
    *,
    db: str,
    tasks_filter: Sequence[str] | None,
    plan_only: bool,
    workspace: str | None,
    timeout_s: float | None,
    progress: Progress | None = None,
    diff: bool = False,
    raising: bool = True,
) -> Envelope:
    """Plan (and run) the declared inverse actions of a terminal run's confirmed mutations;
    a compensation run ending failed raises unless not ``raising`` (``_compensation_outcome``)."""
    clock = Clock()
    with open_ledger(db) as ledger:
        source_run, source = recovery.load_source(ledger, source_ref)
        # Every invocation has its own trace (spec/cli.md §1): the refusal names it, as
        # resume's do; the compensation run, when one is created, carries it.
        trace_id = clock.new_id("trace")
        if source_run.state not in ("succeeded", "failed", "cancelled"):
            raise InvalidOperationError(
                f"run {source_run.run_id} is {source_run.state}; compensate needs a terminal run",
                run_id=source_run.run_id,
                trace_id=trace_id,
            )
        source_plan = load_plan(source_run)
        planned = rc.plan_compensation(source, source_plan, tasks=tasks_filter)
        data = planned.to_json()
        if plan_only or not planned.executable:
            return "CompensationPlan", data, 0 if planned.complete else 3
        base = os.path.abspath(workspace or source_run.base_path or os.getcwd())
        require_workspace(base, source_plan.run.policy)
        driving = Driving(timeout_s, progress, diff=diff)
        # An interrupt outside the drive names the compensation run it left (exit 130), from
        # its creating write on (the ids minted first, as for ``run``).
        ids = new_run_ids(clock, trace_id)
        with driving_run(*ids, exists=run_exists(ledger, ids[0])):
            created = _create_compensation(ledger, source_run, planned, base, clock, ids=ids)
            outcome = _run_compensation(ledger, created, planned, base, driving, clock)
            done = _compensated_tasks(ledger, outcome.run_id, planned)
    return _compensation_outcome(outcome, source_run.run_id, data, done, raising)


def _compensation_outcome(
    outcome: RunOutcome, source_run_id: str, plan: JsonObject, done: list[str], raising: bool
) -> Envelope:
    """A compensation run's ``CompensationOutcome``: ``done``, the source tasks compensated.
    Ending failed (or blocked) it raises, as any run failing mid-drive does (spec/cli.md §2:
    an error envelope naming the run and its trace; ``outcome_or_raise``), its details the
    source run and ``done``; not ``raising`` (an automatic compensation, whose failure the
    failed run's own error reports), it is returned."""
    compensated: list[JsonValue] = [*done]
    if raising:
        outcome_or_raise(outcome, {"sourceRunId": source_run_id, "compensatedTasks": compensated})
    result = {**outcome.to_json(), "sourceRunId": source_run_id, "plan": plan}
    result["compensatedTasks"] = compensated
    return "CompensationOutcome", result, _RECOVERY_EXIT.get(outcome.state, 4)


def compensation_continued(
    data: JsonObject, outcome: RunOutcome, db: str
) -> tuple[JsonObject, int]:
    """A compensation outcome whose paused run was carried on (``--interactive``): the run's
    state and output now, the source tasks compensated by now, and the exit code they mean."""
    with open_ledger(db, verify=False) as ledger:
        states = {t.task_id: t.state for t in ledger.inspect_run(outcome.run_id).tasks}
    steps = as_object(data.get("plan")).get("tasks")
    done: list[JsonValue] = [
        as_object(step)["sourceTaskId"]
        for step in (steps if isinstance(steps, list) else [])
        if states.get(str(as_object(step)["compensationTaskId"])) == "succeeded"
    ]
    merged: JsonObject = {**data, "state": outcome.state, "output": outcome.output}
    merged["compensatedTasks"] = done
    return merged, _RECOVERY_EXIT.get(outcome.state, 4)


def compensation_links(ledger: RunLedger, run: RunRecord) -> dict[str, tuple[str, ...]]:
    """For a compensation run being resumed: the source effects each of its inverses
    compensates, planned again from its source run, so that an inverse confirmed after a
    pause (an approval) records ``compensated`` on them as one confirmed in the first drive
    does. Effects already compensated are no longer planned; their inverses have finished.
    The open compensation runs are left out of the source: ``run`` is one of them, and its own
    inverses must not block their links."""
    if run.mode != "compensation" or run.source_run_id is None:
        return {}
    source_run, source = recovery.load_source(ledger, run.source_run_id)
    source = dataclasses.replace(source, open_inverses=())
    planned = rc.plan_compensation(source, load_plan(source_run))
    return {s.compensation_task_id: s.source_effect_ids for s in planned.steps}


def _compensated_tasks(ledger: RunLedger, run_id: str, planned: rc.CompensationPlan) -> list[str]:
    """Source tasks whose inverse succeeded in compensation run ``run_id`` (plan order)."""
    states = {t.task_id: t.state for t in ledger.inspect_run(run_id).tasks}
    return [
        step.source_task_id
        for step in planned.steps
        if states.get(step.compensation_task_id) == "succeeded"
    ]


def queue_compensation(ledger: RunLedger, run_id: str) -> str | None:
    """``compensation.onFailure: automatic`` for a run a ``serve`` drove to failure: its
    compensation run, queued (as ``submit`` queues) for any ``serve`` to claim and drive under
    a lease like any submitted run; its id, or None when nothing is executable (as
    ``compensate_after_failure``, which then creates nothing either)."""
    source_run, source = recovery.load_source(ledger, run_id)
    planned = rc.plan_compensation(source, load_plan(source_run))
    if not planned.executable:
        return None
    base = source_run.base_path or os.getcwd()
    return _create_compensation(ledger, source_run, planned, base, Clock(), queued=True).run_id


@dataclass(frozen=True)
class _Created:
    """A compensation run just created: its compiled plan, id and trace id."""

    plan: Plan
    run_id: str
    trace_id: str


def _create_compensation(
    ledger: RunLedger,
    source_run: RunRecord,
    planned: rc.CompensationPlan,
    base: str,
    clock: Clock,
    *,
    queued: bool = False,
    ids: tuple[str, str] | None = None,
) -> _Created:
    """Create the compensation run of ``planned``: its plan, run id and trace id (``ids``: the
    ones this invocation minted already, else new ones)."""
    from agentctl.core.compiler import compile_workflow

    document = rc.compensation_document(source_run.workflow, planned)
    plan = compile_workflow(document, bindings=rc.step_bindings(planned))
    run_id, trace = create_run(
        ledger,
        plan=plan,
        document=document,
        inputs=source_run.inputs or {},
        workspace=base,
        clock=clock,
        mode="compensation",
        source_run_id=source_run.run_id,
        queued=queued,
        ids=ids,
    )
    return _Created(plan, run_id, trace)


def _run_compensation(
    ledger: RunLedger,
    created: _Created,
    planned: rc.CompensationPlan,
    base: str,
    driving: Driving,
    clock: Clock,
) -> RunOutcome:
    """Drive the compensation run ``created`` (with the invocation's ``clock``)."""
    links = {s.compensation_task_id: s.source_effect_ids for s in planned.steps}
    req = DriveRequest(
        ledger, created.run_id, created.trace_id, created.plan, base, driving.timeout_s, clock=clock
    )
    req = driving.applied(dataclasses.replace(req, compensates=links))
    outcome: RunOutcome = run_trio(drive_run, req)
    return outcome
