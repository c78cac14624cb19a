"""Effect-free compensation planning and the workflow document of a compensation run.

Eligible (spec/cli.md §5, spec/dsl.md §4.10): a task of the source plan that declares
``compensate`` and has a potentially mutating effect that took effect — confirmed successful,
or reconciled ``applied``. An effect already reconciled ``compensated`` is listed in
``already_compensated`` and never planned again, so re-running the planner after a partial
compensation plans only the remainder. A started or uncertain effect without reconciliation
blocks its task: nobody knows what there is to undo. So does an inverse of the task that a
compensation run sourced from the same run holds and has not ended (``compensation_in_progress``):
it may still run, and compensated effects are never undone twice.

Invariants: steps run in reverse compiled order of the source plan; one step per task, naming
every eligible effect of it; ``executable`` = no blocks and at least one step; ``complete`` =
executable, or nothing left to do. Pure: arguments are only read, never mutated.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from agentctl.core.conditions import ReadContext
from agentctl.core.dsl.tasks import RESERVED_VARS
from agentctl.core.jsonvalue import JsonObject, JsonValue, as_object
from agentctl.core.plan import Plan, PlannedTask, RetryPolicy
from agentctl.core.plan import compensates_automatically as compensates_automatically
from agentctl.core.recovery.model import (
    TERMINAL_RUN_STATES,
    Block,
    OpenInverse,
    SourceEffect,
    SourceRun,
    SourceTask,
    effective_outcome,
    unresolved_message,
)
from agentctl.core.recovery.source_reads import source_context, with_source_reads
from agentctl.core.states import TERMINAL_TASK_STATES
from agentctl.core.templates import TemplateError

COMPENSATION_PLAN_API = "agentctl.dev/compensation-plan/v1"
COMPENSATION_SUFFIX = "--compensate"

_NON_MUTATING = frozenset({"pure", "observe", "model"})

# The loader's defaults for the task keys a compensation step does not set itself.
_TASK_DEFAULTS: JsonObject = {
    "needs": [],
    "foreach": None,
    "matrix": None,
    "route": None,
    "loop": None,
    "memoryWrites": [],
    "when": None,
    "vars": {},
    "varsFiles": [],
    "with": {},
    "retry": {"maxAttempts": 1, "backoffMs": 0},
    "timeoutSeconds": None,
    "failure": "stop",
    "compensate": None,
    "outputSchema": None,
}


@dataclass(frozen=True)
class CompensationStep:
    """One compensating action planned for a source task's confirmed effects."""

    source_task_id: str
    compensation_task_id: str
    action: str  # name in spec.actions
    with_: JsonObject
    retry: RetryPolicy
    timeout_seconds: int | None
    source_effect_ids: tuple[str, ...]
    # The source task's merged variables (its var files' and the command line's included), so
    # the inverse renders ``vars`` as the source task did; its engine bindings (a foreach
    # child's item and ``foreachIndex``, a matrix child's ``matrix``...) apart, since a task
    # may not declare those as ``vars``: the compile of the run gives them back as bindings.
    vars: JsonObject = field(default_factory=dict)
    bindings: JsonObject = field(default_factory=dict)


@dataclass(frozen=True)
class CompensationPlan:
    """The compensations of a run in reverse compiled order, and what blocks them."""

    executable: bool
    complete: bool
    steps: tuple[CompensationStep, ...]  # reverse compiled order
    blocked: tuple[Block, ...]
    already_compensated: tuple[str, ...]  # source effect ids
    source_run_id: str = ""
    warnings: tuple[str, ...] = ()

    def to_json(self) -> JsonObject:
        return {
            "apiVersion": COMPENSATION_PLAN_API,
            "sourceRunId": self.source_run_id,
            "executable": self.executable,
            "complete": self.complete,
            "tasks": [
                {
                    "sourceTaskId": step.source_task_id,
                    "compensationTaskId": step.compensation_task_id,
                    "action": step.action,
                    "sourceEffectIds": list(step.source_effect_ids),
                }
                for step in self.steps
            ],
            "blocked": [block.to_json() for block in self.blocked],
            "alreadyCompensatedEffects": list(self.already_compensated),
            "warnings": list(self.warnings),
        }


def compensation_task_id(source_task_id: str) -> str:
    return source_task_id + COMPENSATION_SUFFIX


