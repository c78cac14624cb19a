"""Retry planning (spec/cli.md §5): identical workflow, failed or chosen roots, fresh closure."""

from __future__ import annotations

from typing import Any

from test_recovery_helpers import (
    always_ok,
    base,
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
