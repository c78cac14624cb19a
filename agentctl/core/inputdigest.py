"""A task's resolved input digest: what it read when it ran (spec/cli.md §5).

The driver stores it with every task; retry and repair compare it before reusing a task
(``core.recovery.inputs``). Kept apart from the recovery package, which a run never loads.
"""

from __future__ import annotations

from agentctl.core import evaluate as ev
from agentctl.core.canonical import v1_digest
from agentctl.core.plan import PlannedTask


def resolved_input_digest(task: PlannedTask, ctx: ev.Context, view: ev.RuntimeView) -> str:
    """What a task read: run inputs, memory, rendered vars and its dependencies' outputs.

    Repair reuses a task only when this digest is unchanged, so it must cover every value the
    task's result can depend on.
    """
    return v1_digest(
        {
            "inputs": view.inputs,
            "memory": view.memory,
            "vars": ctx["vars"],
            "upstream": {need: view.outputs.get(need) for need in task.needs},
        }
    )