def plan_compensation(
    source: SourceRun, source_plan: Plan, *, tasks: Sequence[str] | None = None
) -> CompensationPlan:
    """Plan the inverse actions for ``source`` (all tasks, or only ``tasks``)."""
    if source.state not in TERMINAL_RUN_STATES:
        block = Block(
            "",
            "source_not_terminal",
            f"run {source.run_id} is {source.state}; only a terminal run can be compensated",
        )
        return CompensationPlan(False, False, (), (block,), (), source.run_id)
    blocks, selected = _selection(source_plan, tasks)
    found = _Found(blocks)
    reads = source_context(source.tasks)  # what the inverses' task-output reads resolve to
    for task in reversed(source_plan.tasks):
        src = source.tasks.get(task.id)
        if task.compensate is not None and task.id in selected and src is not None:
            _plan_task(task, src, (source, reads), found)
    executable = not found.blocks and bool(found.steps)
    return CompensationPlan(
        executable=executable,
        complete=executable or (not found.steps and not found.blocks),
        steps=tuple(found.steps),
        blocked=tuple(found.blocks),
        already_compensated=tuple(found.already),
        source_run_id=source.run_id,
        warnings=tuple(found.warnings),
    )


@dataclass
class _Found:
    """What planning has found so far, task by task (steps in reverse compiled order)."""

    blocks: list[Block]
    steps: list[CompensationStep] = field(default_factory=list)
    already: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _plan_task(
    task: PlannedTask, src: SourceTask, of: tuple[SourceRun, ReadContext], found: _Found
) -> None:
    """Add ``task``'s step, blocks, compensated effects or warning to ``found``; ``of``: the
    source run and the context its task outputs are read in (``source_context``)."""
    source, reads = of
    eligible, done, unresolved = _classify(src.effects)
    found.already.extend(done)
    found.blocks.extend(_unresolved_block(task.id, effect) for effect in unresolved)
    holder = _holder(source, task.id) if eligible else None
    if holder is not None:
        found.blocks.append(_pending_block(task.id, holder, eligible))
    elif eligible and not unresolved:
        try:
            found.steps.append(_step(task, eligible, source, reads))
        except TemplateError as exc:  # a task output the source run cannot answer
            found.blocks.append(_unreadable_block(task.id, exc))
    elif src.disposition in ("reused", "recorded") and src.state == "succeeded":
        found.warnings.append(
            f"task {task.id} was {src.disposition} by run {source.run_id}; its effects "
            "belong to an earlier run — compensate that run"
        )


def _holder(source: SourceRun, task_id: str) -> OpenInverse | None:
    """The task of a compensation run still open whose inverse of ``task_id`` has not ended:
    it may still run (after an approval, a resume, a claim), so planning it again would undo
    the same effects twice. An ended inverse holds nothing: a succeeded one recorded
    ``compensated`` on its effects in its completion's transaction, a failed, cancelled or
    skipped one undid nothing the ledger knows of."""
    wanted = compensation_task_id(task_id)
    for inverse in source.open_inverses:
        if inverse.task_id != wanted:
            continue
        if inverse.state not in TERMINAL_TASK_STATES or inverse.effect_status is not None:
            return inverse
    return None


def _pending_block(task_id: str, holder: OpenInverse, effect_ids: list[str]) -> Block:
    if holder.effect_status is not None:
        return _unsettled_block(task_id, holder, effect_ids)
    return Block(
        task_id,
        "compensation_in_progress",
        f"compensation run {holder.run_id} has not finished compensating task {task_id} "
        f"({holder.task_id} is {holder.state}); planning it again would undo effect(s) "
        f"{', '.join(effect_ids)} twice: resume that run (after `agentctl approvals "
        f"approve|reject` if it waits for an approval) or cancel it (`agentctl cancel "
        f"{holder.run_id}`) first",
    )


