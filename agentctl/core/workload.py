"""What a plan asks of the worker pool: how many processes its effects need, which executors.

A worker runs many effects at once (each in its own trio task), so the pool is sized by the
kind of work rather than by ``maxConcurrency`` alone:

- an *I/O-bound* effect (a model call, an HTTP call, a remote agent) spends its time waiting
  on the network; ``IO_EFFECTS_PER_WORKER`` of them share one worker;
- every other worker-placed effect (files, processes, extensions) may do real work in the
  worker itself, so those get up to one worker per CPU, as many as may run at once.

Invariants: pure (reads the plan and the registry only); the size is at least 1 and at most
the number of CPUs; the executors listed are exactly those the plan's actions, agents' model
calls and agents' tools name in the registry, in a stable order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from agentctl.core import registry
from agentctl.core.effects import EffectClass
from agentctl.core.operations import Operation
from agentctl.core.plan import Plan, PlannedTask

IO_BOUND = frozenset({EffectClass.MODEL, EffectClass.NETWORK, EffectClass.REMOTE_AGENT})
# Concurrent waiting effects one worker serves before another worker is worth its start-up.
IO_EFFECTS_PER_WORKER = 16


@dataclass(frozen=True)
class Workload:
    """The worker-placed part of a plan."""

    worker_tasks: int  # tasks with at least one worker-placed effect
    cpu_bound: bool  # some worker-placed effect may do real work in the worker
    executors: tuple[str, ...]  # "module:function", sorted

    def pool_size(self, max_concurrency: int, cpus: int) -> int:
        """The most worker processes the run can use (see the module docstring)."""
        cpus, wanted = max(1, cpus), max(1, max_concurrency)
        if self.cpu_bound:
            return min(wanted, cpus)
        return min(math.ceil(wanted / IO_EFFECTS_PER_WORKER), cpus)

    def modules(self) -> tuple[str, ...]:
        """The executor modules a worker of this plan will import."""
        return tuple(sorted({target.partition(":")[0] for target in self.executors}))


def _task_operations(task: PlannedTask) -> list[Operation]:
    if task.kind not in ("action", "agent"):
        return []
    found = [entry] if (entry := task.entry) is not None else []
    if task.agent_config is not None:
        for tool in task.agent_config.tools.values():
            tool_entry = registry.find(str(tool.get("kind")))
            if tool_entry is not None:
                found.append(tool_entry)
    return [op for op in found if op.placement == "worker"]


def workload(plan: Plan) -> Workload:
    """What ``plan``'s worker-placed effects need (see ``Workload``)."""
    tasks, cpu_bound, executors = 0, False, set()
    for task in plan.tasks:
        operations = _task_operations(task)
        tasks += bool(operations)
        for op in operations:
            cpu_bound |= op.effect_class not in IO_BOUND
            if op.executor is not None:
                executors.add(op.executor)
    return Workload(tasks, cpu_bound, tuple(sorted(executors)))
