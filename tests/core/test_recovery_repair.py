"""Repair planning (spec/cli.md §5): closure, reuse rules in order, roots and closure effects."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from test_recovery_helpers import (
    BASE,
    always_ok,
    base,
    compile_yaml,
    effect,
    failed,
    rules,
    succeeded_run,
    with_task,
)

from agentctl.core.canonical import json_digest
from agentctl.core.recovery import (
    REPAIR_PLAN_API,
    RecoveryPlan,
    SourceRun,
    output_contract_fingerprint,
    plan_repair,
)


def repair(source: SourceRun, target: Any, *roots: str, **kw: Any) -> RecoveryPlan:
    kw.setdefault("restart_successful", True)
    kw.setdefault("artifact_ok", always_ok)
    plan = target.plan if hasattr(target, "plan") else target
    return plan_repair(source, plan, roots=list(roots), **kw)


# --- closure and reuse ------------------------------------------------------------------------


def test_changed_task_reruns_with_dependants_and_everything_else_is_reused() -> None:
    source = succeeded_run(base())
    target = base(**{"with: { n: 2 }": "with: { n: 20 }"})
    plan = repair(source, target, "d", reason="fix d")
    assert plan.compatible and plan.blocked == ()
    assert plan.execute == ("d", "e")
    assert plan.reuse == ("a", "b", "c")
    data = plan.to_json()
    assert data["apiVersion"] == REPAIR_PLAN_API
    assert data["repairRoots"] == ["d"] and data["changedTasks"] == ["d"]
    assert data["reusedTasks"] == ["a", "b", "c"] and data["rerunTasks"] == ["d", "e"]
    assert data["reason"] == "fix d"
    assert [(t["taskId"], t["disposition"]) for t in data["tasks"]] == [
        ("a", "reuse"),
        ("b", "reuse"),
        ("c", "reuse"),
        ("d", "execute"),
        ("e", "execute"),
    ]


def test_closure_is_transitive_in_the_target_graph() -> None:
    source = succeeded_run(base())
    plan = repair(source, base(), "b")
    assert plan.execute == ("b", "c", "e") and plan.reuse == ("a", "d")
    assert plan.compatible


def test_closure_follows_target_edges_not_source_edges() -> None:
    # In the target, d newly needs b, so repairing b must rerun d — and d's source needs differ.
    target = base(**{"needs: [a], with: { n: 2 }": "needs: [a, b], with: { n: 2 }"})
    plan = repair(succeeded_run(base()), target, "b")
    assert plan.execute == ("b", "c", "d", "e") and plan.compatible


def test_fresh_effect_summary_counts_only_executed_effectful_tasks() -> None:
    plan = repair(succeeded_run(base()), base(), "b")
    summary = plan.to_json()["freshEffectSummary"]
    assert summary["byClass"] == {"internal_state": 1, "workspace_mutate": 1}
    assert summary["total"] == 2
    assert plan.to_json()["estimatedProviderTasks"] == 0


def test_removed_and_new_tasks() -> None:
    target = compile_yaml(
        BASE.replace(
            '    - { id: e, uses: "action:put", needs: [c, d], with: { n: 3 } }\n',
            '    - { id: f, uses: "action:put", needs: [d], with: { n: 4 } }\n',
        )
    )
    plan = repair(succeeded_run(base()), target, "d")
    data = plan.to_json()
    assert data["removedTasks"] == ["e"] and data["newTasks"] == ["f"]
    assert plan.execute == ("d", "f") and plan.compatible
    removed = {"taskId": "e", "disposition": "removed", "reason": "not in the target workflow"}
    assert removed in data["tasks"]
    assert any("task e" in warning for warning in plan.warnings)


# --- run-level refusals -----------------------------------------------------------------------


def test_workflow_identity_mismatch() -> None:
    target = base(**{"name: recov": "name: other"})
    plan = repair(succeeded_run(base()), target, "d")
    assert not plan.compatible and rules(plan) == ["workflow_identity_mismatch"]
    assert plan.blocked[0].full_fork_required and plan.execute == ()


def test_replay_cannot_be_a_source() -> None:
    plan = repair(succeeded_run(base(), mode="replay"), base(), "d")
    assert rules(plan) == ["replay_source"] and not plan.compatible


def test_source_must_be_terminal() -> None:
    plan = repair(succeeded_run(base(), state="paused"), base(), "d")
    assert rules(plan) == ["source_not_terminal"] and not plan.compatible


def test_a_parked_running_source_is_planned_by_its_closure_rules() -> None:
    """A running run nothing drives, waiting on an uncertain effect, is a source; its
    uncertain effect blocks as ``unreconciled_effect``, and not-applied frees it."""
    waiting = with_task(
        succeeded_run(base(), state="running"),
        "d",
        state="waiting_for_effect",
        effects=(effect("d", status="uncertain"),),
    )
    assert rules(repair(waiting, base(), "d")) == ["source_not_terminal"]
    parked = dataclasses.replace(waiting, parked=True)
    assert rules(repair(parked, base(), "d")) == ["unreconciled_effect"]
    cleared = with_task(
        parked, "d", effects=(effect("d", status="uncertain", reconciliation="not_applied"),)
    )
    assert repair(cleared, base(), "d").compatible


# --- roots ------------------------------------------------------------------------------------


def test_unknown_root() -> None:
    plan = repair(succeeded_run(base()), base(), "ghost")
    assert rules(plan) == ["repair_root_missing"] and plan.blocked[0].task_id == "ghost"
    assert plan.roots == ("ghost",)


def test_no_root_at_all() -> None:
    plan = repair(succeeded_run(base()), base())
    assert rules(plan) == ["repair_root_missing"] and not plan.compatible


def test_successful_root_requires_acknowledgement() -> None:
    source = succeeded_run(base())
    refused = repair(source, base(), "d", restart_successful=False)
    assert rules(refused) == ["successful_root_requires_acknowledgement"]
    assert repair(source, base(), "d", restart_successful=True).compatible


def test_failed_root_needs_no_acknowledgement() -> None:
    source = failed(succeeded_run(base()), "d", "e")
    plan = repair(source, base(), "d", restart_successful=False)
    assert plan.compatible and plan.execute == ("d", "e")


@pytest.mark.parametrize("disposition", ["reused", "recorded"])
def test_indirect_effect_history(disposition: str) -> None:
    source = with_task(succeeded_run(base()), "d", disposition=disposition)
    plan = repair(source, base(), "d")
    assert rules(plan) == ["indirect_effect_history"]
    assert plan.blocked[0].full_fork_required


def test_roots_are_reported_in_target_order() -> None:
    plan = repair(succeeded_run(base()), base(), "d", "b", "d")
    assert plan.roots == ("b", "d")


# --- reuse rules, each on its own -------------------------------------------------------------


def test_new_task_outside_closure() -> None:
    target = compile_yaml(
        BASE + '    - { id: f, uses: "action:put", needs: [a], with: { n: 9 } }\n'
    )
    plan = repair(succeeded_run(base()), target, "d")
    assert rules(plan) == ["new_task_outside_repair_closure"]
    assert plan.blocked[0].suggested_repair_roots == ("f",)
    assert plan.blocked[0].to_json()["suggestedRepairRoots"] == ["f"]


def test_new_task_inside_closure_executes() -> None:
    target = compile_yaml(
        BASE + '    - { id: f, uses: "action:put", needs: [d], with: { n: 9 } }\n'
    )
    plan = repair(succeeded_run(base()), target, "d")
    assert plan.compatible and plan.execute == ("d", "e", "f")


def test_source_task_not_successful() -> None:
    source = failed(succeeded_run(base()), "b", "c", "e")
    plan = repair(source, base(), "d")
    assert rules(plan)[0] == "source_task_not_successful"
    assert plan.blocked[0].task_id == "b"
    assert repair(source, base(), "b").compatible


def test_legacy_task_metadata() -> None:
    source = with_task(succeeded_run(base()), "a", definition_fingerprint=None)
    assert rules(repair(source, base(), "d")) == ["legacy_task_metadata"]
    source = with_task(succeeded_run(base()), "a", output_contract_fingerprint=None)
    assert rules(repair(source, base(), "d")) == ["legacy_task_metadata"]


def test_output_contract_mismatch_is_reported_before_definition_change() -> None:
    target = base(
        **{
            '{ id: a, uses: "action:put", with: { n: 1 } }': (
                '{ id: a, uses: "action:put", with: { n: 1 }, outputSchema: { type: object, required: [task] } }'
            )
        }
    )
    plan = repair(succeeded_run(base()), target, "d")
    [block] = plan.blocked
    assert block.rule == "output_contract_mismatch"
    assert block.target_fingerprint == output_contract_fingerprint(target.plan.task("a"))


def test_dependency_set_mismatch() -> None:
    source = with_task(succeeded_run(base()), "b", needs=("a", "d"))
    plan = repair(source, base(), "d")
    assert rules(plan) == ["dependency_set_mismatch"] and plan.blocked[0].task_id == "b"


def test_a_compensated_effect_of_an_earlier_attempt_does_not_block_reuse() -> None:
    """Only the effects of the attempt that ended a task produced its result: its own, or
    those it inherited from the run that executed it (``inherited_attempt``)."""
    undone = effect("b", status="uncertain", reconciliation="compensated", attempt=1)
    again = effect("b", attempt=2)
    own = with_task(succeeded_run(base()), "b", attempt=2, effects=(undone, again))
    assert repair(own, base(), "d").compatible
    reused = with_task(own, "b", disposition="reused", attempt=0, effects=())
    for ended, compatible in ((2, True), (1, False)):
        source = with_task(reused, "b", inherited_effects=(undone, again), inherited_attempt=ended)
        plan = repair(source, base(), "d")
        assert plan.compatible is compatible
        assert compatible or rules(plan) == ["reuse_effect_provenance"]


def test_definition_fingerprint_mismatch() -> None:
    target = base(**{"with: { n: 1 }": "with: { n: 100 }"})
    plan = repair(succeeded_run(base()), target, "d")
    [block] = plan.blocked
    assert (block.task_id, block.rule) == ("a", "definition_fingerprint_mismatch")
    assert block.source_fingerprint != block.target_fingerprint
    assert block.suggested_repair_roots == ("a",) and not block.full_fork_required
    assert repair(succeeded_run(base()), target, "a").compatible


@pytest.mark.parametrize("status", ["started", "uncertain"])
def test_unresolved_reused_effect(status: str) -> None:
    source = with_task(succeeded_run(base()), "b", effects=(effect("b", status=status),))
    assert rules(repair(source, base(), "d")) == ["unresolved_reused_effect"]
    reconciled = with_task(
        source, "b", effects=(effect("b", status=status, reconciliation="applied"),)
    )
    assert repair(reconciled, base(), "d").compatible


def test_compensated_effect_is_not_reused_by_repair() -> None:
    source = with_task(
        succeeded_run(base()), "b", effects=(effect("b", reconciliation="compensated"),)
    )
    assert rules(repair(source, base(), "d")) == ["reuse_effect_provenance"]


AGENT_FEEDS = """
    - { id: s, uses: "agent:scout", with: { prompt: hi }SCHEMA }
    - { id: t, uses: "action:put", needs: [s], with: { v: "${{ tasks.s.output }}" } }
