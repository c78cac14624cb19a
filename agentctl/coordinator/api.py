"""The synchronous operations the CLI calls: run, resume, cancel, inspect, list, effects.

Each function opens the ledger, does one job and returns JSON-ready data or a ``RunOutcome``.
Invariant: ``run`` compiles and validates inputs before the database is even opened, so a
bad workflow or bad input never creates state.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from agentctl.coordinator.clock import Clock
from agentctl.coordinator.creation import load_plan, new_run_ids
from agentctl.coordinator.credentials import may_need_secrets, preflight_credentials
from agentctl.coordinator.egress_preflight import preflight_egress
from agentctl.coordinator.events import current_sink
from agentctl.coordinator.launch import check_executable as check_executable
from agentctl.coordinator.launch import (
    driving_run,
    naming_run,
    refuse_before_state,
    require_workspace,
    run_exists,
    run_trio,
)
from agentctl.coordinator.live import live_from
from agentctl.coordinator.orphans import reap_run_containers
from agentctl.coordinator.reconcile import reconcile, with_reconcile_approvals
from agentctl.coordinator.service import (
    DriveRequest,
    Progress,
    RunOutcome,
    check_resumable,
    create_run,
    drive_run,
    outcome_or_raise,
)
from agentctl.coordinator.streaming import StreamListener
from agentctl.coordinator.workerproc import prestart_workers
from agentctl.coordinator.workerstart import Prestarted
from agentctl.core.compiler.diagnostics import Locator
from agentctl.core.jsonvalue import JsonObject, JsonValue
from agentctl.core.plan import Plan, compensates_automatically
from agentctl.core.runinputs import resolve_inputs as resolve_inputs
from agentctl.core.states import is_terminal_run
from agentctl.errors import AgentctlError, BlockedError
from agentctl.ledger import open_ledger
from agentctl.ledger.interface import RunLedger
from agentctl.ledger.model import ReconcileRequest
from agentctl.sigint import note_received

if TYPE_CHECKING:  # a run never reports: the report's read models load with ``run_report``
    from pathlib import Path

    from agentctl.ledger.report import RunReport
    from agentctl.ledger.runs import RunHead, RunRecord

DEFAULT_DB = ".agentctl/runtime.db"


def start_run(
    *,
    document: Mapping[str, JsonValue],
    plan: Plan,
    inputs: Mapping[str, JsonValue],
    db: str,
    workspace: str,
    timeout_s: float | None,
    progress: Progress | None = None,
    on_created: Callable[[str, str], object] | None = None,
    check_mode: bool = False,
    diff: bool = False,
    file: str | None = None,
    locate: Locator | None = None,
    on_stream: StreamListener | None = None,
    early: Prestarted | None = None,
    interactive: bool = False,
) -> RunOutcome:
    """Create the run and drive it; ``document`` is what ``plan`` was compiled from, unchanged
    (``create_run`` stores the compile's text of it)."""
    clock, root = Clock(), os.path.abspath(workspace)
    refuse_before_state(plan, root, preview=check_mode, file=file, locate=locate)
    prestarting = prestart_workers(plan, preview=check_mode, early=early)  # overlaps the open
    with prestarting as prestarted, open_ledger(db) as ledger:
        run_id, trace_id = new_run_ids(clock)  # first: an interrupt at the write names it
        with driving_run(run_id, trace_id, exists=run_exists(ledger, run_id)):
            _created(
                ledger, plan, document, inputs, root, clock, check_mode, ids=(run_id, trace_id)
            )
            req = DriveRequest(ledger, run_id, trace_id, plan, root, timeout_s, progress, clock)
            req = dataclasses.replace(req, check_mode=check_mode, diff=diff, on_stream=on_stream)
            req = dataclasses.replace(req, prestarted=prestarted, interactive=interactive)
            with naming_run(run_id):
                if on_created is not None:
                    on_created(run_id, trace_id)
                outcome = run_trio(drive_run, req)
    return _settled(outcome, plan, db, root, timeout_s)


def _created(
    ledger: RunLedger,
    plan: Plan,
    document: Mapping[str, JsonValue],
    inputs: Mapping[str, JsonValue],
    root: str,
    clock: Clock,
    check_mode: bool = False,
    queued: bool = False,
    ids: tuple[str, str] | None = None,
) -> tuple[str, str]:
    """Create the run (``create_run``; ``ids``: its run and trace ids, minted already): a
    ``run --check`` preview, queued for a ``serve``, or to be driven now."""
    mode = "check" if check_mode else "execute"
    return create_run(
        ledger,
        ids=ids,
        plan=plan,
        document=document,
        inputs=inputs,
        workspace=root,
        clock=clock,
        mode=mode,
        queued=queued,
    )


def submit_run(
    *,
    document: Mapping[str, JsonValue],
    plan: Plan,
    inputs: Mapping[str, JsonValue],
    db: str,
    workspace: str,
) -> JsonObject:
    """Record the run as queued for a ``serve`` to drive; nothing executes here. ``document``
    is the very object ``plan`` was compiled from, unchanged since (as for ``start_run``).

    The egress URL rules are applied here, before anything is recorded, as ``run`` does: a
    plan its own policy forbids is refused now, not when a serve is halfway through it. Names
    are not resolved (the serve's host may see another DNS), nor credentials or images
    checked (they belong to whichever host drives the run)."""
    preflight_egress(plan, resolve=False)
    clock, root = Clock(), os.path.abspath(workspace)
    with open_ledger(db) as ledger:
        run_id, trace_id = _created(ledger, plan, document, inputs, root, clock, queued=True)
    return {"runId": run_id, "traceId": trace_id, "state": "queued"}


def _settled(
    outcome: RunOutcome, plan: Plan, db: str, root: str, timeout_s: float | None
) -> RunOutcome:
    """A new run's outcome, after automatic compensation if the workflow asks for it."""
    return outcome_or_raise(auto_compensated(outcome, plan, db, root, timeout_s))


def auto_compensated(
    outcome: RunOutcome,
    plan: Plan,
    db: str,
    root: str,
    timeout_s: float | None,
    mode: str = "execute",
) -> RunOutcome:
    """``outcome``, after automatic compensation when the run ended failed and its workflow
    says ``compensation.onFailure: automatic`` — whichever command drove it to that end (run,
    resume, fork, retry, repair): spec/cli.md §5 and the compensation guide start it "after a
    failed terminal run", never after cancellation. A compensation run is never compensated
    in turn."""
    if compensates_automatically(plan, outcome.state, mode):
        # Imported here: repair, retry and compensation are not on a run's start-up path.
        try:
            from agentctl.coordinator.remedy import compensate_after_failure
        except KeyboardInterrupt:  # the user's stop: the failed run stands, nothing starts
            note_received()
            from agentctl.coordinator.remedy import compensate_after_failure

        return compensate_after_failure(outcome, db, root, timeout_s)
    return outcome


def _claim(ledger: RunLedger, plan: Plan, run_id: str, clock: Clock, trace_id: str) -> RunHead:
    """``check_resumable``; a refusal first shows, on the event stream (``--output jsonl``),
    what it committed — the effects a dead coordinator left ``started`` are ``uncertain`` now,
    their tasks waiting — as a drive shows its events. Claimed or refused for what a crash
    left, the run has no live driver: the containers its dead one left running are removed
    (``orphans``) before anyone reconciles their effects or the drive starts again."""
    try:
        run = check_resumable(ledger, run_id, clock, trace_id)
    except BlockedError:
        reap_run_containers(plan, run_id)
        sink = current_sink()
        if sink is not None:
            tap = sink.tap(run_id, trace_id)
            tap.collect(ledger)
            tap.flush()
        raise
    reap_run_containers(plan, run.run_id)
    return run


def resume(
    run_ref: str,
    *,
    db: str,
    workspace: str | None,
    timeout_s: float | None,
    progress: Progress | None = None,
    diff: bool = False,
    on_stream: StreamListener | None = None,
    interactive: bool = False,
    on_created: Callable[[str, str], object] | None = None,
) -> RunOutcome:
    """Continue a run with the plan it was created with (loaded, not compiled again);
    ``on_created(run id, trace id)`` once the run is claimed, as ``fork`` announces its run."""
    clock = Clock()
    with open_ledger(db) as ledger:
        found = ledger.find_run(run_ref)
        trace_id = clock.new_id("trace")  # each invocation's own, named by its refusals too
        with driving_run(found.run_id, trace_id), naming_run(found.run_id, trace_id):
            plan = load_plan(found)
            base = os.path.abspath(workspace or found.base_path or os.getcwd())
            _preflight_resume(ledger, found, plan, base)
            # A requested cancellation is honoured by the drive, not answered with "paused".
            asks = not interactive and not found.cancellation_requested
            waiting = asks and _awaits_approval(ledger, found, plan)
            run = None if waiting else _claim(ledger, plan, found.run_id, clock, trace_id)
            if on_created is not None:
                on_created(found.run_id, trace_id)
            if run is None:  # still waiting: nothing claimed, nothing driven
                return RunOutcome(found.run_id, trace_id, "paused", None)
            req = DriveRequest(ledger, run.run_id, trace_id, plan, base, timeout_s, progress, clock)
            req = dataclasses.replace(
                req, check_mode=run.mode == "check", diff=diff, on_stream=on_stream
            )
            links = _compensation_links(ledger, run)
            req = dataclasses.replace(req, interactive=interactive, compensates=links)
            outcome = run_trio(drive_run, req)
            rejected = _failed_by_rejection(ledger, outcome)
    # After the ledger is closed, as ``run`` does: the compensation run opens its own.
    outcome = auto_compensated(outcome, plan, db, base, timeout_s, found.mode)
    return outcome if rejected else outcome_or_raise(outcome)


def _preflight_resume(ledger: RunLedger, found: RunRecord, plan: Plan, base: str) -> None:
    """Before the lease is taken: a workspace gone, a missing key or a refused endpoint leaves
    the run as it was. A finished run needs none: the claim refuses it for what it is."""
    if not is_terminal_run(found.state):
        require_workspace(base, plan.run.policy)
        remaining = _unfinished(ledger, found.run_id) if may_need_secrets(plan) else None
        preflight_credentials(plan, base, preview=found.mode == "check", task_ids=remaining)
        preflight_egress(plan, resolve=found.mode != "check")


def _awaits_approval(ledger: RunLedger, found: RunRecord, plan: Plan) -> bool:
    """Whether a paused run is still waiting for an operator: the first of its approval tasks
    (in compiled order) that is not approved has a pending approval, not a rejection that
    ends the run (a rejected task under ``failure: continue`` does not).

    Then ``resume`` returns ``paused`` (exit 3) at once and changes nothing — no lease, no
    state, no audit — and runs nothing, not even an approved effect beside the undecided one
    (spec/cli.md §5: for each waiting task, "still waiting ⇒ return paused"). An unresolved
    effect is judged first, by the claim, whose refusal comes before this answer. (With
    ``--interactive`` the drive asks instead: not called then.)"""
    if found.state != "paused":
        return False
    run_id = found.run_id
    pending = {a.task_id for a in ledger.list_approvals(run_id).approvals}
    if not pending or ledger.unresolved_effects(run_id):
        return False
    # The operator's decisions as the drive reads them (``Live.decision``): cancelled = rejected.
    live = live_from(ledger.load_live(run_id))
    for task_id in plan.order:
        if task_id in pending:
            return True
        # The drive fails a rejected task first; under `failure: stop` that ends the run
        # (exit 4), under `continue` it does not, so the undecided approval still holds it.
        if live.decision(task_id) == "cancelled" and plan.task(task_id).failure == "stop":
            return False
    return False


def _compensation_links(ledger: RunLedger, run: RunHead) -> dict[str, tuple[str, ...]]:
    """What a resumed compensation run's inverses compensate (``remedy``); {} for others."""
    if run.mode != "compensation":
        return {}
    # Imported here: repair, retry and compensation are not on a run's start-up path.
    from agentctl.coordinator.remedy import compensation_links

    return compensation_links(ledger, ledger.find_run(run.run_id))


def _unfinished(ledger: RunLedger, run_id: str) -> set[str]:
    """The run's tasks that neither succeeded nor were skipped: a resume needs secrets for
    these alone (spec/cli.md §5), a finished task's provider or peer is never called again."""
    return {t.task_id for t in ledger.load_live(run_id).tasks if t.state not in _FINISHED}


_FINISHED = frozenset({"succeeded", "skipped"})


def _failed_by_rejection(ledger: RunLedger, outcome: RunOutcome) -> bool:
    """Whether the run failed only because approvals were rejected (their tasks fail).

    Such a resume prints the failed ``RunOutcome`` (exit 4) rather than an error, as the
    original does: resolving a rejection is the resume's own step, not a failure mid-drive
    (spec/cli.md §5; its acceptance reads ``data.state == "failed"`` from that resume). The
    approvals are read only for a failed run, so a successful resume pays nothing."""
    if outcome.state != "failed":
        return False
    failed = {task for task, error in outcome.errors.items() if error}
    rejected = {a.task_id for a in ledger.list_approvals(outcome.run_id, "rejected").approvals}
    return bool(failed) and failed <= rejected


def replay(run_ref: str, *, db: str) -> RunOutcome:
    """A recorded replay of a terminal run: nothing executes."""
    from agentctl.coordinator import lineage

    with open_ledger(db) as ledger:
        # A replay prints its outcome with the source's exit code, even when it failed.
        return lineage.replay(ledger, run_ref, Clock())


def fork(
    run_ref: str,
    *,
    db: str,
    workspace: str | None,
    timeout_s: float | None,
    progress: Progress | None = None,
    on_created: Callable[[str, str], object] | None = None,
    diff: bool = False,
    interactive: bool = False,
) -> RunOutcome:
    """A new run linked to the source that executes everything again with fresh effects."""
    from agentctl.coordinator import lineage

    clock = Clock()
    with open_ledger(db) as ledger:
        source = ledger.find_run(run_ref)
        plan = load_plan(source)
        base = os.path.abspath(workspace or source.base_path or os.getcwd())
        refuse_before_state(plan, base, preview=False)
        run_id, trace_id = clock.new_id("fork"), clock.new_id("trace")  # as ``start_run``
        with driving_run(run_id, trace_id, exists=run_exists(ledger, run_id)):
            lineage.new_fork(ledger, source, plan, clock, (run_id, trace_id))
            req = DriveRequest(ledger, run_id, trace_id, plan, base, timeout_s, progress, clock)
            req = dataclasses.replace(req, diff=diff, interactive=interactive)
            with naming_run(run_id):
                if on_created is not None:
                    on_created(run_id, trace_id)
                outcome = run_trio(drive_run, req)
    return outcome_or_raise(auto_compensated(outcome, plan, db, base, timeout_s))


def cancel(run_ref: str, *, db: str) -> tuple[JsonObject, str]:
    """Request cancellation: the ``Cancellation`` data of spec/cli.md and the run's state
    after it (``cancelled`` at once for a queued or crashed run nothing can drive, or one
    whose driver already honoured the flag; else still ``running`` or ``paused``, the flag
    left for its driver or the next ``resume``)."""
    clock = Clock()
    trace_id = clock.new_id("trace")  # the request's own trace names what it writes
    try:
        with open_ledger(db) as ledger:
            run = ledger.request_cancel(run_ref, clock.now(), trace_id=trace_id)
            if run.state == "cancelled":  # over: none of its containers may run on
                reap_run_containers(load_plan(run), run.run_id)
    except AgentctlError as exc:
        # A refusal about a run that exists (one already ended) names this invocation's
        # trace beside the run, as resume's and replay's do; an unknown run names neither.
        if exc.run_id is not None and exc.trace_id is None:
            exc.trace_id = trace_id
        raise
    return {"runId": run.run_id, "requested": True}, run.state


def list_runs(*, db: str, state: str | None, limit: int, workflow: str | None = None) -> JsonObject:
    with open_ledger(db, verify=False) as ledger:
        return ledger.list_runs(state=state, limit=limit, workflow=workflow).to_json()


def run_report(run_ref: str, *, db: str, html: Path | None = None) -> RunReport:
    """What the human ``inspect`` and its HTML report show (one read snapshot); ``html``, the
    report file to be written, is refused first when it is the ledger's own state."""
    with open_ledger(db, verify=False) as ledger:
        if html is not None:
            ledger.refuse_own_state(html, "write the report")
        return with_reconcile_approvals(ledger, ledger.run_report(run_ref))


def effects_list(run_ref: str, *, db: str, task: str | None) -> JsonObject:
    with open_ledger(db, verify=False) as ledger:
        return ledger.list_effects(run_ref, task).to_json()


def effects_inspect(effect_id: str, *, db: str) -> JsonObject:
    with open_ledger(db, verify=False) as ledger:
        return ledger.inspect_effect(ledger.find_effect_id(effect_id)).to_json()


def effects_reconcile(
    effect_id: str,
    *,
    db: str,
    status: str,
    reason: str,
    actor: str,
    evidence: JsonValue,
    result: JsonValue,
    compensation_effect_id: str | None,
    result_schema: JsonValue = None,
    approved: bool = False,
) -> JsonObject:
    """Append an operator's reconciliation (``coordinator.reconcile``); ``result_schema``:
    ``--result-schema-file``'s schema, ``approved``: ``--approved``."""
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
        result_schema=result_schema,
    )
    return reconcile(request, approved=approved, db=db)
