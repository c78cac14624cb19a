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
  (``planner.rebuild_memory``): the executed tasks write theirs only as they run. A reused
  task that read a key the target's initial memory changes, or a key an executed task wrote
  before it in the source run, would read something else now (what an executed task will
  write is not known until it runs), so its old output must not be reused. Like inputs, only
  the keys the task reads count (``core.inputreads.task_memory_keys``).

The memory check is conservative: a reused task's input is recomputed from the source's
inputs and the memory as the source run built it (its initial memory and every source task's
delta, in the target's order). Only when that reproduces the recorded digest (so the
recomputation is faithful for that task) and a key it reads differs in the rebuilt memory
does the task block; a recorded digest the recomputation cannot reproduce (a memory snapshot
shaped by a parallel batch, by a task the target removed) is never a reason to block.

Invariants: pure — reads its arguments only, mutates none.
"""

from __future__ import annotations

import copy
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from agentctl.core import evaluate as ev
from agentctl.core.conditions import json_identical
from agentctl.core.inputdigest import resolved_input_digest
from agentctl.core.inputreads import task_input_names, task_memory_keys
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


@dataclass
class _Memories:
    """Working memory as the tasks before the current one (target order) leave it: ``recorded``
    as the source run built it (its initial memory, every source task's delta), ``rebuilt`` as
    the new run gives it before any executed task writes (the target's initial memory and the
    reused tasks' deltas); ``writers``: the executed task whose delta last set each key of
    ``recorded`` alone; ``diverged``: whether the two may differ at all."""

    recorded: dict[str, JsonValue]
    rebuilt: dict[str, JsonValue]
    writers: dict[str, str] = field(default_factory=dict)
    diverged: bool = False

    @classmethod
    def of(cls, reads: Reads) -> _Memories:
        source, target = (copy.deepcopy(dict(m)) for m in reads.memory)
        return cls(source, target, diverged=not json_identical(source, target))

    def apply(self, task_id: str, delta: Mapping[str, JsonValue], reused: bool) -> None:
        self.recorded.update(copy.deepcopy(dict(delta)))
        if reused:
            self.rebuilt.update(copy.deepcopy(dict(delta)))
            for key in delta:
                self.writers.pop(key, None)
        elif delta:
            self.writers.update(dict.fromkeys(delta, task_id))
            self.diverged = True

    def differing(self, keys: set[str] | None) -> list[str]:
        """Those of ``keys`` (None: every key) whose value differs between the two."""
        if not self.diverged:
            return []
        a, b = self.recorded, self.rebuilt
        names = a.keys() | b.keys() if keys is None else keys
        return sorted(
            k for k in names if (k in a) != (k in b) or (k in a and not json_identical(a[k], b[k]))
        )


def input_blocks(
    target: Plan, source: Mapping[str, SourceTask], reused: Collection[str], reads: Reads
) -> list[Block]:
    """The reused tasks (target order) whose input the new run changes: through a changed run
    input they read, a key of the target's initial memory they read, or a key an executed
    task wrote before them in the source run."""
    changed = set(reads.changed_inputs)
    memory = _Memories.of(reads)
    outputs = {task_id: source[task_id].output for task_id in reused}
    blocks = []
    for task in target.tasks:
        recorded = source.get(task.id)
        if recorded is None:
            continue
        if task.id in reused:
            block = _reuse_block(task, recorded, changed, memory, reads, outputs)
            if block is not None:
                blocks.append(block)
        if isinstance(recorded.state_delta, dict):
            memory.apply(task.id, recorded.state_delta, task.id in reused)
    return blocks


def _reuse_block(
    task: PlannedTask,
    recorded: SourceTask,
    changed: set[str],
    memory: _Memories,
    reads: Reads,
    outputs: Mapping[str, JsonValue],
) -> Block | None:
    read = sorted(changed & task_input_names(task)) if changed else []
    if read:
        now = _digest(task, reads.inputs[1], memory.rebuilt, outputs)
        return _input_block(task.id, read, recorded.input_digest, now)
    keys = memory.differing(task_memory_keys(task)) if memory.diverged else []
    if not keys or recorded.input_digest is None:
        return None
    if _digest(task, reads.inputs[0], memory.recorded, outputs) != recorded.input_digest:
        return None  # not reproducible from what is recorded: never a reason to block
    now = _digest(task, reads.inputs[1], memory.rebuilt, outputs)
    writers = sorted({memory.writers[k] for k in keys if k in memory.writers})
    return _memory_block(task.id, keys, writers, recorded.input_digest, now)


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


def _memory_block(
    task_id: str, keys: list[str], writers: list[str], recorded: str, now: str | None
) -> Block:
    what = ", ".join(keys)
    if writers:
        who = ", ".join(writers)
        why = (
            f"task {task_id} read working memory {what} as task(s) {who} wrote it in the "
            f"source run; {who} execute(s) again in the new run, so what {task_id} would "
            "read is not known and its recorded output cannot be reused"
        )
    else:
        why = (
            f"task {task_id} read working memory {what}, which the target workflow's initial "
            "memory changes; its recorded output cannot be reused"
        )
    return Block(
        task_id,
        RULE,
        f"{why} — run it again with `--from {task_id} --restart-successful`",
        recorded,
        now,
        suggested_repair_roots=(task_id,),
    )
