"""Effect-free retry and repair planning, and the repaired run's initial working memory.

Both planners share one shape (spec/cli.md §5): run-level checks, root checks, the execution
closure (roots, forced tasks and their transitive dependants in the TARGET graph), then every
other target task must pass the reuse rules of ``checks.reuse_block`` or it blocks. Executed
tasks that the source already ran must not repeat an unresolved or unsafe effect
(``checks.closure_effect_blocks``).

Retry differs from repair in three ways: the workflow digest must be identical (else the single
block ``workflow_digest_mismatch`` sends the user to repair); every source task that did not
succeed executes, with its dependants unless it was merely skipped (``_retry_forced``); and a
task whose effect was compensated executes with its dependants (repair blocks its reuse
instead). ``resolved_input_digest_mismatch`` is checked last, over the tasks found reusable
(``inputs.input_blocks``): a reused task's input can change only through the new run's inputs
(``--inputs``/``--input``: a task reading a changed one blocks) or the target's initial working
memory, since reused upstream outputs are the source's.

Invariants: the planners read their arguments only (no I/O; ``artifact_ok`` is the caller's
read-only CAS probe), never mutate them, and return equal plans for equal inputs.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, field

from agentctl.core.jsonvalue import JsonObject, JsonValue
from agentctl.core.plan import Plan, PlannedTask
from agentctl.core.recovery import checks, inputs
from agentctl.core.recovery.model import (
    TERMINAL_RUN_STATES,
    Block,
    SourceRun,
    SourceTask,
    effective_outcome,
)
from agentctl.core.recovery.plans import (
    PlanKind,
    RecoveryPlan,
    approval_summary,
    estimated_provider_tasks,
    fresh_effect_summary,
)
from agentctl.core.taskids import local_namesakes, namesake_hint

ArtifactCheck = Callable[[str, int], bool]


def plan_retry(
    source: SourceRun,
    target: Plan,
    *,
    failed_only: bool,
    roots: Sequence[str],
    restart_successful: bool,
    artifact_ok: ArtifactCheck,
    reason: str | None = None,
    inputs: Mapping[str, JsonValue] | None = None,
) -> RecoveryPlan:
    """Plan ``agentctl retry``: same workflow, failed or chosen roots re-executed.
    ``inputs``: the new run's run inputs (None: the source's, unchanged)."""
    if source.workflow_digest != target.workflow_digest:
        block = Block(
            "",
            "workflow_digest_mismatch",
            f"the workflow differs from the one run {source.run_id} executed (digest "
            f"{source.workflow_digest} vs {target.workflow_digest}); retry needs the identical "
            "workflow — use `agentctl repair` to run a changed workflow",
            source.workflow_digest,
            target.workflow_digest,
        )
        return _refused("retry", source, target, tuple(roots), [block], failed_only, reason)
    refused = _run_blocks(source, "retried")
    if refused:
        return _refused("retry", source, target, tuple(roots), refused, failed_only, reason)
    chosen = _with_children(target, roots)
    if failed_only:
        chosen += [t.id for t in target.tasks if _state(source, t.id) == "failed"]
    request = _Request("retry", source, target, chosen, restart_successful, artifact_ok)
    request.failed_only, request.inputs = failed_only, inputs
    request.forced, request.quiet = _retry_forced(source, target)
    return _assemble(request, reason)


def plan_repair(
    source: SourceRun,
    target: Plan,
    *,
    roots: Sequence[str],
    restart_successful: bool,
    artifact_ok: ArtifactCheck,
    reason: str | None = None,
    inputs: Mapping[str, JsonValue] | None = None,
) -> RecoveryPlan:
    """Plan ``agentctl repair``: a target workflow, roots + dependants fresh, the rest reused.
    ``inputs``: as ``plan_retry``'s."""
    refused = _run_blocks(source, "repaired")
    if source.workflow_name != target.name:
        refused.append(
            Block(
                "",
                "workflow_identity_mismatch",
                f"the target workflow is named {target.name!r} but run {source.run_id} ran "
                f"{source.workflow_name!r}; repair stays within one workflow — fork or start "
                "a new run instead",
                source.workflow_digest,
                target.workflow_digest,
                full_fork_required=True,
            )
        )
    if refused:
        return _refused("repair", source, target, tuple(roots), refused, False, reason)
    chosen = _with_children(target, roots)
    request = _Request("repair", source, target, chosen, restart_successful, artifact_ok)
    request.inputs = inputs
    return _assemble(request, reason)


