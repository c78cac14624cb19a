"""The stored plan's task texts made by the compile (``Plan.carrying_stored_tasks``).

The compile joins each task's stored form from the runs of canonical JSON it made for the
task's fingerprint and plan-digest member; the run's creation stores those texts instead of
encoding every task again. They must be exactly the encoding of each stored task, be used
only for the plan the compile made (not a copy, a pickle or a changed plan), and be absent
where a task's stored form has a key the texts lack (sub-workflow boundaries).
"""

from __future__ import annotations

import copy
import dataclasses
import pickle
from pathlib import Path

import pytest
from test_stored_plan import EXAMPLE_FILES

from agentctl.core.canonical import canonical_json
from agentctl.core.compiler import compile_workflow, stored
from agentctl.core.compiler.stored import plan_to_stored, plan_to_stored_text
from agentctl.core.dsl import load_workflow
from agentctl.core.plan import Plan
from agentctl.packsource import with_packs


def _compiled(path: Path) -> Plan:
    loaded = with_packs(load_workflow(path.read_bytes(), str(path)), path)
    return compile_workflow(loaded.document)


def _chain(n: int) -> Plan:
    tasks = [
        {"id": f"t{i}", "uses": "action:a", "with": {"i": i}, "needs": [f"t{i - 1}"] if i else []}
        for i in range(n)
    ]
    return compile_workflow(
        load_workflow(
            canonical_json(
                {
                    "apiVersion": "agentctl.dev/v1alpha1",
                    "kind": "Workflow",
                    "metadata": {"name": "chain"},
                    "spec": {"actions": {"a": {"kind": "builtin.assign"}}, "tasks": tasks},
                }
            )
        ).document
    )


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: p.name)
def test_carried_texts_are_each_stored_task_encoded(path: Path) -> None:
    plan = _compiled(path)
    texts = plan.stored_tasks()
    if any(t.subworkflow is not None for t in plan.tasks):
        assert texts is None  # a boundary's stored form has a key more: encoded as before
        return
    assert texts == tuple(
        canonical_json(plan_to_stored(plan)["tasks"][i]) for i in range(len(plan.tasks))
    )  # type: ignore[index]


def test_the_stored_plan_is_joined_from_the_carried_texts(monkeypatch: pytest.MonkeyPatch) -> None:
    plan = _chain(5)
    expected = canonical_json(plan_to_stored(plan))

    def refuse(_task: object) -> object:
        raise AssertionError("a task encoded again")

    monkeypatch.setattr(stored, "_stored_task", refuse)
    pieces = stored.plan_to_stored_pieces(plan)
    started = [next(pieces) for _ in range(3)]  # a write given up part way (stored inline)
    del started, pieces
    assert plan_to_stored_text(plan) == expected  # the texts again, then let go
    assert plan.stored_tasks() is None
    monkeypatch.undo()
    assert plan_to_stored_text(plan) == expected  # made again: encoded, the same text


def test_only_the_compiled_plan_itself_carries_them() -> None:
    plan = _chain(3)
    assert plan.stored_tasks() is not None
    assert copy.copy(plan).stored_tasks() is None
    assert copy.deepcopy(plan).stored_tasks() is None
    assert pickle.loads(pickle.dumps(plan)).stored_tasks() is None
    assert dataclasses.replace(plan, name="other").stored_tasks() is None
    assert copy.copy(plan) == plan  # the texts are outside the fields
    # Texts kept for another tasks tuple (a plan changed in place) are not given.
    object.__setattr__(plan, "tasks", plan.tasks[:2])
    assert plan.stored_tasks() is None


def test_a_plan_not_compiled_encodes_its_tasks() -> None:
    plan = _chain(3)
    made = dataclasses.replace(plan)  # the same fields, built anew: nothing carried
    assert made.stored_tasks() is None
    assert plan_to_stored_text(made) == plan_to_stored_text(plan)
