"""The recovery planners' input snapshot of a source run and the block record they emit.

The coordinator reads a terminal source run out of the ledger into these frozen values; the
planners in this package are pure functions of them plus a compiled target ``Plan``.

Invariants:
- Every value here is immutable from the planners' point of view: they never mutate a
  ``SourceRun`` (nor anything reachable from it) and never return an alias of its mutable parts.
- Persisted enums are lowercase strings exactly as the ledger stores them (spec/cli.md §3–§4).
- ``effective_outcome`` is the single place that reads an effect's status, confirmation flag
  and latest reconciliation together; every rule in this package classifies effects through it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from agentctl.core.jsonvalue import JsonObject, JsonValue

TERMINAL_RUN_STATES = frozenset({"succeeded", "failed", "cancelled"})

Outcome = Literal["unresolved", "applied", "not_applied", "compensated", "none"]
_RECONCILED: dict[str, Outcome] = {
    "applied": "applied",
    "not_applied": "not_applied",
    "compensated": "compensated",
}


@dataclass(frozen=True)
class AppliedResult:
    """What an ``applied`` reconciliation recorded for an effect (``effects reconcile
    --result-file``, or ``effects continue-remote``'s observed result), and the working-memory
    delta ``resume`` commits with it for that operation (None: the operation writes none)."""

    result: JsonValue
    state_delta: JsonObject | None = None


@dataclass(frozen=True)
class SourceEffect:
    """A source run's effect as recovery planning sees it."""

    effect_id: str
    task_id: str
    attempt: int
    operation: str  # action kind, e.g. "builtin.write"
    effect_class: str
    idempotency: str
    status: str
    confirmed: bool
    reconciliation: str | None  # latest reconciliation: applied|not_applied|compensated|None
    applied: AppliedResult | None = None  # set when ``reconciliation`` is applied


@dataclass(frozen=True)
class SourceTask:
    """A source run's task as recovery planning sees it: state, output and fingerprints."""

    task_id: str
    state: str
    attempt: int
    disposition: str  # executed|reused|recorded
    output: JsonValue
    definition_fingerprint: str | None
    input_digest: str | None  # "sha256:v1:..." of the resolved input (rendered with + vars)
    output_contract_fingerprint: str | None
    output_digest: str | None
    state_delta: JsonObject | None  # working-memory keys this task wrote
    artifacts: tuple[JsonObject, ...]  # [{path, digest, sizeBytes}]
    effects: tuple[SourceEffect, ...]  # this task's effects, all attempts, in order
    needs: tuple[str, ...]  # the task's needs in the SOURCE plan
    # A reused task has no effects of its own: these are the effects of the run that executed
    # it, found by following the reuse provenance back (a retry of a retry); executing it again
    # repeats them as much as its own. None when that run is gone and nothing can be judged.
    inherited_effects: tuple[SourceEffect, ...] | None = ()
    # The attempt that ended the task in the run that executed it (None: its own run did, or
    # it is not known: every inherited effect then counts as producing its result).
    inherited_attempt: int | None = None
    # The task's variables in the SOURCE plan (every layer merged, the command line's too),
    # None when its plan does not say: they tell why a fingerprint of an unchanged
    # workflow's task differs (the run was compiled with other --var/--vars-file values).
    vars: JsonObject | None = None
    # The effect whose applied reconciliation completed this task (``settled.settle_applied``):
    # the run ended without it, its output is that reconciliation's result. None otherwise.
    settled_by: str | None = None

    def history(self) -> tuple[SourceEffect, ...]:
        """Every effect of this task, every attempt: its own and its inherited ones — what
        executing it again may repeat."""
        return (*self.effects, *(self.inherited_effects or ()))

    def producing(self) -> tuple[SourceEffect, ...]:
        """The effects its recorded result came from: those of the attempt that ended it, its
        own or (a reused task) in the run that executed it. An earlier attempt ended before
        this one began, so a verdict on one of its effects (``compensated``, say) says
        nothing about this result."""
        own = (e for e in self.effects if e.attempt == self.attempt)
        ended = self.inherited_attempt
        inherited = (e for e in self.inherited_effects or () if ended is None or e.attempt == ended)
        return (*own, *inherited)


@dataclass(frozen=True)
class OpenInverse:
    """A task of a compensation run sourced from the source run whose inverse is not settled:
    its run has not ended, or it ended with the inverse's effect ``effect_id`` possibly done
    (``effect_status`` ``uncertain`` or ``applied``: ``OpenCompensationTask``)."""

    run_id: str  # the compensation run
    task_id: str  # its task: a compensation task id
    state: str  # that task's state
    effect_id: str | None = None
    effect_status: str | None = None


@dataclass(frozen=True)
class SourceRun:
    """A source run as recovery planning sees it: its identity and its tasks.

    ``parked``: the run is ``running`` but nothing drives it — no live coordinator holds its
    lease and a task waits on an uncertain effect (the driver settled it so, exit 4). Retry and
    repair take such a run like a terminal one; the caller decides it, since liveness is I/O.
    """

    run_id: str
    mode: str
    state: str
    workflow_name: str
    workflow_digest: str
    tasks: Mapping[str, SourceTask]  # by task id, source compiled order preserved
    parked: bool = False
    inputs: Mapping[str, JsonValue] = field(default_factory=dict)
    # The working memory the source run started from (its plan's), or None when unknown.
    initial_memory: Mapping[str, JsonValue] | None = None
    # The tasks of compensation runs sourced from this run that have not ended (compensation
    # planning: an inverse one of them still holds is not planned again).
    open_inverses: tuple[OpenInverse, ...] = ()


@dataclass(frozen=True)
class Block:
    """Why a plan cannot proceed (spec/cli.md §5). Run-level blocks carry ``task_id == ""``."""

    task_id: str
    rule: str
    message: str
    source_fingerprint: str | None = None
    target_fingerprint: str | None = None
    suggested_repair_roots: tuple[str, ...] = ()
    full_fork_required: bool = False

    def to_json(self) -> JsonObject:
        return {
            "taskId": self.task_id,
            "rule": self.rule,
            "message": self.message,
            "sourceFingerprint": self.source_fingerprint,
            "targetFingerprint": self.target_fingerprint,
            "suggestedRepairRoots": list(self.suggested_repair_roots),
            "fullForkRequired": self.full_fork_required,
        }


def unresolved_message(task_id: str, effect: SourceEffect) -> str:
    """Why an unresolved effect blocks a plan, with the whole command that settles it: the
    bare ``effects reconcile EFFECT`` it used to name is refused (``--status`` and
    ``--reason`` are required), the same words the refused ``resume`` uses."""
    return (
        f"effect {effect.effect_id} ({effect.operation}) of task {task_id} is {effect.status} "
        f"with no reconciliation; reconcile it first (`agentctl effects reconcile "
        f"{effect.effect_id} --status applied|not-applied --reason …`; --approved where the "
        "policy asks approval for the effect)"
    )


def effective_outcome(effect: SourceEffect) -> Outcome:
    """What is known about an effect's consequence once its reconciliation is applied.

    A reconciliation wins over the raw status (it is the operator's later conclusion). Without
    one: started/uncertain — and a "succeeded" row lacking its confirmation flag, which should
    not exist — are unresolved; a confirmed success applied; anything else (requested, failed,
    cancelled, waiting for approval) never took effect as far as the ledger knows.
    """
    reconciled = _RECONCILED.get(effect.reconciliation or "")
    if reconciled is not None:
        return reconciled
    if effect.status in ("started", "uncertain"):
        return "unresolved"
    if effect.status == "succeeded":
        return "applied" if effect.confirmed else "unresolved"
    return "none"