def rebuild_memory(
    initial: Mapping[str, JsonValue], target: Plan, reused: Mapping[str, SourceTask]
) -> JsonObject:
    """Target initial memory plus the reused tasks' deltas, applied in target compiled order.

    Never the source's final snapshot: a delta of a task that is not reused must not leak in,
    and when two reused tasks wrote one key the later one in the TARGET order wins.
    """
    memory = copy.deepcopy(dict(initial))
    for task in target.tasks:
        source = reused.get(task.id)
        if source is not None and isinstance(source.state_delta, dict):
            memory.update(copy.deepcopy(source.state_delta))
    return memory


# --- shared machinery ----------------------------------------------------------------------


@dataclass
class _Request:
    """The inputs of one recovery plan: its kind, the source run and the target plan."""

    kind: PlanKind
    source: SourceRun
    target: Plan
    roots: list[str]
    restart_successful: bool
    artifact_ok: ArtifactCheck
    forced: dict[str, str] = field(default_factory=dict)  # task id → why it must execute
    quiet: set[str] = field(default_factory=set)  # forced tasks whose dependants may be reused
    failed_only: bool = False
    warnings: list[str] = field(default_factory=list)
    inputs: Mapping[str, JsonValue] | None = None  # the new run's; None: the source's

    @property
    def new_inputs(self) -> Mapping[str, JsonValue]:
        return self.source.inputs if self.inputs is None else self.inputs


@dataclass
class _Outcome:
    """The planner's decisions so far: reused, executed and blocked tasks, with their rows."""

    reuse: list[str] = field(default_factory=list)
    execute: list[str] = field(default_factory=list)
    blocked: list[Block] = field(default_factory=list)
    rows: list[JsonObject] = field(default_factory=list)

    def row(self, task_id: str, disposition: str, reason: str) -> None:
        self.rows.append({"taskId": task_id, "disposition": disposition, "reason": reason})


def _state(source: SourceRun, task_id: str) -> str | None:
    task = source.tasks.get(task_id)
    return None if task is None else task.state


def _run_blocks(source: SourceRun, verb: str) -> list[Block]:
    blocks = []
    if source.mode == "replay":
        blocks.append(
            Block(
                "",
                "replay_source",
                f"run {source.run_id} is a recorded replay and cannot be {verb}; use the run "
                "it replayed as the source",
            )
        )
    if source.mode == "check":
        # A preview ran no effect: its effect tasks hold what they *would* do, so reusing them
        # would report writes, processes and calls that never happened.
        blocks.append(
            Block(
                "",
                "check_source",
                f"run {source.run_id} is a preview (run --check) that executed no effect and "
                f"cannot be {verb}; run the workflow (or fork the preview) instead",
            )
        )
    # A parked run counts as settled: its uncertain effect then blocks as
    # ``unreconciled_effect`` through the closure rules, like a terminal run's would.
    if source.state not in TERMINAL_RUN_STATES and not source.parked:
        blocks.append(
            Block(
                "",
                "source_not_terminal",
                f"run {source.run_id} is {source.state}; only a terminal run, or a running run "
                f"parked on an uncertain effect with no live coordinator, can be {verb} "
                "(resume or cancel it first)",
            )
        )
    return blocks


def _retry_forced(source: SourceRun, target: Plan) -> tuple[dict[str, str], set[str]]:
    """Tasks a retry must execute although no root leads to them, and the quiet ones.

    Every unsuccessful task executes, and so does a task whose effect was compensated (its
    recorded result no longer holds); their dependants follow. A skipped task is quiet: it is
    evaluated again, but a skip is a pure decision over reused upstream results, so its
    dependants (an aggregate over an early-ended loop, say) stay reusable rather than dragging
    everything after them into fresh effects.
    """
    forced: dict[str, str] = {}
    quiet: set[str] = set()
    for task in target.tasks:
        src = source.tasks.get(task.id)
        if src is None:
            continue
        if src.state != "succeeded":
            forced[task.id] = f"source task {src.state}"
            if src.state == "skipped":
                quiet.add(task.id)
        elif any(effective_outcome(e) == "compensated" for e in src.producing()):
            forced[task.id] = (
                "a source effect was compensated; compensated effects are never reused"
            )
    return forced, quiet


