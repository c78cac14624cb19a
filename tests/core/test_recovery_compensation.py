"""Compensation planning and the compensation run's document (spec/cli.md §5, dsl.md §4.10)."""

from __future__ import annotations

import copy
import dataclasses
import json

import pytest
from test_recovery_helpers import compile_yaml, effect, succeeded_run, with_task

from agentctl.core.compiler import compile_workflow
from agentctl.core.compiler.stored import plan_from_stored, plan_to_stored_text
from agentctl.core.recovery import (
    COMPENSATION_PLAN_API,
    OpenInverse,
    SourceRun,
    compensation_document,
    plan_compensation,
    step_bindings,
)
from agentctl.errors import ValidationError

WORKFLOW = """
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: comp }
spec:
  policy: { approval: never, processAllowlist: [echo] }
  actions:
    put: { kind: builtin.assign }
    write: { kind: builtin.write }
    blank: { kind: builtin.write, with: { content: "" } }
    remember: { kind: builtin.memory.write }
  outputs: { x: "${{ tasks.a.output }}" }
  tasks:
    - { id: a, uses: "action:write", with: { path: a.txt, content: A }, compensate: { uses: "action:blank", with: { path: a.txt }, retry: { maxAttempts: 3, backoffMs: 5 }, timeoutSeconds: 9 } }
    - { id: p, uses: "action:put", needs: [a] }
    - { id: b, uses: "action:write", needs: [p], with: { path: b.txt, content: B }, compensate: { uses: "action:blank", with: { path: b.txt } } }
    - { id: m, uses: "action:remember", needs: [b], with: { key: k, value: 1 }, compensate: { uses: "action:remember", with: { key: k, value: null } } }
    - { id: w, uses: "action:write", needs: [m], with: { path: w.txt, content: W } }
"""

COMPILED = compile_yaml(WORKFLOW)


def source() -> SourceRun:
    return succeeded_run(COMPILED)


def test_steps_run_in_reverse_compiled_order() -> None:
    plan = plan_compensation(source(), COMPILED.plan)
    assert plan.executable and plan.complete and plan.blocked == ()
    assert [s.source_task_id for s in plan.steps] == ["m", "b", "a"]
    assert [s.compensation_task_id for s in plan.steps] == [
        "m--compensate",
        "b--compensate",
        "a--compensate",
    ]
    step_a = plan.steps[-1]
    assert step_a.action == "blank" and step_a.with_ == {"path": "a.txt", "content": ""}
    assert (step_a.retry.max_attempts, step_a.retry.backoff_ms, step_a.timeout_seconds) == (3, 5, 9)
    assert step_a.source_effect_ids == tuple(e.effect_id for e in source().tasks["a"].effects)


def test_plan_json_shape() -> None:
    data = plan_compensation(source(), COMPILED.plan).to_json()
    assert data["apiVersion"] == COMPENSATION_PLAN_API
    assert data["executable"] is True and data["complete"] is True
    assert data["tasks"][0] == {
        "sourceTaskId": "m",
        "compensationTaskId": "m--compensate",
        "action": "remember",
        "sourceEffectIds": [source().tasks["m"].effects[0].effect_id],
    }
    assert data["blocked"] == [] and data["alreadyCompensatedEffects"] == []


def test_already_compensated_effects_are_excluded() -> None:
    done = effect("b", reconciliation="compensated")
    run = with_task(source(), "b", effects=(done,))
    plan = plan_compensation(run, COMPILED.plan)
    assert [s.source_task_id for s in plan.steps] == ["m", "a"]
    assert plan.already_compensated == (done.effect_id,)
    everything = run
    for task_id in ("a", "m"):
        everything = with_task(
            everything, task_id, effects=(effect(task_id, reconciliation="compensated"),)
        )
    finished = plan_compensation(everything, COMPILED.plan)
    assert finished.steps == () and finished.complete and not finished.executable
    assert len(finished.already_compensated) == 3