def _unsettled_block(task_id: str, holder: OpenInverse, effect_ids: list[str]) -> Block:
    """An ended compensation run's inverse that may have undone ``effect_ids`` already (its
    effect cut off, or reconciled ``applied``): what the operator settles before planning."""
    sources = ", ".join(effect_ids)
    if holder.effect_status == "applied":
        settle = (
            f"its effect {holder.effect_id} was reconciled applied: record each source effect "
            f"undone with `agentctl effects reconcile SOURCE_EFFECT --status compensated "
            f"--compensation-effect {holder.effect_id} --reason …`"
        )
    else:
        settle = (
            f"its effect {holder.effect_id} may have run (its outcome is unknown): reconcile "
            f"it first (`agentctl effects reconcile {holder.effect_id} --status "
            "applied|not-applied --reason …`)"
        )
    return Block(
        task_id,
        "compensation_in_progress",
        f"compensation run {holder.run_id} ended with {holder.task_id} unsettled; planning "
        f"it again could undo effect(s) {sources} twice: {settle}",
    )


def _selection(plan: Plan, tasks: Sequence[str] | None) -> tuple[list[Block], set[str]]:
    """The tasks whose effects are undone: every one that declares ``compensate``, or those
    ``--task`` names — an aggregate (foreach, matrix, loop) standing for its expanded children,
    which carry the declaration — and the blocks of names that select nothing."""
    if tasks is None:
        return [], {t.id for t in plan.tasks if t.compensate is not None}
    blocks: list[Block] = []
    selected: set[str] = set()
    for task_id in dict.fromkeys(tasks):
        if task_id not in plan.index:
            blocks.append(
                Block(
                    task_id,
                    "compensation_task_missing",
                    f"task {task_id} is not a task of the source run's plan",
                )
            )
            continue
        declaring = _declaring(plan, task_id)
        if declaring:
            selected.update(declaring)
            continue
        task = plan.task(task_id)
        scope = " nor do its expanded children" if task.children else ""
        blocks.append(
            Block(
                task_id,
                "compensation_not_declared",
                f"task {task_id} declares no `compensate` action{scope}",
                task.definition_fingerprint or None,
            )
        )
    return blocks, selected


def _declaring(plan: Plan, task_id: str) -> list[str]:
    """Those of ``task_id`` and its expanded tasks (``Plan.expanded``) that declare
    ``compensate``: the task itself, or an aggregate's children."""
    return [t for t in plan.expanded(task_id) if plan.task(t).compensate is not None]


def _classify(
    effects: Sequence[SourceEffect],
) -> tuple[list[str], list[str], list[SourceEffect]]:
    """(eligible effect ids, already compensated effect ids, unresolved effects)."""
    eligible: list[str] = []
    done: list[str] = []
    unresolved: list[SourceEffect] = []
    for effect in effects:
        outcome = effective_outcome(effect)
        if outcome == "compensated":
            done.append(effect.effect_id)
        elif outcome == "unresolved":
            unresolved.append(effect)
        elif outcome == "applied" and effect.effect_class not in _NON_MUTATING:
            eligible.append(effect.effect_id)
    return eligible, done, unresolved


def _unresolved_block(task_id: str, effect: SourceEffect) -> Block:
    return Block(
        task_id,
        "unreconciled_effect",
        unresolved_message(task_id, effect),
    )


def _step(
    task: PlannedTask, effect_ids: list[str], source: SourceRun, context: ReadContext
) -> CompensationStep:
    """The inverse of ``task`` as a step; the task outputs it reads (in its ``with`` or its
    variables) are the source run's, from ``context`` (``source_reads``), or ``TemplateError``."""
    assert task.compensate is not None
    inverse = task.compensate
    return CompensationStep(
        source_task_id=task.id,
        compensation_task_id=compensation_task_id(task.id),
        action=inverse.action,
        with_=as_object(with_source_reads(copy.deepcopy(inverse.with_), context)),
        retry=inverse.retry,
        timeout_seconds=inverse.timeout_seconds,
        source_effect_ids=tuple(effect_ids),
        vars={
            k: with_source_reads(copy.deepcopy(v), context)
            for k, v in task.vars.items()
            if k not in RESERVED_VARS and k not in task.bindings
        },
        bindings=_resolved_bindings(task, source),
    )


def _unreadable_block(task_id: str, exc: TemplateError) -> Block:
    return Block(
        task_id,
        "compensation_input_unavailable",
        f"the compensation of task {task_id} reads a task output of the source run that it "
        f"cannot answer: {exc}",
    )


# A loop child's ``loopPrevious`` after the first: its previous sibling's output, as a template.
_PREVIOUS_OUTPUT = re.compile(r"\$\{\{ tasks\.([^\s.]+)\.output \}\}")


