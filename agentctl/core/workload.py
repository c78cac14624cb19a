"""What a plan asks of the worker pool: how many processes its effects need, which executors.

A worker runs many effects at once (each in its own trio task), so the pool is sized by the
kind of work rather than by ``maxConcurrency`` alone:

- an *I/O-bound* effect (a model call, an HTTP call, a remote agent) spends its time waiting
  on the network; ``IO_EFFECTS_PER_WORKER`` of them share one worker;
- a *process* effect (a shell command, a process extension) does its work in its own child
  process: the worker only spawns it and drains its pipes, about a millisecond of the
  worker's CPU, so ``PROCESS_EFFECTS_PER_WORKER`` of them share one worker — a second worker
  costs ~0.2 s of CPU to start, more than it saves on a batch of that size (issue 15: 64
  sleeps through one worker finish sooner than through two on a 2-CPU machine);
- every other worker-placed effect (files) does real work in the worker itself, so those get
  up to one worker per CPU, as many as may run at once.

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
# Concurrent child processes one worker supervises before another worker is worth it.
PROCESS_EFFECTS_PER_WORKER = 64


def _per_worker(op: Operation) -> int:
    """How many concurrent effects of ``op``'s kind one worker serves (module docstring)."""
    if op.effect_class in IO_BOUND:
        return IO_EFFECTS_PER_WORKER
    if op.effect_class == EffectClass.PROCESS_EXECUTION:
        return PROCESS_EFFECTS_PER_WORKER
    return 1


@dataclass(frozen=True)
class Workload:
    """The worker-placed part of a plan."""

    worker_tasks: int  # tasks with at least one worker-placed effect
    per_worker: int  # concurrent effects one worker serves: the least of the plan's kinds
    executors: tuple[str, ...]  # "module:function", sorted

    @property
    def cpu_bound(self) -> bool:
        """Some worker-placed effect does real work in the worker itself."""
        return self.per_worker == 1

    def pool_size(self, max_concurrency: int, cpus: int) -> int:
        """The most worker processes the run can use (see the module docstring)."""
        cpus, wanted = max(1, cpus), max(1, max_concurrency)
        return min(math.ceil(wanted / self.per_worker), cpus)

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
    tasks, per_worker, executors = 0, max(IO_EFFECTS_PER_WORKER, PROCESS_EFFECTS_PER_WORKER), set()
    for task in plan.tasks:
        operations = _task_operations(task)
        tasks += bool(operations)
        for op in operations:
            per_worker = min(per_worker, _per_worker(op))
            if op.executor is not None:
                executors.add(op.executor)
    return Workload(tasks, per_worker, tuple(sorted(executors)))