def test_only_effects_that_took_effect_are_eligible() -> None:
    run = with_task(source(), "a", effects=(effect("a", status="failed"),))
    run = with_task(run, "m", state="failed", effects=(effect("m", status="cancelled"),))
    applied = effect("b", status="uncertain", reconciliation="applied")
    run = with_task(run, "b", effects=(applied,))
    plan = plan_compensation(run, COMPILED.plan)
    assert [s.source_task_id for s in plan.steps] == ["b"]
    assert plan.steps[0].source_effect_ids == (applied.effect_id,)


def test_not_applied_effects_are_skipped() -> None:
    run = with_task(
        source(), "b", effects=(effect("b", status="uncertain", reconciliation="not_applied"),)
    )
    assert [s.source_task_id for s in plan_compensation(run, COMPILED.plan).steps] == ["m", "a"]


def test_unresolved_effect_blocks() -> None:
    for status in ("started", "uncertain"):
        run = with_task(source(), "b", effects=(effect("b", status=status),))
        plan = plan_compensation(run, COMPILED.plan)
        assert not plan.executable and not plan.complete
        assert [(b.task_id, b.rule) for b in plan.blocked] == [("b", "unreconciled_effect")]
        assert [s.source_task_id for s in plan.steps] == ["m", "a"]


def test_an_inverse_an_open_compensation_run_holds_blocks_its_task() -> None:
    # An inverse that has not ended may still run (after its approval, a resume, a claim):
    # planning it again would undo the same effects twice. One that ended holds nothing.
    for state in ("pending", "waiting_for_approval", "running", "retry_scheduled"):
        held = OpenInverse("run-comp", "b--compensate", state)
        run = dataclasses.replace(source(), open_inverses=(held,))
        plan = plan_compensation(run, COMPILED.plan)
        assert not plan.executable and not plan.complete
        assert [(b.task_id, b.rule) for b in plan.blocked] == [("b", "compensation_in_progress")]
        assert "run-comp" in plan.blocked[0].message
        assert [s.source_task_id for s in plan.steps] == ["m", "a"]
        others = plan_compensation(run, COMPILED.plan, tasks=["a"])
        assert others.executable and [s.source_task_id for s in others.steps] == ["a"]
    for state in ("failed", "cancelled", "skipped", "succeeded"):
        ended = OpenInverse("run-comp", "b--compensate", state)
        run = dataclasses.replace(source(), open_inverses=(ended,))
        assert plan_compensation(run, COMPILED.plan).executable


def test_a_held_task_with_nothing_left_to_undo_is_not_blocked() -> None:
    done = effect("b", reconciliation="compensated")
    run = with_task(source(), "b", effects=(done,))
    held = OpenInverse("run-comp", "b--compensate", "waiting_for_approval")
    plan = plan_compensation(dataclasses.replace(run, open_inverses=(held,)), COMPILED.plan)
    assert plan.executable and plan.already_compensated == (done.effect_id,)


def test_tasks_without_compensate_are_never_planned() -> None:
    plan = plan_compensation(source(), COMPILED.plan)
    assert "w" not in [s.source_task_id for s in plan.steps]


def test_task_filter() -> None:
    plan = plan_compensation(source(), COMPILED.plan, tasks=["a"])
    assert [s.source_task_id for s in plan.steps] == ["a"] and plan.executable
    unknown = plan_compensation(source(), COMPILED.plan, tasks=["a", "ghost"])
    assert [(b.task_id, b.rule) for b in unknown.blocked] == [
        ("ghost", "compensation_task_missing")
    ]
    assert not unknown.executable
    undeclared = plan_compensation(source(), COMPILED.plan, tasks=["w"])
    assert [b.rule for b in undeclared.blocked] == ["compensation_not_declared"]


def test_source_must_be_terminal() -> None:
    run = succeeded_run(COMPILED, state="running")
    plan = plan_compensation(run, COMPILED.plan)
    assert [b.rule for b in plan.blocked] == ["source_not_terminal"] and not plan.executable


