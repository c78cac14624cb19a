"""A task an applied reconciliation completed after its run ended (``settle_applied``): retry
reuses its recorded result and executes only what depends on it (the original's A2A page:
"a following failed-only retry materializes that completed boundary")."""

from __future__ import annotations

import dataclasses

from test_recovery_helpers import base, effect, rules, succeeded_run, with_task

from agentctl.core.canonical import v1_digest
from agentctl.core.recovery import (
    AppliedResult,
    SourceEffect,
    SourceRun,
    plan_retry,
    settle_applied,
)

RESULT = {"written": "b.txt"}


def _applied(task_id: str, result: object = RESULT, **changes: object) -> SourceEffect:
    """An uncertain write (unknown idempotency: repeating it is unsafe) reconciled applied."""
    found = effect(
        task_id, "builtin.write", "workspace_mutate", "unknown", status="uncertain",
        reconciliation="applied",
    )  # fmt: skip
    return dataclasses.replace(found, applied=AppliedResult(result), **changes)


def _cancelled_at_b(*effects: SourceEffect) -> SourceRun:
    """The run was cancelled while b's effect was in flight; c and e never ran."""
    source = succeeded_run(base(), state="cancelled")
    source = with_task(
        source, "b", state="cancelled", output=None, output_digest=None,
        definition_fingerprint=None, output_contract_fingerprint=None, effects=effects,
    )  # fmt: skip
    for task_id in ("c", "e"):
        source = with_task(source, task_id, state="cancelled", output=None, effects=())
    return source


def _settled(source: SourceRun) -> SourceRun:
    """What ``coordinator.recovery.load_source`` hands the planner."""
    plan = base().plan
    tasks = {tid: settle_applied(t, plan.task(tid)) for tid, t in source.tasks.items()}
    return dataclasses.replace(source, tasks=tasks)


def _retry(source: SourceRun) -> object:
    return plan_retry(
        source, base().plan, failed_only=True, roots=(), restart_successful=False,
        artifact_ok=lambda digest, size: True,
    )  # fmt: skip


def test_an_applied_reconciliation_makes_the_task_a_reusable_boundary() -> None:
    source = _cancelled_at_b(_applied("b"))
    blocked = _retry(source)  # as the ledger has it: executing b again would repeat the write
    assert rules(blocked) == ["unreconciled_effect"]
    settled = _settled(source)
    b = settled.tasks["b"]
    assert (b.state, b.output, b.output_digest) == ("succeeded", RESULT, v1_digest(RESULT))
    assert b.definition_fingerprint == base().plan.task("b").definition_fingerprint
    assert b.settled_by == source.tasks["b"].effects[0].effect_id
    plan = _retry(settled)
    assert plan.compatible, plan.blocked
    assert plan.reuse == ("a", "b", "d") and plan.execute == ("c", "e")
    reasons = {row["taskId"]: row["reason"] for row in plan.tasks}
    assert "applied reconciliation of effect" in reasons["b"]


def test_the_recorded_result_must_still_meet_the_output_contract() -> None:
    plan = _retry(_settled(_cancelled_at_b(_applied("b", ["not", "an", "object"]))))
    assert rules(plan) == ["output_contract_validation"]


def test_only_a_single_applied_effect_of_the_latest_attempt_settles_a_task() -> None:
    plan = base().plan
    unsettled = [
        _cancelled_at_b(dataclasses.replace(_applied("b"), applied=None)),  # no result
        _cancelled_at_b(_applied("b", reconciliation="compensated")),
        _cancelled_at_b(_applied("b"), _applied("b", effect_id="f" * 64)),  # two effects
        with_task(_cancelled_at_b(_applied("b")), "b", attempt=2),  # a later attempt began
    ]
    for source in unsettled:
        assert settle_applied(source.tasks["b"], plan.task("b")) is source.tasks["b"]
    applied = _cancelled_at_b(_applied("b")).tasks["b"]
    assert settle_applied(applied, None) is applied  # the source plan could not be read
    scout = dataclasses.replace(applied, task_id="scout")
    agent = dataclasses.replace(plan.task("b"), kind="agent")
    assert settle_applied(scout, agent) is scout  # an agent's output is not one call's result
