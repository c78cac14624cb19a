"""The ``resolved_input_digest_mismatch`` rule of retry and repair (spec/cli.md §5).

A task's resolved input digest covers what it read: run inputs, working memory, its rendered
vars and its dependencies' outputs (``resolved_input_digest``; the driver stores it with every
task). A reused task keeps its recorded output, so its input in the new run must be what it
was. Its reused dependencies carry the source's outputs, which leaves two ways in:

- run inputs: the new run's inputs are the source's unless ``retry``/``repair`` was given
  ``--inputs``/``--inputs-file``/``--input``. The digest covers every input, so it cannot
  tell a task that reads a changed input from one that does not; the task's own definition can
  (``core.inputreads.task_input_names``: every ``inputs.NAME`` its templates, conditions
  and compensation read). A reused task reading a changed input blocks, as a changed digest
  does, naming itself as the root to pass; one reading none of them stays reusable.
- working memory, rebuilt from the TARGET's initial memory plus the reused tasks' deltas
  (``planner.rebuild_memory``). A target that changes the initial memory a reused task read
  must not reuse that task's old output.

The memory check is conservative: each reused task's input is recomputed twice over the same
deltas (and the source's inputs), once from the source's initial memory and once from the
target's. Only when the first reproduces the recorded digest (so the recomputation is faithful
for that task) and the second differs does the task block; a recorded digest the
recomputation cannot reproduce (a memory snapshot shaped by tasks that now execute, or by a
parallel batch) is never a reason to block.

Invariants: pure — reads its arguments only, mutates none.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass

from agentctl.core import evaluate as ev
from agentctl.core.conditions import json_identical
from agentctl.core.inputdigest import resolved_input_digest
from agentctl.core.inputreads import task_input_names
from agentctl.core.jsonvalue import JsonValue
from agentctl.core.plan import Plan, PlannedTask
from agentctl.core.recovery.model import Block, SourceTask
from agentctl.errors import AgentctlError

RULE = "resolved_input_digest_mismatch"


@dataclass(frozen=True)
class Reads:
    """What the reused tasks read in the source run, and what the new run gives them instead:
    (source's, new run's) run inputs, and (source's, target's) initial working memory."""

    inputs: tuple[Mapping[str, JsonValue], Mapping[str, JsonValue]]
    memory: tuple[Mapping[str, JsonValue], Mapping[str, JsonValue]]

    @property
    def changed_inputs(self) -> tuple[str, ...]:
        """The input names whose value differs (or is present on one side only), sorted."""
        before, after = self.inputs
        return tuple(
            sorted(
                name
                for name in before.keys() | after.keys()
                if name not in before
                or name not in after
                or not json_identical(before[name], after[name])
            )
        )


def input_blocks(target: Plan, reused: Mapping[str, SourceTask], reads: Reads) -> list[Block]:
    """The reused tasks (target order) whose input the new run changes: through a changed run
    input they read, or through the target's initial memory."""
    changed = set(reads.changed_inputs)
    if reads.memory[0] == reads.memory[1] and not changed:
        return []
    memories = [copy.deepcopy(dict(m)) for m in reads.memory]
    outputs = {task_id: task.output for task_id, task in reused.items()}
    blocks = []
    for task in target.tasks:
        source = reused.get(task.id)
        if source is None:
            continue
        read = sorted(changed & task_input_names(task))
        if read:
            now = _digest(task, reads.inputs[1], memories[1], outputs)
            blocks.append(_input_block(task.id, read, source.input_digest, now))
        elif reads.memory[0] != reads.memory[1]:
            source_inputs = reads.inputs[0]
            before, after = (_digest(task, source_inputs, m, outputs) for m in memories)
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


def _input_block(task_id: str, read: list[str], recorded: str | None, now: str | None) -> Block:
    return Block(
        task_id,
        RULE,
        f"task {task_id} reads run input(s) {', '.join(read)}, which differ from the source "
        "run's; its recorded output cannot be reused — run it again with "
        f"`--from {task_id} --restart-successful`",
        recorded,
        now,
        suggested_repair_roots=(task_id,),
    )


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
