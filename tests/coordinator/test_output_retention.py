"""Finished outputs stay in the coordinator's memory only while an unfinished task reads them.

Plans come from the real compiler; the driver's bookkeeping (``Retention`` and
``settle_output``) is walked task by task in compiled order, as the driver applies results.
"""

from __future__ import annotations

from typing import Any

from agentctl.coordinator.live import Live, Retention, settle_output
from agentctl.core.compiler import compile_workflow
from agentctl.core.compiler.reads import run_output_reads, task_reads
from agentctl.core.plan import Plan


def _doc(tasks: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "agentctl.dev/v1alpha1",
        "kind": "Workflow",
        "metadata": {"name": "retention"},
        "spec": {"actions": {"put": {"kind": "builtin.assign"}}, **spec, "tasks": tasks},
    }


def _chain(n: int) -> list[dict[str, Any]]:
    tasks: list[dict[str, Any]] = [{"id": "t0", "uses": "action:put", "with": {"i": 0}}]
    for i in range(1, n):
        tasks.append({"id": f"t{i}", "uses": "action:put", "needs": [f"t{i - 1}"]})
    return tasks


def _walk(plan: Plan) -> list[set[str]]:
    """Finish every task in compiled order; the outputs held in memory after each one."""
    live = Live(inputs={}, memory={}, states=dict.fromkeys(plan.order, "pending"), attempts={})
    retention = Retention(plan, live.states)
    held = []
    for task in plan.tasks:
        live.states[task.id] = "succeeded"
        settle_output(live, retention, task.id, {"from": task.id})
        held.append(set(live.outputs))
    return held


def test_a_chain_holds_one_output_at_a_time() -> None:
    plan = compile_workflow(_doc(_chain(50)))
    held = _walk(plan)
    assert held[:3] == [{"t0"}, {"t1"}, {"t2"}]
    assert held[-1] == set()  # nothing unfinished reads the last one


def test_a_condition_keeps_a_far_output_until_its_reader_finishes() -> None:
    tasks = _chain(6)
    tasks.append(
        {
            "id": "late",
            "uses": "action:put",
            "needs": ["t5"],
            "when": "tasks.t0.output.output.i == 0",
        }
    )
    plan = compile_workflow(_doc(tasks))
    assert set(task_reads(plan.task("late"))) == {"t5", "t0"}
    held = _walk(plan)
    assert all("t0" in h for h in held[:6])  # read by `late`'s condition, not by its needs
    assert held[-1] == set()


def test_templates_name_the_outputs_a_task_reads() -> None:
    tasks = _chain(3)
    tasks.append(
        {
            "id": "use",
            "uses": "action:put",
            "needs": ["t2", "t0"],
            "vars": {"v": "${{ tasks.t0.output.output }}"},
            "with": {"x": "${{ tasks.t2.output.output }}"},
        }
    )
    plan = compile_workflow(_doc(tasks, outputs={"x": "${{ tasks.t1.output.output }}"}))
    assert task_reads(plan.task("use")) == ("t2", "t0")
    assert task_reads(plan.task("t1")) == ("t0",)
    assert run_output_reads(plan) == ("t1",)
    assert run_output_reads(compile_workflow(_doc(_chain(2)))) is None  # every task's output


def test_a_task_releases_its_reads_once() -> None:
    plan = compile_workflow(_doc(_chain(3)))
    retention = Retention(plan, dict.fromkeys(plan.order, "pending"))
    assert retention.release("t1") == ["t0"]
    assert retention.release("t1") == []
    assert not retention.keeps("t0") and retention.keeps("t1")
