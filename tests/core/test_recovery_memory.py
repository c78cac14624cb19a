"""Repair/retry memory initialisation: target initial memory + reused deltas in target order."""

from __future__ import annotations

import copy
import dataclasses

from test_recovery_helpers import always_ok, compile_yaml, succeeded_run, with_task

from agentctl.core.recovery import plan_repair, rebuild_memory

# w1 is declared first but needs w2, so the compiled order is w2, w1: w1's write lands last.
WORKFLOW = """
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: mem }
spec:
  memory: { working: { k: 0, keep: yes } }
  actions:
    remember: { kind: builtin.memory.write }
    put: { kind: builtin.assign }
  tasks:
    - { id: w1, uses: "action:remember", needs: [w2], with: { key: k, value: 1 } }
    - { id: w2, uses: "action:remember", with: { key: k, value: 2 } }
    - { id: w3, uses: "action:remember", needs: [w1], with: { key: late, value: 3 } }
    - { id: tail, uses: "action:put", needs: [w3] }
"""

COMPILED = compile_yaml(WORKFLOW)
INITIAL = COMPILED.document["spec"]["memory"]["working"]


def test_later_task_in_target_order_wins() -> None:
    assert COMPILED.plan.order[:2] == ("w2", "w1")
    source = succeeded_run(COMPILED)
    reused = {tid: source.tasks[tid] for tid in ("w1", "w2")}  # mapping order is w1, w2
    memory = rebuild_memory(INITIAL, COMPILED.plan, reused)
    assert memory == {"k": 1, "keep": "yes"}


def test_deltas_of_tasks_that_are_not_reused_are_not_applied() -> None:
    source = succeeded_run(COMPILED)
    plan = plan_repair(
        source, COMPILED.plan, roots=["w3"], restart_successful=True, artifact_ok=always_ok
    )
    assert plan.compatible and plan.reuse == ("w2", "w1")
    memory = rebuild_memory(INITIAL, COMPILED.plan, {t: source.tasks[t] for t in plan.reuse})
    assert memory == {"k": 1, "keep": "yes"}  # no "late": w3 executes again


def test_starts_from_target_initial_memory_not_the_source_snapshot() -> None:
    source = with_task(succeeded_run(COMPILED), "w2", state_delta={"k": 2})
    target_initial = {"fresh": True}
    memory = rebuild_memory(target_initial, COMPILED.plan, {"w2": source.tasks["w2"]})
    assert memory == {"fresh": True, "k": 2}


def test_reused_tasks_missing_from_the_target_are_ignored_and_inputs_untouched() -> None:
    source = succeeded_run(COMPILED)
    stray = dataclasses.replace(source.tasks["w1"], task_id="gone")
    initial = {"nested": {"a": 1}}
    before = copy.deepcopy(initial)
    memory = rebuild_memory(initial, COMPILED.plan, {"gone": stray})
    assert memory == before
    memory["nested"]["a"] = 2
    assert initial == before
