"""Retry/repair with new run inputs: a reused task that reads a changed input blocks
(``resolved_input_digest_mismatch``), wherever it reads it; one that reads none stays reused."""

from __future__ import annotations

import dataclasses

import pytest
from test_recovery_helpers import always_ok, compile_yaml, succeeded_run

from agentctl.core.recovery import plan_repair, plan_retry

WORKFLOW = """
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: ins }
spec:
  inputs: { n: 2, word: hi, flag: true, undo: x }
  actions:
    put: { kind: builtin.assign }
    write: { kind: builtin.write }
  tasks:
    - { id: templ, uses: "action:put", with: { n: "${{ inputs.n }}" } }
    - { id: bare, uses: "action:put", when: "inputs.flag", with: { x: 1 } }
    - { id: plain, uses: "action:put", with: { w: "${{ inputs.word }}" } }
    - { id: inverse, uses: "action:write", with: { path: f.txt, content: A }, compensate: { uses: "action:write", with: { path: f.txt, content: "${{ inputs.undo }}" } } }
    - { id: tail, uses: "action:put", needs: [plain], with: { x: 2 } }
"""

COMPILED = compile_yaml(WORKFLOW)
SOURCE = dataclasses.replace(
    succeeded_run(COMPILED), inputs={"n": 2, "word": "hi", "flag": True, "undo": "x"}
)


def _repair(**inputs: object):  # type: ignore[no-untyped-def]
    new = {**SOURCE.inputs, **inputs}
    return plan_repair(
        SOURCE,
        COMPILED.plan,
        roots=["tail"],
        restart_successful=True,
        artifact_ok=always_ok,
        inputs=new,
    )


@pytest.mark.parametrize(
    ("name", "value", "reader"),
    [("n", 4, "templ"), ("flag", False, "bare"), ("word", "yo", "plain"), ("undo", "", "inverse")],
)
def test_the_task_reading_a_changed_input_blocks_and_the_others_are_reused(
    name: str, value: object, reader: str
) -> None:
    plan = _repair(**{name: value})
    assert not plan.compatible
    assert [(b.task_id, b.rule) for b in plan.blocked] == [
        (reader, "resolved_input_digest_mismatch")
    ]
    assert plan.blocked[0].suggested_repair_roots == (reader,)
    assert name in plan.blocked[0].message
    others = {"templ", "bare", "plain", "inverse"} - {reader}
    assert set(plan.reuse) == others
    assert any(f"differ from run run-src's in {name};" in w for w in plan.warnings)


def test_inputs_equal_to_the_sources_change_nothing() -> None:
    same = _repair(n=2, word="hi")
    assert same.compatible and not same.warnings
    assert set(same.reuse) == {"templ", "bare", "plain", "inverse"}
    # true and 1 are equal in Python but not in JSON (spec/dsl.md §6.3): a changed input.
    assert not _repair(flag=1).compatible


def test_retry_root_reading_the_changed_input_executes() -> None:
    plan = plan_retry(
        SOURCE,
        COMPILED.plan,
        failed_only=False,
        roots=["templ"],
        restart_successful=True,
        artifact_ok=always_ok,
        inputs={**SOURCE.inputs, "n": 4},
    )
    assert plan.compatible and plan.execute == ("templ",)
    assert set(plan.reuse) == {"bare", "plain", "inverse", "tail"}
