"""``agentctl effects continue-remote EFFECT``: observe a persisted remote task, never resubmit.

An ``a2a.delegate`` effect whose remote task id was persisted (``ledger.remote``) but whose
outcome is unknown — its run was interrupted, cancelled or gave up polling — can be settled by
observing that task again. A worker polls it (``GetTask`` only; the message is never sent
again); when the task completed, the result is appended as an ``applied`` reconciliation with
the observation as its evidence, so ``resume``, ``retry`` and ``repair`` reuse it.

Invariants:
- only the effect of a remote agent (the registry's ``remote_agent`` effect class:
  ``a2a.delegate``) is continued: any other is refused as such (exit 4);
- only an unresolved (started or uncertain, not yet reconciled) effect with a handle is
  continued; without a handle the submission was ambiguous and an operator must decide;
- the request is the one the task's registry entry builds from the effect's recorded input and
  the run's stored plan; with its secret references resolved (headers recorded by source and
  SHA-256) it must come out with the recorded input digest, or nothing is sent;
- the run's lease is held while observing, so no coordinator drives the run meanwhile;
- the run's policy must allow reconciling the effect (``coordinator.reconcile.authorize``,
  with ``--approved`` where it requires approval) before anything is observed;
- a task that ended otherwise than ``completed``, or that is still working, records no
  reconciliation; the observation's own calls (its protocol session and ``GetTask`` polls)
  are recorded either way, as a session of their own beside the first execution's.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from agentctl.coordinator import secrets
from agentctl.coordinator.clock import Clock
from agentctl.coordinator.creation import load_plan, owner_identity
from agentctl.coordinator.launch import run_trio
from agentctl.coordinator.prepare import RunSettings
from agentctl.coordinator.reconcile import UNRESOLVED, authorize
from agentctl.coordinator.workerpool import open_worker_pool
from agentctl.core import registry
from agentctl.core.effects import EffectClass, input_digest
from agentctl.core.jsonvalue import JsonObject, as_object
from agentctl.core.operations import BuildInput
from agentctl.core.redact import Redactor
from agentctl.errors import BlockedError, InvalidOperationError, ProviderError
from agentctl.ledger import open_ledger
from agentctl.ledger.effects import EffectRecord
from agentctl.ledger.interface import RunLedger
from agentctl.ledger.model import ProtocolReport, ReconcileRequest
from agentctl.ledger.remote import RemoteHandleRecord
from agentctl.mailbox.messages import Execute, Failure, Result


@dataclass(frozen=True)
class Observation:
    """What to observe: the effect, its handle, and the worker message that polls it."""

    effect: EffectRecord
    handle: RemoteHandleRecord
    message: Execute
    secrets: tuple[str, ...] = ()  # resolved header values, redacted from what is recorded


def continue_remote(
    effect_id: str, *, db: str, actor: str, reason: str | None, approved: bool = False
) -> JsonObject:
    """Observe the effect's remote task; its ``EffectReconciliation`` (``applied``), once the
    run's policy allows reconciling it (``approved``: the operator's ``--approved``)."""
    clock = Clock()
    with open_ledger(db) as ledger:
        effect_id = ledger.find_effect_id(effect_id)
        found = _continuable(ledger, effect_id)
        authorization = authorize(ledger, ledger.inspect_effect(effect_id), actor, approved)
        owner = owner_identity()
        ledger.acquire_lease(found.effect.run_id, owner, clock.now())
        try:
            reply = run_trio(_observe, found.message)
            if reply.protocol is not None:  # the observation's own calls, whatever it found
                ledger.record_protocol(
                    ProtocolReport(found.effect.effect_id, reply.protocol, clock.now())
                )
        finally:
            ledger.release_lease(found.effect.run_id, owner.pid, clock.now())
        output = _observed(found, reply)
        request = ReconcileRequest(
            effect_id=found.effect.effect_id,
            status="applied",
            actor=actor,
            reason=reason or f"observed remote task {found.handle.remote_task_id} completed",
            evidence=_evidence(found.handle, output),
            result=output,
            compensation_effect_id=None,
            now=clock.now(),
            reconciliation_id=clock.new_id("reconciliation"),
            trace_id=clock.new_id("trace"),
            authorization=authorization.to_json(),
        )
        data = ledger.reconcile_effect(request).to_json()
    data["authorization"] = authorization.to_json()
    return data


def _continuable(ledger: RunLedger, effect_id: str) -> Observation:
    seen = ledger.inspect_effect(effect_id)
    effect, handle = seen.effect, seen.remote
    remote = [e.name for e in registry.entries() if e.effect_class == EffectClass.REMOTE_AGENT]
    if effect.operation not in remote:
        # The effect exists but the command does not apply to it: exit 4, as resuming a
        # finished run (spec/cli.md §2), not "no persisted remote task", which reads as an
        # ambiguous submission of a remote effect.
        raise InvalidOperationError(
            f"effect {effect.effect_id} is a {effect.operation} effect; continue-remote takes "
            f"a remote agent's effect ({', '.join(remote)}), whose remote task it observes; "
            "nothing was changed (settle other effects with `agentctl effects reconcile`)",
            run_id=effect.run_id,
        )
    if effect.status not in UNRESOLVED or seen.reconciliations:
        raise InvalidOperationError(
            f"effect {effect.effect_id} is {effect.status}"
            + (" and already reconciled" if seen.reconciliations else "")
            + "; continue-remote settles only an unresolved effect"
        )
    if handle is None:
        raise BlockedError(
            f"effect {effect.effect_id} ({effect.operation}) has no persisted remote task: the "
            "submission was ambiguous, so nothing can be observed and nothing is resent; "
            "reconcile it with `agentctl effects reconcile`",
            run_id=effect.run_id,
        )
    message, values = _message(ledger, effect, handle)
    return Observation(effect, handle, message, values)


def _message(
    ledger: RunLedger, effect: EffectRecord, handle: RemoteHandleRecord
) -> tuple[Execute, tuple[str, ...]]:
    """The polling request, built again by the task's registry entry from the recorded input."""
    run = ledger.get_run(effect.run_id)
    plan = load_plan(run)
    task = plan.task(effect.task_id)
    entry = registry.find(effect.operation)
    if entry is None or entry.builder is None:
        raise InvalidOperationError(f"effect {effect.effect_id}: {effect.operation} cannot run")
    workspace = os.path.abspath(run.base_path or os.getcwd())
    run_config = plan.run
    context = RunSettings(run.run_id, plan, workspace).context  # as the run built it
    built = entry.builder(
        BuildInput(task.id, task.action or "", task.config(), as_object(effect.request), context)
    )
    where = (run_config.policy, workspace, f"effect {effect.effect_id}")
    # Compared once resolved: the recorded input keeps each header's source and SHA-256,
    # which the built one (references only) cannot match before resolution.
    got = secrets.resolve_pointers(built.recorded, built.request, built.secret_refs, where)
    if input_digest(got.recorded) != effect.input_digest:
        raise InvalidOperationError(
            f"effect {effect.effect_id}: the run's plan no longer builds the recorded request "
            "(its peer changed, or a header secret now resolves to another value than the "
            "effect was sent with); nothing was observed",
            run_id=effect.run_id,
        )
    request, values = dict(got.request), got.values
    request["continueTaskId"] = handle.remote_task_id
    message = Execute(
        effect_id=effect.effect_id,
        run_id=effect.run_id,
        task_id=effect.task_id,
        attempt=effect.attempt,
        operation=effect.operation,
        request=request,
        timeout_seconds=float(task.timeout_seconds),
        executor=entry.executor,
    )
    return message, tuple(values)


async def _observe(message: Execute) -> Result | Failure:
    async with open_worker_pool(1) as pool:
        return await pool.execute(message)


def _observed(found: Observation, reply: Result | Failure) -> JsonObject:
    redactor = Redactor(found.secrets)
    if isinstance(reply, Result):
        return as_object(redactor.redact(dict(reply.output)))
    raise ProviderError(
        f"remote task {found.handle.remote_task_id} of effect {found.effect.effect_id} was not "
        f"observed to completion: {redactor.redact_text(reply.error.message)}; no "
        "reconciliation was recorded (the observation's calls are kept: `agentctl inspect`)",
        run_id=found.effect.run_id,
    )


def _evidence(handle: RemoteHandleRecord, output: JsonObject) -> JsonObject:
    return {
        "kind": "remote_observation",
        "protocol": handle.protocol,
        "peer": handle.peer,
        "remoteTaskId": handle.remote_task_id,
        "state": output.get("state"),
    }