def test_compensation_document_compiles_to_the_reverse_sequential_run() -> None:
    plan = plan_compensation(source(), COMPILED.plan)
    original = copy.deepcopy(COMPILED.document)
    document = compensation_document(COMPILED.document, plan)
    assert COMPILED.document == original
    assert set(document["spec"]) == set(original["spec"])
    assert document["metadata"] == original["metadata"]
    assert document["spec"]["outputs"] == {}
    assert document["spec"]["runtime"]["maxConcurrency"] == 1
    for task in document["spec"]["tasks"]:
        assert set(task) == set(original["spec"]["tasks"][0])
        assert task["failure"] == "continue" and task["needs"] == []
    compiled = compile_workflow(document)
    assert compiled.order == ("m--compensate", "b--compensate", "a--compensate")
    first = compiled.task("a--compensate")
    assert first.action == "blank" and first.with_ == {"content": "", "path": "a.txt"}
    assert (first.retry.max_attempts, first.retry.backoff_ms, first.timeout_seconds) == (3, 5, 9)
    assert compiled.task("m--compensate").memory_writes == ("k",)


FANNED = """
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: fanned }
spec:
  policy: { approval: never, writableRoots: [out] }
  actions:
    write: { kind: builtin.write }
  tasks:
    - id: fan
      uses: action:write
      foreach: { items: [ada, lin], as: name, maxItems: 2 }
      vars: { note: n }
      with: { path: "out/${{ vars.name }}", content: x }
      compensate: { uses: "action:write", with: { path: "out/${{ vars.name }}", content: "${{ vars.foreachIndex }}" } }
"""


def test_a_childs_engine_bindings_reach_its_step_as_bindings_not_vars() -> None:
    compiled = compile_yaml(FANNED)
    plan = plan_compensation(succeeded_run(compiled), compiled.plan)
    child = next(s for s in plan.steps if s.bindings.get("name") == "lin")
    assert child.bindings == {"name": "lin", "foreachIndex": 1}
    assert child.vars == {"note": "n"}
    document = compensation_document(compiled.document, plan)
    bound = compile_workflow(document, bindings=step_bindings(plan))
    task = bound.task(child.compensation_task_id)
    assert task.bindings == {"name": "lin", "foreachIndex": 1}
    assert task.vars == {"note": "n", "name": "lin", "foreachIndex": 1}
    # The bindings count in the task's fingerprint and the plan digest, as a child's do, and
    # the stored plan (what a resumed compensation run runs) keeps them.
    other = {**step_bindings(plan), child.compensation_task_id: {"name": "lin", "foreachIndex": 7}}
    moved = compile_workflow(document, bindings=other)
    assert (
        moved.task(child.compensation_task_id).definition_fingerprint != task.definition_fingerprint
    )
    assert moved.plan_digest != bound.plan_digest
    # Without them the inverse's read of `vars.foreachIndex` could never render: refused.
    with pytest.raises(ValidationError, match=r"vars\.foreachIndex"):
        compile_workflow(document)
    stored = plan_from_stored(json.loads(plan_to_stored_text(bound)))
    assert stored.task(child.compensation_task_id).vars == task.vars


def test_naming_an_aggregate_selects_its_children() -> None:
    compiled = compile_yaml(FANNED)
    plan = plan_compensation(succeeded_run(compiled), compiled.plan, tasks=["fan"])
    children = compiled.plan.task("fan").children
    assert plan.executable and plan.blocked == ()
    assert sorted(s.source_task_id for s in plan.steps) == sorted(children)
    one = plan_compensation(succeeded_run(compiled), compiled.plan, tasks=[children[1]])
    assert [s.source_task_id for s in one.steps] == [children[1]]


def test_bindings_for_a_task_the_document_lacks_are_the_callers_bug() -> None:
    compiled = compile_yaml(FANNED)
    with pytest.raises(ValueError, match="nope"):
        compile_workflow(compiled.document, bindings={"nope": {"foreachIndex": 0}})
