"""The coordinator's in-memory mirror of one run's durable state, while it drives the run.

Invariants: it is built from the ledger's ``LiveState`` snapshot when driving starts (fresh or
resumed) and changed only by the driver, after the ledger committed the change it mirrors;
``memory`` is replaced, never mutated, so a batch's snapshot stays what its tasks read.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agentctl.core.jsonvalue import JsonObject, JsonValue
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
    errors: dict[str, str | None] = field(default_factory=dict)
    inflight: dict[str, Inflight] = field(default_factory=dict)
    not_before: dict[str, float] = field(default_factory=dict)
    halted: str | None = None  # why the drive stopped early, the run left resumable


def live_from(state: LiveState) -> Live:
    """The mirror of a run, built from the ledger's snapshot."""
    run = state.run
    live = Live(
        inputs=dict(run.inputs or {}),
        memory=dict(run.working_memory or {}),
        states={t.task_id: t.state for t in state.tasks},
        attempts={t.task_id: t.attempt for t in state.tasks},
    )
    for t in state.tasks:
        if t.state in ("succeeded", "skipped"):
            live.outputs[t.task_id] = t.output
        live.errors[t.task_id] = t.error
    for found in state.inflight:
        last = found.reconciliation
        status, result = (last.status, last.result) if last else (None, None)
        live.inflight[found.task_id] = Inflight(found.effect, status, result, found.remote)
    return live