"""


def test_missing_output_contract_for_an_agent_feeding_others() -> None:
    compiled = compile_yaml(BASE + AGENT_FEEDS.replace("SCHEMA", ""))
    plan = repair(succeeded_run(compiled), compiled, "d")
    assert rules(plan) == ["missing_output_contract"] and plan.blocked[0].task_id == "s"
    typed = compile_yaml(BASE + AGENT_FEEDS.replace("SCHEMA", ", outputSchema: { type: object }"))
    assert repair(succeeded_run(typed), typed, "d").compatible


def test_agent_without_contract_feeding_nobody_is_reusable() -> None:
    compiled = compile_yaml(BASE + '    - { id: s, uses: "agent:scout", with: { prompt: hi } }\n')
    plan = repair(succeeded_run(compiled), compiled, "d")
    assert plan.compatible and "s" in plan.reuse


def test_output_digest_mismatch() -> None:
    source = succeeded_run(base())
    tampered = with_task(source, "a", output={"task": "a", "forged": True})
    assert rules(repair(tampered, base(), "d")) == ["output_digest_mismatch"]
    missing = with_task(source, "a", output_digest=None)
    assert rules(repair(missing, base(), "d")) == ["output_digest_mismatch"]
    v1 = with_task(source, "a", output_digest="sha256:v1:" + json_digest(source.tasks["a"].output))
    assert repair(v1, base(), "d").compatible


def test_output_contract_validation() -> None:
    output = ["not", "an", "object"]
    source = with_task(succeeded_run(base()), "a", output=output, output_digest=json_digest(output))
    plan = repair(source, base(), "d")
    assert rules(plan) == ["output_contract_validation"]
    assert "object" in plan.blocked[0].message


def test_artifact_integrity_names_path_digest_and_size() -> None:
    source = succeeded_run(base())
    [artifact] = source.tasks["b"].artifacts

    def corrupt(digest: str, size: int) -> bool:
        return bool(digest != artifact["digest"])

    plan = repair(source, base(), "d", artifact_ok=corrupt)
    [block] = plan.blocked
    assert (block.task_id, block.rule) == ("b", "artifact_integrity")
    assert "b.txt" in block.message and artifact["digest"] in block.message
    assert f"{artifact['sizeBytes']} bytes" in block.message


def test_state_delta_missing() -> None:
    source = with_task(succeeded_run(base()), "c", state_delta=None)
    assert rules(repair(source, base(), "d")) == ["state_delta_missing"]


@pytest.mark.parametrize("delta", [{"other": 1}, {"k": 1, "other": 2}, ["k"]])
def test_state_delta_invalid(delta: Any) -> None:
    source = with_task(succeeded_run(base()), "c", state_delta=delta)
    assert rules(repair(source, base(), "d")) == ["state_delta_invalid"]


def test_stray_delta_on_a_task_that_writes_no_memory() -> None:
    source = with_task(succeeded_run(base()), "a", state_delta={"k": 1})
    assert rules(repair(source, base(), "d")) == ["state_delta_invalid"]


def test_only_the_first_failing_rule_is_reported_per_task() -> None:
    source = with_task(
        succeeded_run(base()),
        "b",
        needs=("d",),
        output_digest="0" * 64,
        effects=(effect("b", status="uncertain"),),
    )
    plan = repair(source, base(), "d")
    assert rules(plan) == ["dependency_set_mismatch"]


# --- effects of tasks that execute again ------------------------------------------------------


def _closure_effect(*effects: Any) -> RecoveryPlan:
    source = with_task(succeeded_run(base()), "d", effects=tuple(effects))
    return repair(source, base(), "d")


@pytest.mark.parametrize("status", ["started", "uncertain"])
def test_unresolved_closure_effect_blocks(status: str) -> None:
    plan = _closure_effect(effect("d", status=status))
    assert rules(plan) == ["unreconciled_effect"] and not plan.compatible
    row = next(t for t in plan.tasks if t["taskId"] == "d")
    assert row["disposition"] == "blocked"


@pytest.mark.parametrize(
    ("operation", "effect_class", "idempotency"),
    [
        ("builtin.shell.exec", "process_execution", "unknown"),
        ("a2a.delegate", "remote_agent", "unknown"),
        ("mcp.call", "network", "unknown"),
        ("mcp.call", "network", "at_most_once"),
        ("external.thing", "external_mutate", "at_most_once"),
    ],
)
def test_confirmed_non_idempotent_mutation_blocks_until_compensated(
    operation: str, effect_class: str, idempotency: str
) -> None:
    done = effect("d", operation, effect_class, idempotency)
    assert rules(_closure_effect(done)) == ["unreconciled_effect"]
    compensated = dataclasses.replace(done, reconciliation="compensated")
    assert _closure_effect(compensated).compatible
    applied = effect("d", operation, effect_class, idempotency, status="uncertain")
    applied = dataclasses.replace(applied, reconciliation="applied")
    assert rules(_closure_effect(applied)) == ["unreconciled_effect"]


@pytest.mark.parametrize(
    "fine",
    [
        effect("d", "model.call", "model", "at_most_once"),
        effect("d", "builtin.read", "observe", "idempotent"),
        effect("d", "builtin.assign", "pure", "pure"),
        effect("d", "builtin.write", "workspace_mutate", "idempotent"),
        effect("d", "mcp.call", "network", "keyed"),
        effect("d", "builtin.long_term_memory.write", "external_mutate", "keyed"),
        effect("d", "builtin.shell.exec", "process_execution", "unknown", status="failed"),
        effect("d", "builtin.shell.exec", "process_execution", "unknown", status="cancelled"),
        effect("d", "builtin.shell.exec", "process_execution", "unknown", status="requested"),
        effect(
            "d",
            "builtin.shell.exec",
            "process_execution",
            "unknown",
            status="uncertain",
            reconciliation="not_applied",
        ),
    ],
)
def test_safe_closure_effects_do_not_block(fine: Any) -> None:
    assert _closure_effect(fine).compatible


def test_closure_effects_of_dependants_are_checked_too() -> None:
    source = with_task(succeeded_run(base()), "e", effects=(effect("e", status="uncertain"),))
    plan = repair(source, base(), "d")
    assert rules(plan) == ["unreconciled_effect"] and plan.blocked[0].task_id == "e"


def test_a_reused_closure_task_is_judged_by_the_effects_it_inherited() -> None:
    # A task the source reused has no effects of its own; executing it again repeats the
    # effects of the run that executed it, so those block as the source's own would.
    shell = effect("c", "builtin.shell.exec", "process_execution", "unknown")
    reused = with_task(succeeded_run(base()), "c", disposition="reused", effects=())
    safe = repair(with_task(reused, "c", inherited_effects=()), base(), "b")
    assert safe.compatible and "c" in safe.execute
    unsafe = repair(with_task(reused, "c", inherited_effects=(shell,)), base(), "b")
    assert rules(unsafe) == ["unreconciled_effect"] and unsafe.blocked[0].task_id == "c"
    lost = repair(with_task(reused, "c", inherited_effects=None), base(), "b")
    assert rules(lost) == ["indirect_effect_history"] and lost.blocked[0].full_fork_required
    undone = with_task(
        reused, "c", inherited_effects=(dataclasses.replace(shell, reconciliation="compensated"),)
    )
    assert rules(repair(undone, base(), "d")) == ["reuse_effect_provenance"]
