"""Retry planning (spec/cli.md §5): identical workflow, failed or chosen roots, fresh closure."""

from __future__ import annotations

import dataclasses
from typing import Any

from test_recovery_helpers import (
    always_ok,
    base,
    compile_yaml,
    effect,
    failed,
    rules,
    succeeded_run,
    with_task,
)

from agentctl.core.recovery import RETRY_PLAN_API, RecoveryPlan, SourceRun, plan_retry


def retry(
    source: SourceRun,
    target: Any = None,
    *roots: str,
    failed_only: bool = False,
    restart_successful: bool = False,
    artifact_ok: Any = always_ok,
) -> RecoveryPlan:
    plan = (target or base()).plan
    return plan_retry(
        source,
        plan,
        failed_only=failed_only,
        roots=list(roots),
        restart_successful=restart_successful,
        artifact_ok=artifact_ok,
    )


def test_failed_only_reruns_failed_tasks_and_dependants_and_reuses_the_rest() -> None:
    source = failed(succeeded_run(base()), "c", "e")
    plan = retry(source, failed_only=True)
    assert plan.compatible and plan.roots == ("c",)
    assert plan.execute == ("c", "e") and plan.reuse == ("a", "b", "d")
    data = plan.to_json()
    assert data["apiVersion"] == RETRY_PLAN_API
    assert data["failedOnly"] is True and data["retryRoots"] == ["c"]
    assert data["workflowDigest"] == base().plan.workflow_digest
    assert "repairRoots" not in data


def test_every_unsuccessful_task_executes_even_when_not_a_root() -> None:
    # A cancelled run: d was cancelled, e never ran; the chosen root is b.
    source = with_task(succeeded_run(base(), state="cancelled"), "d", state="cancelled")
    source = with_task(source, "e", state="pending")
    plan = retry(source, None, "b", restart_successful=True)
    assert plan.execute == ("b", "c", "d", "e") and plan.reuse == ("a",)
    reasons = {row["taskId"]: row["reason"] for row in plan.tasks}
    assert reasons["d"] == "source task cancelled" and reasons["b"] == "retry root"


def test_workflow_digest_mismatch_sends_the_user_to_repair() -> None:
    source = failed(succeeded_run(base()), "c", "e")
    changed = base(**{"with: { n: 2 }": "with: { n: 3 }"})
    plan = retry(source, changed, failed_only=True)
    assert not plan.compatible and rules(plan) == ["workflow_digest_mismatch"]
    assert "repair" in plan.blocked[0].message
    assert plan.execute == () and plan.reuse == ()


def test_replay_cannot_be_retried() -> None:
    source = failed(succeeded_run(base(), mode="replay"), "c", "e")
    assert rules(retry(source, failed_only=True)) == ["replay_source"]


def test_a_preview_cannot_be_retried() -> None:
    source = failed(succeeded_run(base(), mode="check"), "c", "e")
    assert rules(retry(source, failed_only=True)) == ["check_source"]


def test_running_source_cannot_be_retried() -> None:
    source = succeeded_run(base(), state="running")
    assert rules(retry(source, None, "d", restart_successful=True)) == ["source_not_terminal"]


def test_unknown_root() -> None:
    plan = retry(succeeded_run(base()), None, "nope", restart_successful=True)
    assert rules(plan) == ["repair_root_missing"]


def test_successful_root_requires_acknowledgement() -> None:
    source = succeeded_run(base())
    assert rules(retry(source, None, "d")) == ["successful_root_requires_acknowledgement"]
    plan = retry(source, None, "d", restart_successful=True)
    assert plan.compatible and plan.execute == ("d", "e")


def test_failed_only_with_nothing_failed_is_refused() -> None:
    plan = retry(succeeded_run(base()), failed_only=True)
    assert not plan.compatible and "no failed task" in plan.blocked[0].message


def test_compensated_effects_are_never_reused() -> None:
    source = with_task(
        succeeded_run(base()), "b", effects=(effect("b", reconciliation="compensated"),)
    )
    source = with_task(source, "d", state="failed")
    plan = retry(source, failed_only=True)
    assert plan.compatible
    assert plan.execute == ("b", "c", "d", "e") and plan.reuse == ("a",)
    reasons = {row["taskId"]: row["reason"] for row in plan.tasks}
    assert "compensated" in reasons["b"]


def test_a_compensated_effect_of_an_earlier_attempt_leaves_the_later_result_reusable() -> None:
    """Attempt 1's effect was compensated, attempt 2 ran again and succeeded: the recorded
    output is attempt 2's, so the retry reuses the task (executing it would repeat attempt 2's
    confirmed effect); a compensated effect of the attempt that ended it still forces it."""
    undone = effect("b", status="uncertain", reconciliation="compensated", attempt=1)
    again = effect("b", attempt=2)
    source = with_task(succeeded_run(base()), "b", attempt=2, effects=(undone, again))
    source = with_task(source, "d", state="failed")
    plan = retry(source, failed_only=True)
    assert plan.compatible and plan.reuse == ("a", "b", "c")
    latest = dataclasses.replace(again, reconciliation="compensated")
    forced = retry(with_task(source, "b", effects=(undone, latest)), failed_only=True)
    assert forced.compatible and "b" in forced.execute