def _refused(
    kind: PlanKind,
    source: SourceRun,
    target: Plan,
    roots: tuple[str, ...],
    blocks: list[Block],
    failed_only: bool,
    reason: str | None = None,
) -> RecoveryPlan:
    return RecoveryPlan(
        kind=kind,
        compatible=False,
        source_run_id=source.run_id,
        source_workflow_digest=source.workflow_digest,
        target_workflow_digest=target.workflow_digest,
        roots=tuple(dict.fromkeys(roots)),
        reuse=(),
        execute=(),
        blocked=tuple(blocks),
        warnings=(),
        tasks=(),
        failed_only=failed_only,
        reason=reason,
        # Nothing will execute, but the summaries keep their fields (zeroed): a script reads
        # `.freshEffectSummary.total` the same way whether the plan is compatible or not.
        fresh_effect_summary=fresh_effect_summary(target, ()),
        approval_summary=approval_summary(target, ()),
    )


def _assemble(request: _Request, reason: str | None) -> RecoveryPlan:
    source, target = request.source, request.target
    roots, root_blocks = _check_roots(request)
    closure = _closure(target, roots, request.forced, request.quiet, request.kind)
    outcome = _Outcome(blocked=root_blocks)
    feeders = {need for task in target.tasks for need in task.needs}
    for task in target.tasks:
        if task.id in closure:
            _place_executed(outcome, task, source.tasks.get(task.id), closure[task.id])
        else:
            _place_other(outcome, request, task, task.id in feeders)
    _check_inputs(outcome, request)
    removed = _removed(outcome, request)
    execute = tuple(outcome.execute)
    return RecoveryPlan(
        kind=request.kind,
        compatible=not outcome.blocked,
        source_run_id=source.run_id,
        source_workflow_digest=source.workflow_digest,
        target_workflow_digest=target.workflow_digest,
        roots=roots,
        reuse=tuple(outcome.reuse),
        execute=execute,
        blocked=tuple(outcome.blocked),
        warnings=tuple(request.warnings),
        tasks=tuple(outcome.rows),
        failed_only=request.failed_only,
        reason=reason,
        rerun_tasks=tuple(tid for tid in execute if tid in source.tasks),
        new_tasks=tuple(t.id for t in target.tasks if t.id not in source.tasks),
        removed_tasks=removed,
        changed_tasks=_changed(source, target.tasks),
        fresh_effect_summary=fresh_effect_summary(target, execute),
        approval_summary=approval_summary(target, execute),
        estimated_provider_tasks=estimated_provider_tasks(target, execute),
    )


def _check_inputs(outcome: _Outcome, request: _Request) -> None:
    """``resolved_input_digest_mismatch``: a reused task whose input the new run's inputs or
    the target's initial memory change is blocked instead (``inputs.input_blocks``); a source
    whose initial memory is unknown is judged on its inputs alone."""
    source, target = request.source, request.target
    initial = target.run.working_memory
    reads = inputs.Reads(
        (source.inputs, request.new_inputs),
        (initial if source.initial_memory is None else source.initial_memory, initial),
    )
    if reads.changed_inputs:
        request.warnings.append(
            f"the new run's inputs differ from run {source.run_id}'s in "
            f"{', '.join(reads.changed_inputs)}; a task reading one of them is not reused"
        )
    for block in inputs.input_blocks(target, source.tasks, set(outcome.reuse), reads):
        outcome.reuse.remove(block.task_id)
        outcome.blocked.append(block)
        for row in outcome.rows:
            if row["taskId"] == block.task_id:
                row.update(disposition="blocked", reason=f"{block.rule}: {block.message}")


def _removed(outcome: _Outcome, request: _Request) -> tuple[str, ...]:
    removed = tuple(tid for tid in request.source.tasks if tid not in request.target.index)
    for task_id in removed:
        outcome.row(task_id, "removed", "not in the target workflow")
        request.warnings.append(
            f"task {task_id} of run {request.source.run_id} is not in the target workflow; "
            "its result is not carried over"
        )
    return removed


def _with_children(target: Plan, roots: Sequence[str]) -> list[str]:
    """The roots as named, each aggregate (foreach, matrix, loop, sub-workflow) followed by
    its expanded tasks (``Plan.expanded``): they do the work of the task the user wrote, which
    its pure aggregate only collects, so re-running the aggregate alone would repeat none of
    it. Only named roots expand: a failed aggregate found by ``--failed`` keeps its succeeded
    children reusable (its failed ones are roots of their own). An unknown root stays as given,
    for ``_check_roots`` to block."""
    return [t for r in roots for t in (target.expanded(r) if r in target.index else (r,))]


def _check_roots(request: _Request) -> tuple[tuple[str, ...], list[Block]]:
    """Known roots in target order (unknown ones after, as given) and the root blocks."""
    source, target = request.source, request.target
    blocks: list[Block] = []
    if not request.roots and not request.forced:
        blocks.append(Block("", "repair_root_missing", _no_root_message(request)))
    given = list(dict.fromkeys(request.roots))
    known = sorted((r for r in given if r in target.index), key=lambda r: target.index[r])
    for root in given:
        if root not in target.index:
            blocks.append(_missing_root(root, request))
        else:
            blocks.extend(_root_blocks(root, source, request.restart_successful))
    return (*known, *(r for r in given if r not in target.index)), blocks


