"""Which tasks are ready, in compiled order, maintained incrementally.

A task is ready when its state can be scheduled and every task it needs is terminal. Counting
unfinished needs per task (instead of rescanning the plan every batch) keeps scheduling linear
in the number of tasks, so a 10,000-task chain does not cost 10,000² checks.

Invariant: ``ready`` holds exactly the positions of schedulable tasks whose needs are all
terminal; the driver takes tasks out when it starts them and reports every state change back.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from agentctl.core.plan import Plan, PlannedTask

TERMINAL = frozenset({"succeeded", "failed", "skipped", "cancelled"})
SCHEDULABLE = frozenset(
    {"pending", "retry_scheduled", "running", "waiting_for_effect", "waiting_for_approval"}
)
WAITING = frozenset({"waiting_for_effect", "waiting_for_approval"})


class Scheduler:
    def __init__(self, plan: Plan, states: Mapping[str, str]) -> None:
        self.plan = plan
        self.states = states  # the driver's live mapping; read, never written here
        self.dependants: dict[str, list[str]] = {t.id: [] for t in plan.tasks}
        # Each task's position by id (the plan's map): ``settle`` looks up every task and its
        # dependants, one dict read each instead of a ``plan.task`` call.
        self.positions = plan.index
        self.unfinished: dict[str, int] = {}
        self.ready: set[int] = set()
        for task in plan.tasks:
            for need in task.needs:
                self.dependants[need].append(task.id)
            self.unfinished[task.id] = sum(1 for n in task.needs if states[n] not in TERMINAL)
            if states[task.id] in SCHEDULABLE and self.unfinished[task.id] == 0:
                self.ready.add(task.position)

    def ready_tasks(self, eligible: Callable[[PlannedTask], bool], limit: int) -> list[PlannedTask]:
        """Up to ``limit`` ready tasks in compiled order that ``eligible`` lets through now."""
        out: list[PlannedTask] = []
        for position in sorted(self.ready):
            task = self.plan.tasks[position]
            if eligible(task):
                out.append(task)
                if len(out) == limit:
                    break
        return out

    def take(self, task: PlannedTask) -> None:
        self.ready.discard(task.position)

    def settle(self, task_id: str, state: str) -> None:
        """Record a task's new state: release its dependants once it is terminal."""
        position = self.positions[task_id]
        if state in TERMINAL:
            self.ready.discard(position)
            for dependant in self.dependants[task_id]:
                self.unfinished[dependant] -= 1
                if self.unfinished[dependant] == 0 and self.states[dependant] in SCHEDULABLE:
                    self.ready.add(self.positions[dependant])
        elif state == "retry_scheduled":
            self.ready.add(position)
        elif state in WAITING:
            self.ready.discard(position)

    def has_retry(self) -> bool:
        return any(self.states[self.plan.tasks[p].id] == "retry_scheduled" for p in self.ready)
