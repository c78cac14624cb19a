"""The ``resolved_input_digest_mismatch`` rule of retry and repair (spec/cli.md §5).

A task's resolved input digest covers what it read: run inputs, working memory, its rendered
vars and its dependencies' outputs (``resolved_input_digest``; the driver stores it with every
task). A reused task keeps its recorded output, so its input in the new run must be what it
was: the new run's inputs are the source's and its reused dependencies carry the source's
outputs, which leaves working memory — rebuilt from the TARGET's initial memory plus the
reused tasks' deltas (``planner.rebuild_memory``). A target that changes the initial memory a
reused task read must not reuse that task's old output.

The check is conservative: each reused task's input is recomputed twice over the same deltas,
once from the source's initial memory and once from the target's. Only when the first
reproduces the recorded digest (so the recomputation is faithful for that task) and the second
differs does the task block; a recorded digest the recomputation cannot reproduce (a memory
snapshot shaped by tasks that now execute, or by a parallel batch) is never a reason to block.

Invariants: pure — reads its arguments only, mutates none.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping

from agentctl.core import evaluate as ev
from agentctl.core.inputdigest import resolved_input_digest
from agentctl.core.jsonvalue import JsonValue
from agentctl.core.plan import Plan, PlannedTask
from agentctl.core.recovery.model import Block, SourceTask
from agentctl.errors import AgentctlError

RULE = "resolved_input_digest_mismatch"


def input_blocks(
    target: Plan,
    reused: Mapping[str, SourceTask],
    inputs: Mapping[str, JsonValue],
    initial: tuple[Mapping[str, JsonValue], Mapping[str, JsonValue]],
) -> list[Block]:
    """The reused tasks (target order) whose input changes with the target's initial memory;
    ``initial`` is (source's initial memory, target's initial memory)."""
    if initial[0] == initial[1]:
        return []
    memories = [copy.deepcopy(dict(m)) for m in initial]
    outputs = {task_id: task.output for task_id, task in reused.items()}
    blocks = []
    for task in target.tasks:
        source = reused.get(task.id)
        if source is None:
            continue
        before, after = (_digest(task, inputs, memory, outputs) for memory in memories)
        if source.input_digest is not None and before == source.input_digest != after:
            blocks.append(_block(task.id, source.input_digest, after))
        if isinstance(source.state_delta, dict):
            for memory in memories:
                memory.update(copy.deepcopy(source.state_delta))
    return blocks


def _digest(
    task: PlannedTask,
    inputs: Mapping[str, JsonValue],
    memory: Mapping[str, JsonValue],
    outputs: Mapping[str, JsonValue],
) -> str | None:
    view = ev.RuntimeView(inputs=inputs, memory=memory, outputs=outputs)
    try:
        return resolved_input_digest(task, ev.task_context(task, view), view)
    except AgentctlError:  # vars that no longer render: not this rule's to judge
        return None


def _block(task_id: str, recorded: str, now: str | None) -> Block:
    return Block(
        task_id,
        RULE,
        f"task {task_id} read a different working memory in the source run than the target "
        "workflow's initial memory gives it; its recorded output cannot be reused",
        recorded,
        now,
        suggested_repair_roots=(task_id,),
    )
