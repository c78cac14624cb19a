"""Task results applied to the live state but not yet committed, the commit they make, and
the request rows that record a batch's fresh effects.

The driver stages each settled task here in compiled order; consecutive pure batches share
one stage (pure work is re-derivable), and every stage becomes exactly one ``BatchCommit``.

Invariants:
- completions are committed in the order they were staged (compiled order);
- an outcome deferred into a ``Settled`` commits in the same transaction as its task's
  completion, never separately;
- a compensation link is committed only for an inverse that succeeded.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from agentctl.coordinator.steps import PendingEffect, Settled
from agentctl.core import evaluate as ev
from agentctl.core.canonical import v1_digest
from agentctl.core.contracts import output_contract_fingerprint
from agentctl.core.jsonvalue import JsonObject
from agentctl.core.plan import PlannedTask
from agentctl.ledger import model
from agentctl.ledger.effects import NewEffect

_DEFAULT_CONTRACT_FINGERPRINT = v1_digest(ev.DEFAULT_CONTRACT)


def contract_fingerprint(task: PlannedTask) -> str:
    """The fingerprint of a task's output contract (``core.contracts.output_contract_fingerprint``:
    its outputSchema, an agent's structuredOutput, else the default contract)."""
    if task.output_schema is None and task.agent_config is None:
        return _DEFAULT_CONTRACT_FINGERPRINT  # most tasks: computed once, not per task
    return output_contract_fingerprint(task)


@dataclass
class Staged:
    """What the next batch commit carries."""

    finished: list[model.Finished] = field(default_factory=list)
    outcomes: list[model.EffectOutcome] = field(default_factory=list)
    compensated: list[model.CompensatedPair] = field(default_factory=list)
    memory_changed: bool = False

    def __len__(self) -> int:
        return len(self.finished)

    def add(
        self,
        step: Settled,
        from_state: str,
        target: str,
        links: Sequence[str],
        output_text: str | None = None,
        *,
        new_id: Callable[[str], str],
    ) -> None:
        """Stage ``step`` moving from ``from_state`` to ``target``; ``links`` are the source
        effects its (succeeded) inverse compensates, each recorded by a reconciliation whose id
        ``new_id`` mints (the coordinator's clock); ``output_text``: its output's canonical
        JSON, when encoded already."""
        self.finished.append(finished(step, from_state, target, output_text))
        if step.outcome is not None:
            self.outcomes.append(step.outcome)
        if step.effect_id is not None and links:
            inverse = step.effect_id
            self.compensated.extend(
                model.CompensatedPair(src, inverse, new_id("reconciliation")) for src in links
            )

    def batch(
        self, run_id: str, memory: JsonObject | None, now: str, trace_id: str
    ) -> model.BatchCommit:
        return model.BatchCommit(
            run_id, self.finished, memory, now, trace_id, self.compensated, self.outcomes
        )


def finished(
    step: Settled, from_state: str, target: str, output_text: str | None = None
) -> model.Finished:
    """The completion record of a settled task (``output_text``: see ``Staged.add``)."""
    ok = step.state == "succeeded"
    return model.Finished(
        task_id=step.task.id,
        from_state=from_state,
        state=target,
        attempt=max(step.attempt, 1),
        output=step.output,
        error=step.error,
        decision=step.decision,
        definition_fingerprint=step.task.definition_fingerprint or None,
        input_digest=step.input_digest,
        output_contract_fingerprint=contract_fingerprint(step.task),
        state_delta=step.memory_delta if ok else None,
        artifacts=step.artifacts if target == "succeeded" else (),
        ingest_lease_ids=step.lease_ids,
        agent=step.task.agent_config is not None,
        answered=step.answered,
        output_text=output_text,
        passed=_passed(step, from_state, target),
        events=step.events,
    )


# A task decided in the coordinator leaves ``pending`` in its completion's one UPDATE; its
# audit still shows it made ready and run (spec/cli.md §3: every transition is audited), and
# a ``when`` or route skip made ready first (the decision is taken on a ready task). A
# dependency skip is direct. A failure walks its rows (pending → failed is no edge).
_PASSED_TO_SUCCESS = ("ready", "running")
_PASSED_TO_DECIDED_SKIP = ("ready",)


def _passed(step: Settled, from_state: str, target: str) -> tuple[str, ...]:
    if from_state != "pending":
        return ()
    if target == "succeeded":
        return _PASSED_TO_SUCCESS
    if target == "skipped" and (step.decision is not None or _route_skip(step.output)):
        return _PASSED_TO_DECIDED_SKIP
    return ()


def _route_skip(output: object) -> bool:
    return isinstance(output, dict) and output.get("reason") == ev.ROUTE_NOT_SELECTED


def target_state(step: Settled) -> str:
    """A retryable failure with attempts left is rescheduled instead of failing the task; so
    is one that stops the run (its next attempt runs after ``resume``)."""
    retry = step.task.retry
    if step.state == "failed" and step.stops_run:
        return "retry_scheduled"
    if step.state == "failed" and step.retryable and step.attempt < retry.max_attempts:
        return "retry_scheduled"
    return step.state


def request_row(
    step: PendingEffect, run_id: str, trace_id: str, from_state: str
) -> model.RequestRow:
    """The row that records a fresh effect's request (and its task's move from
    ``from_state``), with the capability its approval, if any, names."""
    eff = step.effect
    new = NewEffect(
        run_id=run_id,
        task_id=step.task.id,
        attempt=step.attempt,
        ordinal=0,
        operation=eff.operation,
        request=eff.recorded_input,
        effect_class=eff.effect_class,
        risk=eff.risk,
        idempotency=eff.idempotency,
        trace_id=trace_id,
        waiting_for_approval=eff.needs_approval,
        policy=eff.policy,
        known_input_digest=eff.input_digest,
        known_request_text=eff.recorded_text,
        # ``prepare`` derived it from exactly these fields (run, task, attempt, ordinal 0,
        # operation, input digest): not hashed a second time.
        known_effect_id=eff.effect_id,
    )
    entry = step.task.entry
    capability = None if entry is None else entry.policy_name or entry.name
    return model.RequestRow(
        step.task.id, from_state, step.attempt, new, eff.budget, eff.approval_reason, capability
    )