def test_unresolved_effect_of_a_failed_task_is_not_retried() -> None:
    source = failed(succeeded_run(base()), "c", "e")
    source = with_task(source, "c", effects=(effect("c", status="uncertain"),))
    plan = retry(source, failed_only=True)
    assert rules(plan) == ["unreconciled_effect"] and not plan.compatible
    reconciled = with_task(
        source, "c", effects=(effect("c", status="uncertain", reconciliation="not_applied"),)
    )
    assert retry(reconciled, failed_only=True).compatible


def test_reused_task_must_still_pass_reuse_checks() -> None:
    source = failed(succeeded_run(base()), "c", "e")

    def missing(digest: str, size: int) -> bool:
        return False

    plan = retry(source, failed_only=True, artifact_ok=missing)
    assert rules(plan) == ["artifact_integrity"] and plan.blocked[0].task_id == "b"
    assert "b" not in plan.reuse and "b" not in plan.execute


def test_retry_is_a_fresh_attempt_of_the_whole_closure() -> None:
    source = failed(succeeded_run(base()), "b", "c", "e")
    plan = retry(source, failed_only=True)
    assert plan.execute == ("b", "c", "e") and plan.reuse == ("a", "d")
    assert plan.to_json()["freshEffectSummary"]["byClass"] == {
        "internal_state": 1,
        "workspace_mutate": 1,
    }


EXPANDED = """
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: loops }
spec:
  actions: { step: { kind: builtin.assign }, check: { kind: builtin.assert } }
  tasks:
    - { id: poll, uses: "action:step", loop: { maxIterations: 4, while: "${{ vars.loopIndex < 3 }}", initial: { n: 0 } }, with: { i: "${{ vars.loopIndex }}" } }
    - { id: after, uses: "action:step", needs: [poll] }
    - { id: fan, uses: "action:step", foreach: { items: [x, y], as: it, maxItems: 2 }, failure: continue, with: { v: "${{ vars.it }}" } }
    - { id: gate, uses: "action:check", with: { that: false, message: no } }
"""


def test_skipped_task_is_evaluated_again_without_dragging_its_dependants() -> None:
    compiled = compile_yaml(EXPANDED)
    last_child = compiled.plan.task("poll").children[-1]
    source = failed(succeeded_run(compiled), "gate")
    source = with_task(source, last_child, state="skipped", output={"reason": "guard false"})
    plan = retry(source, compiled, failed_only=True)
    assert plan.compatible and plan.execute == (last_child, "gate")
    assert "poll" in plan.reuse and "after" in plan.reuse


def test_unsuccessful_non_root_task_pulls_in_its_aggregate() -> None:
    compiled = compile_yaml(EXPANDED)
    child = compiled.plan.task("fan").children[0]
    source = failed(succeeded_run(compiled), child)
    plan = retry(source, compiled, "gate", restart_successful=True)
    assert plan.compatible and plan.execute == (child, "fan", "gate")
    reasons = {row["taskId"]: row["reason"] for row in plan.tasks}
    assert (
        reasons[child] == "source task failed"
        and reasons["fan"] == f"needs {child}, which executes"
    )


def test_reason_is_recorded() -> None:
    source = failed(succeeded_run(base()), "c", "e")
    assert retry(source, failed_only=True).to_json()["reason"] is None
    plan = plan_retry(
        source,
        base().plan,
        failed_only=True,
        roots=[],
        restart_successful=False,
        artifact_ok=always_ok,
        reason="flaky disk",
    )
    assert plan.to_json()["reason"] == "flaky disk"


FANNED = """
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: fanned }
spec:
  policy: { approval: never }
  actions: { put: { kind: builtin.assign } }
  tasks:
    - { id: fan, uses: action:put, foreach: { items: [ada, lin], maxItems: 2 }, with: { n: "${{ vars.item }}" } }
    - { id: after, uses: action:put, needs: [fan], with: { n: 0 } }
"""


def test_a_named_aggregate_brings_its_children_a_failed_one_does_not() -> None:
    compiled = compile_yaml(FANNED)
    ada, lin = compiled.plan.task("fan").children
    named = retry(succeeded_run(compiled), compiled, "fan", restart_successful=True)
    assert named.compatible and named.roots == (ada, lin, "fan")
    assert named.execute == (ada, lin, "fan", "after") and named.reuse == ()
    # `--failed`: the aggregate failed because one child did; the other child stays reused.
    broken = with_task(failed(succeeded_run(compiled), lin, "after"), "fan", state="failed")
    again = retry(broken, compiled, failed_only=True)
    assert again.compatible and again.reuse == (ada,)
