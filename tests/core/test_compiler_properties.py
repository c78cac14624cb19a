"""Hypothesis properties of the compiler: order, cycles and digest stability."""

from __future__ import annotations

import copy
import itertools
import random
from typing import Any

from compiler_docs import task, workflow
from hypothesis import given, settings
from hypothesis import strategies as st

from agentctl.core.compiler import compile_workflow
from agentctl.core.plan import Plan
from agentctl.errors import ValidationError


def reference_order(ids: list[str], needs: dict[str, list[str]]) -> list[str] | None:
    """Naive reference: keep taking the first declared task whose needs are all placed."""
    placed: list[str] = []
    while len(placed) < len(ids):
        ready = [i for i in ids if i not in placed and all(n in placed for n in needs[i])]
        if not ready:
            return None
        placed.append(ready[0])
    return placed


@st.composite
def dags(draw: st.DrawFn) -> tuple[list[str], dict[str, list[str]]]:
    count = draw(st.integers(min_value=1, max_value=12))
    ranked = [f"t{i}" for i in range(count)]  # edges only point to lower ranks: acyclic
    needs = {
        name: draw(st.lists(st.sampled_from(ranked[:rank]), unique=True)) if rank else []
        for rank, name in enumerate(ranked)
    }
    declared = draw(st.permutations(ranked))
    return list(declared), needs


def _doc(ids: list[str], needs: dict[str, list[str]]) -> dict[str, Any]:
    return workflow([task(i, needs=needs[i]) for i in ids])


@settings(max_examples=150, deadline=None)
@given(dags())
def test_order_respects_needs_and_declaration_tie_break(
    graph: tuple[list[str], dict[str, list[str]]],
) -> None:
    ids, needs = graph
    plan = compile_workflow(_doc(ids, needs))
    assert list(plan.order) == reference_order(ids, needs)
    seen: set[str] = set()
    for task_id in plan.order:
        assert set(needs[task_id]) <= seen
        seen.add(task_id)


@st.composite
def cyclic_graphs(draw: st.DrawFn) -> tuple[list[str], dict[str, list[str]]]:
    ids, needs = draw(dags())
    members = draw(st.lists(st.sampled_from(ids), min_size=1, unique=True))
    for index, member in enumerate(members):  # m0 needs m1 needs ... needs m0
        target = members[(index + 1) % len(members)]
        if target not in needs[member]:
            needs[member] = [*needs[member], target]
    return ids, needs


@settings(max_examples=150, deadline=None)
@given(cyclic_graphs())
def test_every_cycle_is_rejected_and_named(graph: tuple[list[str], dict[str, list[str]]]) -> None:
    ids, needs = graph
    assert reference_order(ids, needs) is None
    try:
        compile_workflow(_doc(ids, needs))
    except ValidationError as exc:
        [diag] = exc.diagnostics
        assert diag.code == "dependency_cycle"
        cycle = diag.message.removeprefix("task dependency cycle: ").split(" -> ")
        assert cycle[0] == cycle[-1]
        assert all(b in needs[a] for a, b in itertools.pairwise(cycle))
    else:
        raise AssertionError("a cyclic graph compiled")


def rich_doc() -> dict[str, Any]:
    """A document using most features, so digests cover them."""
    shout = {
        "version": "0.1.0",
        "inputs": {"word": "hey", "extra": {"b": 1, "a": 2}},
        "outputs": {"loud": "${{ tasks.echo.output.output.w }}"},
        "tasks": [task("echo", with_={"w": "${{ inputs.word }}", "z": 1, "a": 2})],
    }
    return workflow(
        [
            task("left", "action:remember", with_={"key": "left", "value": {"y": 1, "x": 2}}),
            task("fan", foreach={"items": ["dev", "prod"], "as": "env", "maxItems": 2}),
            task("grid", matrix={"axes": {"os": ["l", "m"], "arch": ["a"]}, "maxItems": 4}),
            task("wrap", "workflow:shout", needs=["left"], with_={"word": "hi"}),
            task(
                "poll",
                loop={"maxIterations": 2, "while": "${{ vars.loopIndex < 1 }}", "initial": {}},
            ),
            task("report", needs=["fan", "grid", "wrap"], with_={"a": 1, "b": [1, {"d": 1}]}),
        ],
        max_concurrency=2,
        vars={"q": 1, "p": 2},
        subworkflows={"shout": shout},
    )


def shuffled(value: Any, rng: random.Random) -> Any:
    if isinstance(value, dict):
        keys = list(value)
        rng.shuffle(keys)
        return {key: shuffled(value[key], rng) for key in keys}
    if isinstance(value, list):
        return [shuffled(item, rng) for item in value]
    return value


def _identity(plan: Plan) -> tuple[Any, ...]:
    return (
        plan.workflow_digest,
        plan.plan_digest,
        plan.order,
        tuple(t.definition_fingerprint for t in plan.tasks),
    )


BASELINE = _identity(compile_workflow(rich_doc()))


@settings(max_examples=60, deadline=None)
@given(st.randoms(use_true_random=False))
def test_digests_ignore_key_order(rng: random.Random) -> None:
    assert _identity(compile_workflow(shuffled(rich_doc(), rng))) == BASELINE


def _changed_with(doc: dict[str, Any]) -> None:
    doc["spec"]["tasks"][5]["with"]["a"] = 2


def _added_need(doc: dict[str, Any]) -> None:
    doc["spec"]["tasks"][5]["needs"].append("left")


def _subworkflow_input(doc: dict[str, Any]) -> None:
    doc["spec"]["subworkflows"]["shout"]["inputs"]["extra"]["a"] = 3


def _action_default(doc: dict[str, Any]) -> None:
    doc["spec"]["actions"]["put"]["with"] = {"d": 1}


def _foreach_item(doc: dict[str, Any]) -> None:
    doc["spec"]["tasks"][1]["foreach"]["items"][1] = "stage"


@settings(max_examples=10, deadline=None)
@given(st.sampled_from([_changed_with, _added_need, _subworkflow_input, _foreach_item]))
def test_semantic_changes_change_digests(change: Any) -> None:
    doc = copy.deepcopy(rich_doc())
    change(doc)
    workflow_digest, plan_digest, _, fingerprints = _identity(compile_workflow(doc))
    assert workflow_digest != BASELINE[0]
    assert plan_digest != BASELINE[1]
    assert fingerprints != BASELINE[3]


def test_action_default_change_changes_plan_and_fingerprints() -> None:
    doc = rich_doc()
    _action_default(doc)
    plan = compile_workflow(doc)
    assert plan.workflow_digest != BASELINE[0] and plan.plan_digest != BASELINE[1]
    base = compile_workflow(rich_doc())
    assert plan.task("report").definition_fingerprint != base.task("report").definition_fingerprint
    assert plan.task("left").definition_fingerprint == base.task("left").definition_fingerprint