def _no_root_message(request: _Request) -> str:
    if request.failed_only:
        return f"run {request.source.run_id} has no failed task to retry"
    flag = "--failed or --from TASK" if request.kind == "retry" else "--from TASK"
    return f"{request.kind} needs at least one root ({flag})"


def _missing_root(root: str, request: _Request) -> Block:
    namesakes = local_namesakes(request.target.index, root)  # in plan order
    return Block(
        root,
        "repair_root_missing",
        f"root {root} is not a task of the target workflow {request.target.name!r}"
        f"{namesake_hint(namesakes)}",
        suggested_repair_roots=namesakes,
    )


def _root_blocks(root: str, source: SourceRun, restart_successful: bool) -> Iterable[Block]:
    src = source.tasks.get(root)
    if src is None:
        return
    if src.disposition in ("reused", "recorded"):
        yield Block(
            root,
            "indirect_effect_history",
            f"root {root} was {src.disposition} by run {source.run_id}, so its effects belong "
            "to an earlier run; recover that run instead, or fork",
            src.definition_fingerprint,
            full_fork_required=True,
        )
    if src.state == "succeeded" and not restart_successful:
        yield Block(
            root,
            "successful_root_requires_acknowledgement",
            f"root {root} succeeded in run {source.run_id}; pass --restart-successful to "
            "execute it again with fresh effects",
            src.definition_fingerprint,
            suggested_repair_roots=(root,),
        )


def _closure(
    target: Plan, roots: Sequence[str], forced: Mapping[str, str], quiet: Set[str], kind: PlanKind
) -> dict[str, str]:
    """Roots, forced tasks and their transitive dependants (task id → reason), target order.

    A ``quiet`` forced task executes without pulling in its dependants (see ``_retry_forced``).
    One pass suffices: the compiled order is topological, so every need precedes its task.
    """
    seeds = {root: f"{kind} root" for root in roots if root in target.index}
    closure: dict[str, str] = {}
    spreading: set[str] = set()
    for task in target.tasks:
        upstream = next((need for need in task.needs if need in spreading), None)
        if task.id in seeds:
            closure[task.id] = seeds[task.id]
        elif upstream is not None:
            closure[task.id] = f"needs {upstream}, which executes"
        elif task.id in forced:
            closure[task.id] = forced[task.id]
            if task.id in quiet:
                continue
        else:
            continue
        spreading.add(task.id)
    return closure


def _place_executed(
    outcome: _Outcome, task: PlannedTask, source: SourceTask | None, reason: str
) -> None:
    outcome.execute.append(task.id)
    blocks = [] if source is None else list(checks.closure_effect_blocks(task.id, source))
    outcome.blocked.extend(blocks)
    if blocks:
        outcome.row(task.id, "blocked", blocks[0].message)
    else:
        outcome.row(task.id, "execute", reason if source is not None else f"{reason} (new task)")


def _place_other(outcome: _Outcome, request: _Request, task: PlannedTask, feeds: bool) -> None:
    source = request.source.tasks.get(task.id)
    if source is None:
        block: Block | None = checks.new_task_block(task)
    else:
        same = request.source.workflow_digest == request.target.workflow_digest
        ctx = checks.ReuseContext(
            request.source.run_id, task, source, feeds, request.artifact_ok, same
        )
        block = checks.reuse_block(ctx)
    if block is None:
        outcome.reuse.append(task.id)
        outcome.row(task.id, "reuse", _reuse_reason(source))
    else:
        outcome.blocked.append(block)
        outcome.row(task.id, "blocked", f"{block.rule}: {block.message}")


def _reuse_reason(source: SourceTask | None) -> str:
    if source is None or source.settled_by is None:
        return "compatible successful source task"
    return (
        f"completed by the applied reconciliation of effect {source.settled_by} after the "
        "source run ended; its recorded result is reused, the effect is not repeated"
    )


def _changed(source: SourceRun, tasks: Iterable[PlannedTask]) -> tuple[str, ...]:
    changed = []
    for task in tasks:
        src = source.tasks.get(task.id)
        fingerprint = None if src is None else src.definition_fingerprint
        if fingerprint and fingerprint != task.definition_fingerprint:
            changed.append(task.id)
    return tuple(changed)
