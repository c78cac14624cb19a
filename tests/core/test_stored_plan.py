"""The compiled plan stored with a run: an exact round trip, and nothing it adds is printed.

``plan → JSON text → plan`` must give back an equal plan (tasks, carried action/agent
configurations, run settings), over every example workflow, the spec's examples, a document
using most features, and hypothesis-generated DAGs. The carried data must never change the
plan digest, the fingerprints or the printed plan.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from compiler_docs import task, workflow
from hypothesis import given, settings
from test_compiler_properties import dags, rich_doc
from test_dsl_examples import EXAMPLES

from agentctl.core.canonical import canonical_json
from agentctl.core.compiler import compile_workflow, plan_to_json
from agentctl.core.compiler.serialize import task_json
from agentctl.core.compiler.stored import plan_from_stored, plan_to_stored, plan_to_stored_text
from agentctl.core.dsl import load_workflow
from agentctl.core.plan import Plan, RunConfig
from agentctl.errors import FutureVersionError
from agentctl.packsource import with_packs

EXAMPLE_FILES = sorted(
    p
    for p in (Path(__file__).resolve().parents[2] / "examples").rglob("*.yaml")
    if p.name != "agentctl.pack.yaml"  # pack manifests, not workflows
)


def _round_trip(plan: Plan) -> Plan:
    text = plan_to_stored_text(plan)  # what a run stores: encoded task by task
    assert text == canonical_json(plan_to_stored(plan))
    return plan_from_stored(json.loads(text))


def _check(plan: Plan) -> None:
    back = _round_trip(plan)
    assert back == plan
    assert [t.action_config for t in back.tasks] == [t.action_config for t in plan.tasks]
    assert [t.agent_config for t in back.tasks] == [t.agent_config for t in plan.tasks]
    assert back.run == plan.run
    assert plan_to_json(back) == plan_to_json(plan)


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: p.name)
def test_every_example_round_trips(path: Path) -> None:
    loaded = with_packs(load_workflow(path.read_bytes(), str(path)), path)
    _check(compile_workflow(loaded.document))


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_every_spec_example_round_trips(name: str) -> None:
    try:
        loaded = load_workflow(EXAMPLES[name], f"{name}.yaml")
        plan = compile_workflow(loaded.document)
    except Exception:  # examples that show a diagnostic have no plan to store
        pytest.skip("no plan")
    _check(plan)


def test_a_document_using_most_features_round_trips() -> None:
    _check(compile_workflow(rich_doc()))


@settings(max_examples=100, deadline=None)
@given(dags())
def test_generated_dags_round_trip(graph: tuple[list[str], dict[str, list[str]]]) -> None:
    ids, needs = graph
    _check(compile_workflow(workflow([task(i, needs=needs[i]) for i in ids])))


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: p.name)
def test_carried_data_is_outside_every_digest(path: Path) -> None:
    plan = compile_workflow(with_packs(load_workflow(path.read_bytes(), str(path)), path).document)
    carried = {"operation": None, "action_config": None, "agent_config": None}
    bare = tuple(dataclasses.replace(t, **carried) for t in plan.tasks)
    stripped = dataclasses.replace(plan, tasks=bare, run=RunConfig())
    # The plan digest is taken over exactly these task shapes, and the plan prints them.
    assert [task_json(t) for t in bare] == [task_json(t) for t in plan.tasks]
    assert plan_to_json(stripped) == plan_to_json(plan)


def test_an_unknown_stored_format_is_refused() -> None:
    stored = plan_to_stored(compile_workflow(rich_doc()))
    with pytest.raises(FutureVersionError):
        plan_from_stored({**stored, "format": 2})


AGENT_TASKS = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: bounded }
spec:
  runtime: { defaultTimeoutSeconds: 45 }
  providers: { sim: { kind: fake } }
  agents: { a: { provider: sim, model: m, instructions: go } }
  tasks:
    - { id: bounded, uses: "agent:a", with: { prompt: x }, timeoutSeconds: 9 }
    - { id: unbounded, uses: "agent:a", with: { prompt: y } }
"""


def test_an_agent_tasks_own_timeout_is_carried_and_optional_in_the_stored_plan() -> None:
    plan = compile_workflow(load_workflow(AGENT_TASKS.encode(), "wf.yaml").document)
    bounded, unbounded = plan.tasks
    # The resolved timeout cannot tell the task's own from the default; the carried one can.
    assert (bounded.timeout_seconds, bounded.agent_timeout_seconds) == (9, 9)
    assert (unbounded.timeout_seconds, unbounded.agent_timeout_seconds) == (45, None)
    _check(plan)
    stored = plan_to_stored(plan)
    tasks = stored["tasks"]
    assert isinstance(tasks, list)
    assert [t.get("agentTimeoutSeconds") for t in tasks] == [9, None]
    assert "agentTimeoutSeconds" not in tasks[1]  # a task without one stores what it did
    # A plan stored before the key existed loads, its agent tasks unbounded as they were.
    older = [{k: v for k, v in t.items() if k != "agentTimeoutSeconds"} for t in tasks]
    loaded = plan_from_stored({**stored, "tasks": older})
    assert [t.agent_timeout_seconds for t in loaded.tasks] == [None, None]
    # Outside every digest: the task's fingerprint and printed shape are its resolved ones.
    assert task_json(dataclasses.replace(bounded, agent_timeout_seconds=None)) == task_json(bounded)
