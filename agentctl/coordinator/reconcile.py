"""An operator's reconciliation of one effect (``agentctl effects reconcile``, spec/cli.md §4):
the checks the ledger cannot make, then one guarded write.

Invariants:
- nothing is recorded unless every check passes, in this order: the result schema itself
  (exit 2), the result against it (whatever the status, as in the original), for an applied
  result an extension's ``outputSchema``, a model call's answer shape, the output contract of
  a task that is not an agent (judged by ``execute.settle_recorded``, the very function
  ``resume`` delivers it through: what it would fail there is refused here) and an agent
  tool's ``outputSchema`` (judging the result as the agent shapes it for the model:
  ``core.tool_result``), then the run's policy for capability ``effect_reconciliation``
  (``core.policy.authorize_reconciliation``; exit 4 on each);
- policy is the run's compiled policy as stored with the run, never a workflow file on disk,
  and the effect is judged by the name the run judged it by;
- the ledger checks the status rules inside the write's transaction, and the authorization and
  result schema commit with the record (in its ``effect.reconciled`` audit event);
- a model call's price is read from the run's stored plan (``runtime.pricing``, as when the
  call was reserved), so the ledger settles an applied answer's usage at it, as it settles a
  call the coordinator saw answered.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable

from agentctl.coordinator.creation import load_plan
from agentctl.coordinator.execute import settle_recorded
from agentctl.coordinator.launch import naming_run
from agentctl.coordinator.orphans import reap_effect_containers
from agentctl.coordinator.workerproc import reap_stale_workers
from agentctl.core import jsonschema, registry
from agentctl.core.extension import applied_result_problems
from agentctl.core.jsonvalue import JsonObject, JsonValue, as_object
from agentctl.core.model_reply import applied_reply_problems
from agentctl.core.plan import Plan
from agentctl.core.policy import (
    ReconcileAuthorization,
    ReconcileSubject,
    ToolApproval,
    authorize_reconciliation,
    reconciliation_needs_approval,
    tool_approval,
)
from agentctl.core.pricing import price_for
from agentctl.core.tool_result import output_problems, shaped_output
from agentctl.errors import InvalidOperationError, ValidationError
from agentctl.ledger import open_ledger
from agentctl.ledger.effects import EffectRecord
from agentctl.ledger.interface import RunLedger
from agentctl.ledger.model import ReconcileRequest
from agentctl.ledger.report import RunReport
from agentctl.ledger.stats import EffectInspection


def reconcile(request: ReconcileRequest, *, approved: bool, db: str) -> JsonObject:
    """Append ``request`` to the effect's history; the ``EffectReconciliation`` record, with
    the authorization policy gave and the result schema (null when none was given). ``approved``:
    the operator's ``--approved``."""
    _check_request(request)
    with open_ledger(db) as ledger:
        request = _resolved(ledger, request)
        seen = ledger.inspect_effect(request.effect_id)
        # A refusal, the runtime's checks' or the store's, names the effect's run and this
        # invocation's trace, as every error of a command about an existing run does.
        with naming_run(seen.effect.run_id, request.trace_id):
            plan = load_plan(ledger.get_run(seen.effect.run_id))
            _check_result(seen.effect, request)
            _check_task_output(plan, seen.effect, request)
            output = _tool_output(plan, seen, request)
            authorization = _authorize(plan, seen, request.actor, approved)
            granted = dataclasses.replace(
                request,
                authorization=authorization.to_json(),
                tool_output=output,
                model_rates=_model_rates(plan, seen.effect),
            )
            # A worker its dead coordinator left may still be executing the effect: killed
            # first, so nothing happens after the verdict that the verdict did not see.
            reap_stale_workers(ledger.location)
            if _abandoned(ledger, seen.effect, granted.now):  # nor a container it left
                reap_effect_containers(plan, seen.effect.effect_id)
            data = ledger.reconcile_effect(granted).to_json()
    data["authorization"] = authorization.to_json()
    return data


def _abandoned(ledger: RunLedger, effect: EffectRecord, now: str) -> bool:
    """Whether nothing may be executing ``effect`` any more: judged uncertain, or started
    under a driver that is gone at ``now`` — a dead local process, or a ``serve`` whose lease
    expired — as the ledger judges it at the same instant (it refuses a live driver's)."""
    if effect.status == "started":
        return not ledger.has_live_driver(effect.run_id, now)
    return effect.status == "uncertain"