def _resolved_bindings(task: PlannedTask, source: SourceRun) -> JsonObject:
    """The child's engine bindings as values: a later loop child's ``loopPrevious`` names its
    previous sibling's output, which the compensation run has no task for, so it is read from
    the source run (what the child saw; None if that sibling left no output)."""
    bindings = copy.deepcopy(task.bindings)
    previous = bindings.get("loopPrevious")
    named = _PREVIOUS_OUTPUT.fullmatch(previous) if isinstance(previous, str) else None
    if named is not None:
        sibling = source.tasks.get(named.group(1))
        bindings["loopPrevious"] = copy.deepcopy(sibling.output) if sibling else None
    return bindings


# --- the compensation run's workflow ---------------------------------------------------------


def compensation_document(
    source_document: Mapping[str, JsonValue], plan: CompensationPlan
) -> JsonObject:
    """The normalized document of the compensation run: the source's with only the steps.

    Every spec key of the source stays (actions, policy, providers, memory...), the tasks are
    the steps in plan order with no needs and ``failure: continue`` (a failed inverse must not
    stop its siblings), the run is sequential with no outputs and no agents. Compile it with
    ``compile_workflow``; the compiler's stable order keeps the plan's reverse order.
    """
    document = copy.deepcopy(dict(source_document))
    spec = dict(as_object(document.get("spec")))
    keys = _task_keys(spec.get("tasks"))
    spec["tasks"] = [_step_task(step, keys) for step in plan.steps]
    runtime = dict(as_object(spec.get("runtime")))
    runtime["maxConcurrency"] = 1
    spec["runtime"] = runtime
    spec["outputs"] = {}
    # Only actions run: the agents (and the instruction files they name, read when the source
    # run was compiled and not stored with it) are no part of a compensation run.
    spec["agents"] = {}
    # Var files were read when the source was compiled and are not stored with it: each step
    # carries its source task's merged variables instead, and no step invokes a sub-workflow.
    spec["varsFiles"] = []
    spec["subworkflows"] = {}
    spec["policy"] = _compensation_policy(spec)
    document["spec"] = spec
    return document


def _compensation_policy(spec: Mapping[str, JsonValue]) -> JsonObject:
    """The source's policy under ``spec.compensation.approval`` (spec/dsl.md §2, cli.md §5):
    ``policy`` keeps its approval rule, ``always`` asks a durable approval for every inverse
    effect, ``never`` removes the approval gate — every other policy rule (allowlists, roots,
    network, ``nonInteractive``) still applies."""
    policy = dict(as_object(spec.get("policy")))
    compensation = spec.get("compensation")
    mode = compensation.get("approval") if isinstance(compensation, Mapping) else None
    if mode in ("always", "never"):
        policy["approval"] = mode
    return policy


def step_bindings(plan: CompensationPlan) -> dict[str, JsonObject]:
    """The engine bindings of each step that has any, by compensation task id: what
    ``compile_workflow(compensation_document(...), bindings=...)`` needs so that an inverse
    reading ``vars.foreachIndex`` (or the item, ``vars.matrix``...) renders as its source did."""
    return {s.compensation_task_id: copy.deepcopy(s.bindings) for s in plan.steps if s.bindings}


def _task_keys(tasks: JsonValue) -> list[str]:
    keys = ["id", "uses", *_TASK_DEFAULTS]
    for task in tasks if isinstance(tasks, list) else []:
        if isinstance(task, Mapping):
            keys.extend(str(key) for key in task if key not in keys)
    return keys


def _step_task(step: CompensationStep, keys: list[str]) -> JsonObject:
    task: JsonObject = {key: copy.deepcopy(_TASK_DEFAULTS.get(key)) for key in keys}
    task.update(
        {
            "id": step.compensation_task_id,
            "uses": f"action:{step.action}",
            "needs": [],
            "with": copy.deepcopy(step.with_),
            "vars": copy.deepcopy(step.vars),
            "varsFiles": [],
            "retry": {"maxAttempts": step.retry.max_attempts, "backoffMs": step.retry.backoff_ms},
            "timeoutSeconds": step.timeout_seconds,
            "failure": "continue",
        }
    )
    return task
