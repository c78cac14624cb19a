"""The coordinator's in-memory mirror of one run's durable state, while it drives the run.

Invariants: it is built from the ledger's ``LiveState`` snapshot when driving starts (fresh or
resumed) and changed only by the driver, after the ledger committed the change it mirrors;
``memory`` is replaced, never mutated, so a batch's snapshot stays what its tasks read.

Outputs are a cache, not a mirror: a finished output stays in memory only while an unfinished
task reads it (``Retention``, from the plan's reads); the rest live in the ledger alone and are
read back, in one batched read, before a batch or the run's output needs them. So a long run's
memory follows what is still wanted, not how many tasks have finished.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from agentctl.coordinator.schedule import TERMINAL
from agentctl.core.canonical import canonical_json
from agentctl.core.compiler.reads import SharedReads, task_reads
from agentctl.core.evaluate import Encoded
from agentctl.core.jsonvalue import JsonObject, JsonValue
from agentctl.core.plan import Plan, PlannedTask
from agentctl.ledger.effects import EffectRecord
from agentctl.ledger.model import LiveState
from agentctl.ledger.remote import RemoteHandleRecord


@dataclass(frozen=True)
class Inflight:
    """A task found mid-flight on resume, with its effect and any reconciliation."""

    effect: EffectRecord
    reconciliation: str | None = None  # applied | not_applied | compensated
    result: JsonValue = None
    remote: RemoteHandleRecord | None = None  # the remote work the effect started, if known


@dataclass
class Live:
    """The run's inputs, memory and task states as the driver last committed them."""

    inputs: JsonObject
    memory: JsonObject
    states: dict[str, str]
    attempts: dict[str, int]
    outputs: dict[str, JsonValue] = field(default_factory=dict)
    # The canonical JSON of outputs kept in ``outputs`` that this drive produced (dropped with
    # them): a dependant's input digest and the output's row share one encoding.
    output_texts: dict[str, Encoded] = field(default_factory=dict)
    errors: dict[str, str | None] = field(default_factory=dict)
    inflight: dict[str, Inflight] = field(default_factory=dict)
    not_before: dict[str, float] = field(default_factory=dict)
    # Found ``retry_scheduled`` by a resume: when that was recorded (wall clock), so the
    # driver waits out what is left of the backoff rather than none of it.
    scheduled_at: dict[str, str] = field(default_factory=dict)
    halted: str | None = None  # why the drive stopped early, the run left resumable
    # Why a resumed drive refused to go on (a recorded call changed): the run is left paused.
    refused: str | None = None
    # Started effects a stop cut short before their request left the worker, each with its
    # error (``EffectRunner`` notes them as their worker answers): the stop that ends the run
    # records them ``cancelled``, not ``uncertain`` (nothing is mirrored here: nothing of
    # them is committed until that stop).
    unsent: dict[str, str] = field(default_factory=dict)

    def decision(self, task_id: str) -> str | None:
        """An operator's decision on a task found waiting for its approval: its effect
        ``requested`` (approved) or ``cancelled`` (rejected); None while nobody decided, or
        when the task was held in this drive (it is not among those found mid-flight)."""
        found = self.inflight.get(task_id)
        if found is None or self.states[task_id] != "waiting_for_approval":
            return None
        status = found.effect.status
        return status if status in ("requested", "cancelled") else None

    def awaits_operator(self) -> bool:
        """Whether an approval is still undecided: only that keeps a stopped drive's run
        ``paused`` (a decided one leaves an operator nothing to do)."""
        waiting = (t for t, s in self.states.items() if s == "waiting_for_approval")
        return any(self.decision(t) is None for t in waiting)


def live_from(state: LiveState) -> Live:
    """The mirror of a run, built from the ledger's snapshot (no outputs: read on demand)."""
    live = Live(
        inputs=dict(state.inputs or {}),
        memory=dict(state.working_memory or {}),
        states={t.task_id: t.state for t in state.tasks},
        attempts={t.task_id: t.attempt for t in state.tasks},
    )
    for t in state.tasks:
        live.errors[t.task_id] = t.error
        if t.state == "retry_scheduled" and t.updated_at is not None:
            live.scheduled_at[t.task_id] = t.updated_at
    for found in state.inflight:
        last = found.reconciliation
        status, result = (last.status, last.result) if last else (None, None)
        live.inflight[found.task_id] = Inflight(found.effect, status, result, found.remote)
    return live


FINISHED = frozenset({"succeeded", "skipped"})  # the states whose output a reader may read


class Retention:
    """Per task, how many unfinished tasks still read its output; an output nobody unfinished
    reads is dropped from memory (the ledger keeps it).

    Invariant: ``wanted[t]`` counts the non-terminal tasks whose ``task_reads`` include ``t``;
    a task releases its reads once, when it first becomes terminal.
    """

    def __init__(self, plan: Plan, states: Mapping[str, str], keep_all: bool = False) -> None:
        # A preview (check mode) keeps every output: a task there asks whether anything it
        # depends on, transitively, is a stand-in (``prepare._reads_unknown``).
        self.keep_all = keep_all
        shared = SharedReads()
        self.reads = {task.id: task_reads(task, shared) for task in plan.tasks}
        self.wanted: dict[str, int] = {}
        self.released: set[str] = set()
        self.keep_all_read = False
        for task in plan.tasks:
            if states[task.id] in TERMINAL:
                self.released.add(task.id)
                continue
            for read in self.reads[task.id]:
                self.wanted[read] = self.wanted.get(read, 0) + 1

    def keeps(self, task_id: str) -> bool:
        return self.keep_all or task_id in self.wanted

    def release(self, task_id: str) -> list[str]:
        """``task_id`` became terminal: the outputs no unfinished task reads any more."""
        if task_id in self.released or self.keep_all:
            return []
        self.released.add(task_id)
        dropped = []
        for read in self.reads[task_id]:
            left = self.wanted[read] - 1
            if left:
                self.wanted[read] = left
            else:
                del self.wanted[read]
                dropped.append(read)
        return dropped

    def missing(self, live: Live, batch: Iterable[PlannedTask]) -> list[str]:
        """Finished outputs the batch reads that are not in memory (to read back first)."""
        out: list[str] = []
        if self.keep_all:
            # Once: every finished output (a resumed preview starts with none in memory).
            self.keep_all_read, first = True, not self.keep_all_read
            return [t for t, st in live.states.items() if st in FINISHED] if first else []
        for task in batch:
            for read in self.reads[task.id]:
                if read not in live.outputs and live.states.get(read) in FINISHED:
                    out.append(read)
        return list(dict.fromkeys(out))


def settle_output(live: Live, retention: Retention, task_id: str, output: JsonValue) -> str | None:
    """Mirror a task's new state's output: kept only while an unfinished task reads it, and
    every output its finishing leaves unread dropped. A kept output is encoded here, once
    (``live.output_texts``); returns its text, for its row (None: not encoded)."""
    state = live.states[task_id]
    text = None
    if state in FINISHED and retention.keeps(task_id):
        live.outputs[task_id] = output
        text = _encoded(output)
        if text is None:
            live.output_texts.pop(task_id, None)
        else:
            live.output_texts[task_id] = Encoded(output, text)
    if state in TERMINAL:
        for read in retention.release(task_id):
            live.outputs.pop(read, None)
            live.output_texts.pop(read, None)
    return text


def _encoded(output: JsonValue) -> str | None:
    """``output``'s canonical JSON; None for a value it cannot encode, left to fail where it
    always did (its row's encoding), with the same error."""
    if output is None:
        return None
    try:
        return canonical_json(output)
    except (TypeError, ValueError, RecursionError):
        return None