def _check_request(request: ReconcileRequest) -> None:
    """The rules of the request alone, refused before the database is even opened (exit 4,
    as the ledger's own checks of them, which stay the guard of every other caller): the flag
    each status needs, and none it would ignore."""
    if request.status == "compensated" and not request.compensation_effect_id:
        raise InvalidOperationError(
            "--status compensated needs --compensation-effect ID, the confirmed effect that "
            "undid this one (of its run, or of a compensation run sourced from it); "
            "nothing was recorded"
        )
    if request.status != "compensated" and request.compensation_effect_id:
        raise InvalidOperationError(
            f"--compensation-effect names the effect that undid this one: it goes with "
            f"--status compensated, not {request.status}; nothing was recorded"
        )
    if request.status == "applied" and request.result is None:
        raise InvalidOperationError(
            "--status applied needs --result-file, the result the task carries on with "
            "(JSON, as the effect would have returned it); nothing was recorded"
        )
    if request.result_schema is not None:
        _check_schema(request.result_schema)


def _resolved(ledger: RunLedger, request: ReconcileRequest) -> ReconcileRequest:
    """``request`` with its effect ids whole (an operator may give a unique prefix)."""
    other = request.compensation_effect_id
    return dataclasses.replace(
        request,
        effect_id=ledger.find_effect_id(request.effect_id),
        compensation_effect_id=ledger.find_effect_id(other) if other else None,
    )


def _model_rates(plan: Plan, effect: EffectRecord) -> dict[str, int] | None:
    """The price of a model call's ``provider/model`` (its recorded input names both, its
    operation the provider's kind); None: not a model call, or the model has no price."""
    kind = registry.provider_kind(effect.operation)  # legacy ``model.<kind>`` names too
    if kind is None:
        return None
    recorded = as_object(effect.request) if isinstance(effect.request, dict) else {}
    provider, model = str(recorded.get("provider")), str(recorded.get("model"))
    return price_for(plan.run.pricing, provider, kind, model)


def _check_schema(schema: object) -> None:
    problems = jsonschema.check_schema(schema)
    if problems:
        raise ValidationError(
            f"--result-schema-file is not a usable JSON Schema: {'; '.join(problems[:3])}; "
            "nothing was recorded"
        )


def _check_result(effect: EffectRecord, r: ReconcileRequest) -> None:
    """Refuse a result that breaks the operator's schema or, applied, what the resumed task
    takes it for: an extension's declared ``outputSchema``, a model call's answer shape."""
    if r.result is None:
        return
    if r.result_schema is not None:
        problems = jsonschema.validate(r.result, r.result_schema)
        if problems:
            raise InvalidOperationError(
                f"the result breaks --result-schema-file: {'; '.join(problems[:3])}; "
                "nothing was recorded"
            )
    if r.status == "applied":
        problems = applied_result_problems(effect.operation, effect.request, r.result)
        if problems:
            raise InvalidOperationError(
                f"the result breaks the outputSchema of effect {effect.effect_id} "
                f"({effect.operation}): {'; '.join(problems[:3])}; nothing was recorded"
            )
        problems = applied_reply_problems(effect.operation, r.result)
        if problems:
            raise InvalidOperationError(
                f"the result is not a model answer {{finish, text, toolCalls, usage}} "
                f"({effect.operation}): {'; '.join(problems[:3])}; nothing was recorded"
            )


def _check_task_output(plan: Plan, effect: EffectRecord, r: ReconcileRequest) -> None:
    """Refuse an applied result the resumed task would fail on: ``resume`` delivers it as the
    task's output through ``settle_recorded``, held to the task's output contract (its
    ``outputSchema``; without one, a JSON object). Recorded, it could not be taken back (records
    are append-only) and the next ``resume`` would fail the run for good. An agent's effects are
    its calls, not its output (its loop checks what it delivers; its calls are judged above)."""
    task = plan.tasks[plan.index[effect.task_id]] if effect.task_id in plan.index else None
    if r.status != "applied" or r.result is None or task is None or task.kind == "agent":
        return
    settled = settle_recorded(task, effect.attempt, effect, r.result)
    if settled.state == "failed":
        raise InvalidOperationError(
            f"the result breaks what task {task.id} delivers (effect {effect.effect_id}, "
            f"{effect.operation}), so resume would fail the run: {settled.error}; "
            "nothing was recorded"
        )


