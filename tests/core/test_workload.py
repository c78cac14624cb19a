"""What a compiled plan asks of the worker pool (``core.workload``): size and executors."""

from __future__ import annotations

from typing import Any

import yaml

from agentctl.core.compiler import compile_workflow
from agentctl.core.dsl import load_workflow
from agentctl.core.workload import IO_EFFECTS_PER_WORKER, PROCESS_EFFECTS_PER_WORKER, workload

READ_TOOL = {
    "kind": "builtin.workspace.read",
    "description": "read",
    "inputSchema": {
        "type": "object",
        "properties": {"path": {"type": "string"}},
        "required": ["path"],
        "additionalProperties": False,
    },
}


def plan_of(agents: int, *, shell: bool = False, tool: bool = False, concurrency: int = 8) -> Any:
    tasks: list[dict[str, Any]] = [
        {"id": f"a{i}", "uses": "agent:w", "with": {"prompt": f"q{i}"}} for i in range(agents)
    ]
    tasks.append({"id": "note", "uses": "action:note", "with": {"x": 1}})
    actions: dict[str, Any] = {"note": {"kind": "builtin.assign"}}
    if shell:
        actions["say"] = {"kind": "builtin.shell.exec", "command": "/bin/echo", "args": ["hi"]}
        tasks.append({"id": "say", "uses": "action:say"})
    agent: dict[str, Any] = {"provider": "main", "model": "m", "instructions": "Answer."}
    spec: dict[str, Any] = {
        "policy": {"approval": "never", "processAllowlist": ["echo"], "toolsAllow": ["peek"]},
        "providers": {"main": {"kind": "openai"}},
        "agents": {"w": {**agent, "tools": ["peek"]} if tool else agent},
        "actions": actions,
        "runtime": {"maxConcurrency": concurrency},
        "tasks": tasks,
    }
    if tool:
        spec["tools"] = {"peek": READ_TOOL}
    doc = {"apiVersion": "agentctl.dev/v1alpha1", "kind": "Workflow"}
    doc |= {"metadata": {"name": "w"}, "spec": spec}
    return compile_workflow(dict(load_workflow(yaml.safe_dump(doc)).document))


def test_model_calls_share_workers() -> None:
    plan = plan_of(8)
    needs = workload(plan)
    assert needs.worker_tasks == 8 and not needs.cpu_bound
    assert needs.pool_size(plan.max_concurrency, cpus=2) == 1
    many = IO_EFFECTS_PER_WORKER * 2 + 1
    assert needs.pool_size(many, cpus=8) == 3 and needs.pool_size(many, cpus=2) == 2
    assert needs.modules() == ("agentctl.workers.executors.providers.openai_responses",)


def test_process_effects_share_a_worker_up_to_a_batch() -> None:
    plan = plan_of(0, shell=True, concurrency=PROCESS_EFFECTS_PER_WORKER)
    needs = workload(plan)
    assert needs.worker_tasks == 1 and not needs.cpu_bound
    assert needs.pool_size(plan.max_concurrency, cpus=16) == 1
    assert needs.pool_size(PROCESS_EFFECTS_PER_WORKER + 1, cpus=16) == 2
    assert "agentctl.workers.executors.shell" in needs.modules()


def test_model_calls_with_process_effects_share_at_the_smaller_rate() -> None:
    plan = plan_of(8, shell=True)
    needs = workload(plan)
    assert needs.worker_tasks == 9
    many = IO_EFFECTS_PER_WORKER * 2 + 1
    assert needs.pool_size(many, cpus=8) == 3


def test_file_effects_get_a_worker_per_cpu() -> None:
    needs = workload(plan_of(2, tool=True))
    assert needs.cpu_bound  # the workspace read runs in the worker itself
    assert needs.pool_size(8, cpus=2) == 2 and needs.pool_size(8, cpus=16) == 8


def test_an_agents_tools_count_with_its_model_calls() -> None:
    needs = workload(plan_of(2, tool=True))
    assert needs.cpu_bound  # the workspace read runs in the worker itself
    assert "agentctl.workers.executors.files" in needs.modules()


def test_a_plan_without_worker_effects_needs_no_worker() -> None:
    needs = workload(plan_of(0))
    assert needs.worker_tasks == 0 and needs.executors == ()