def _tool_output(plan: Plan, seen: EffectInspection, r: ReconcileRequest) -> JsonValue:
    """What the model receives for an applied result of an agent's tool call (the result as the
    tool's kind shapes it; it finishes the call's row), refused when it breaks the tool's
    ``outputSchema``: the resumed task would fail on it. None: not an applied tool call."""
    declared = _declared_tool(plan, seen.effect.task_id, seen.tool)
    if r.status != "applied" or r.result is None or declared is None:
        return None
    output = shaped_output(str(declared.get("kind")), seen.tool_input, r.result)
    problems = output_problems(declared, output)
    if problems:
        raise InvalidOperationError(
            f"the result breaks the outputSchema of tool {seen.tool} (effect "
            f"{seen.effect.effect_id}, {seen.effect.operation}) once shaped as the model "
            f"would receive it: {'; '.join(problems[:3])}; nothing was recorded"
        )
    return output


def authorize(
    ledger: RunLedger, seen: EffectInspection, actor: str, approved: bool
) -> ReconcileAuthorization:
    """Policy's leave (capability ``effect_reconciliation``) to reconcile ``seen``'s effect,
    or ``PolicyDeniedError``; ``continue-remote`` asks it too, before observing anything."""
    return _authorize(load_plan(ledger.get_run(seen.effect.run_id)), seen, actor, approved)


def _authorize(
    plan: Plan, seen: EffectInspection, actor: str, approved: bool
) -> ReconcileAuthorization:
    subject = _subject(plan, seen)
    return authorize_reconciliation(plan.run.policy, subject, actor=actor, approved=approved)


def _subject(plan: Plan, seen: EffectInspection) -> ReconcileSubject:
    effect = seen.effect
    return ReconcileSubject(
        operation=effect.operation,
        effect_class=effect.effect_class,
        risk=effect.risk,
        request=effect.request,
        tool=seen.tool,
        tool_approval=_tool_approval(plan, effect.task_id, seen.tool),
    )


UNRESOLVED = ("started", "uncertain")  # the statuses an operator may have to settle


def approvals_to_reconcile(ledger: RunLedger, effect_ids: Iterable[str]) -> frozenset[str]:
    """Of ``effect_ids``, those whose run's policy lets an operator reconcile them only with
    ``--approved`` (as ``authorize`` judges them): the views add the flag to the commands they
    suggest for those, so each runs as printed. Reads only."""
    plans: dict[str, Plan] = {}
    needed: set[str] = set()
    for effect_id in effect_ids:
        seen = ledger.inspect_effect(effect_id)
        effect = seen.effect
        if effect.run_id not in plans:
            plans[effect.run_id] = load_plan(ledger.get_run(effect.run_id))
        plan = plans[effect.run_id]
        if reconciliation_needs_approval(plan.run.policy, _subject(plan, seen)):
            needed.add(effect_id)
    return frozenset(needed)


def with_reconcile_approvals(ledger: RunLedger, report: RunReport) -> RunReport:
    """``report`` with its unresolved effects' ``approvals_to_reconcile`` judged."""
    effects = report.inspection.effects
    needed = approvals_to_reconcile(
        ledger, [e.effect_id for e in effects if e.status in UNRESOLVED]
    )
    return dataclasses.replace(report, approvals_to_reconcile=needed)


def read_approvals_to_reconcile(effect_ids: Collection[str], *, db: str) -> frozenset[str]:
    """``approvals_to_reconcile`` on the database ``db`` (nothing opened for no effect)."""
    if not effect_ids:
        return frozenset()
    with open_ledger(db, verify=False) as ledger:
        return approvals_to_reconcile(ledger, effect_ids)


def _tool_approval(plan: Plan, task_id: str, tool: str | None) -> ToolApproval:
    """The ``approval`` an agent tool declares (``always`` adds a requirement, as it did when
    the run held the call); ``policy`` for anything else."""
    declared = _declared_tool(plan, task_id, tool)
    return "policy" if declared is None else tool_approval(declared.get("approval"))


def _declared_tool(plan: Plan, task_id: str, tool: str | None) -> JsonObject | None:
    """The declaration of the agent tool an effect was a call of (None: not a tool call)."""
    task = next((t for t in plan.tasks if t.id == task_id), None)
    if tool is None or task is None or task.agent_config is None:
        return None
    declared = task.agent_config.tools.get(tool)
    return declared if isinstance(declared, dict) else None
