"""Preparing one task of a batch: skip, compute pure work, or plan the effect to record.

Nothing here writes to the ledger or runs an effect; the driver records what this module
decides. A task reads only the immutable ``RuntimeView`` snapshot of its batch, and the run's
configuration only from the compiled plan (never from the workflow document).

Invariants:
- what an effect is (class, risk, policy name, placement, preview) and how its request is built
  come from the task's registry entry; nothing here knows a particular action kind;
- an effect's identity covers exactly the recorded input (rendered ``with`` plus the action
  configuration with its templates rendered, ``core.actionconfig``), never a secret value:
  secrets are recorded as source + SHA-256 only;
- a policy denial or a template failure is decided here, before any effect row exists;
- a ``file_write`` effect of content already on disk is no effect at all (no row, no approval).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property

from agentctl.coordinator import preview, secrets
from agentctl.coordinator.steps import (
    EffectPlan,
    PendingAgent,
    PendingEffect,
    Prepared,
    Settled,
    verdict,
)
from agentctl.core import evaluate as ev
from agentctl.core.builders import agent_prompt
from agentctl.core.effects import effect_id, encoded_input
from agentctl.core.inputdigest import resolved_input_digest as resolved_input_digest
from agentctl.core.jsonvalue import JsonObject, JsonValue
from agentctl.core.operations import BuildInput, Built, Operation, RunContext
from agentctl.core.plan import Plan, PlannedTask
from agentctl.core.policy import Decision, decide, policy_workspace
from agentctl.errors import PolicyDeniedError, RunFailedError
from agentctl.ledger.effects import EffectRecord
from agentctl.sandbox.confine import confine


@dataclass(frozen=True)
class RunSettings:
    """What every task of one run shares: its compiled plan and where it runs."""

    run_id: str
    plan: Plan
    workspace: str
    interactive: bool = False
    check_mode: bool = False  # `run --check`: only pure, internal and observe work runs
    diff: bool = False  # `--diff`: write outputs carry a unified diff
    # compensation runs: compensation task id → the source effects its inverse compensates
    compensates: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # The real paths of the ledger's own state: file effects refuse them (``sandbox.paths``).
    protected_paths: tuple[str, ...] = ()
    # The policy's decision per operation kind: it depends only on the plan's policy, the
    # registry entry and ``interactive``, all fixed for the run, so it is decided once.
    decisions: dict[tuple[str, str, str], Decision] = field(
        default_factory=dict, init=False, compare=False, repr=False
    )  # not carried by ``dataclasses.replace``: a changed copy decides afresh

    @cached_property
    def root(self) -> str:
        """The directory the run's paths resolve in: ``workspace``, or the policy's
        ``workspaceRoot`` in it (``core.policy.policy_workspace``)."""
        return policy_workspace(self.workspace, self.plan.run.policy)

    @cached_property
    def context(self) -> RunContext:
        """What request builders may know about the run."""
        run = self.plan.run
        return RunContext(
            self.root,
            run.policy,
            run.long_term_namespace,
            long_term=run.long_term or {},
            mcp_servers=run.mcp_servers,
            pricing=run.pricing,
            a2a_peers=run.a2a_peers,
            interactive=self.interactive,
            protected_paths=self.protected_paths,
        )

    @cached_property
    def for_recorded(self) -> RunSettings:
        """The settings an effect recorded by an earlier drive is prepared again with: it was
        decided when recorded (allowed, or held for an approval someone has since given), so
        the policy's ``nonInteractive`` — what to do when nobody can be asked — does not turn
        it into a denial now (a run asked with ``--interactive``, resumed without)."""
        return self if self.interactive else dataclasses.replace(self, interactive=True)


def prepare_task(
    rs: RunSettings, task: PlannedTask, view: ev.RuntimeView, attempt: int
) -> Prepared:
    """Decide what one ready task does in this batch."""
    if rs.check_mode and _routed_by_unknown(rs.plan, task, view):
        reason = "its router's decision needs work that only a real run performs"
        return Settled(task, attempt, "succeeded", preview.requires_execution(reason=reason))
    skip = ev.dependency_skip(task, view) or ev.route_skip(task, rs.plan, view)
    if skip is not None:
        return Settled(task, attempt, "skipped", skip)
    try:
        ctx = ev.task_context(task, view)
        digest = resolved_input_digest(task, ctx, view)
        prep = _prepare_in_context(rs, task, ctx, view, attempt, digest)
        if prep.input_digest == digest:  # an effect, built with it
            return prep
        return dataclasses.replace(prep, input_digest=digest)
    except RunFailedError as exc:
        if rs.check_mode and _reads_unknown(rs.plan, task, view):
            # A preview cannot know what unexecuted work returns; neither can what reads it.
            output = preview.requires_execution(reason=exc.message)
            return Settled(task, attempt, "succeeded", output)
        return Settled(task, attempt, "failed", error=exc.message, retryable=exc.retryable)


def prepare_recorded(
    rs: RunSettings,
    task: PlannedTask,
    view: ev.RuntimeView,
    attempt: int,
    recorded: EffectRecord,
    *,
    approved: bool,
) -> PendingEffect | Settled:
    """The effect an earlier drive recorded, prepared again: it must come out with the same
    identity, so with the same input; else the task fails. ``approved``: the task waited for
    the approval it has since been given."""
    prep = prepare_task(rs.for_recorded, task, view, attempt)
    if isinstance(prep, PendingEffect) and prep.effect.effect_id == recorded.effect_id:
        return dataclasses.replace(prep, recorded=True)
    if isinstance(prep, Settled) and prep.state == "failed" and prep.error:
        return prep  # it cannot be prepared at all now (a path, a secret): that is the cause
    return Settled(task, attempt, "failed", error=_not_recreated(recorded, approved))


def _not_recreated(recorded: EffectRecord, approved: bool) -> str:
    """Why a recorded effect was not re-created, and what the operator can do. Its identity
    covers its operation and input, so its input changed: memory or an output it reads was
    written since (by a sibling task, while it waited for its approval), or a secret it uses
    resolves to another value in this invocation (its digest is part of the input)."""
    effect, run = recorded.effect_id, recorded.run_id
    if recorded.status != "requested":  # it started: what it did is unknown until reconciled
        return (
            f"effect {effect} can no longer be re-created identically; "
            "reconcile it and retry the task"
        )
    retry = f"`agentctl retry FILE {run} --failed` runs the task again"
    if approved:
        return (
            f"effect {effect} was approved, but its input has changed since (another task "
            "wrote what it reads, or a secret it uses now resolves to another value) and the "
            f"approval does not cover the new input; it never started: {retry} and asks for "
            "a new approval"
        )
    return f"effect {effect} never started and its input has changed since it was recorded: {retry}"


def _routed_by_unknown(plan: Plan, task: PlannedTask, view: ev.RuntimeView) -> bool:
    return any(
        plan.task(n).kind == "router" and preview.is_stand_in(view.outputs.get(n))
        for n in task.needs
    )


def _reads_unknown(plan: Plan, task: PlannedTask, view: ev.RuntimeView) -> bool:
    """Whether anything this task depends on (transitively) is a ``requires_execution`` stub."""
    seen: set[str] = set()
    stack = list(task.needs)
    while stack:
        need = stack.pop()
        if need in seen:
            continue
        seen.add(need)
        if preview.is_stand_in(view.outputs.get(need)):
            return True
        stack.extend(plan.task(need).needs)
    return False


def _prepare_in_context(
    rs: RunSettings,
    task: PlannedTask,
    ctx: ev.Context,
    view: ev.RuntimeView,
    attempt: int,
    digest: str,
) -> Prepared:
    """``digest``: the task's resolved input digest, which an effect step carries."""
    record = ev.when_decision(task, ctx)
    if record is not None and not record["result"]:
        return Settled(task, attempt, "skipped", ev.when_skip_record(record), decision=record)
    if task.kind == "agent":
        return _prepare_agent(rs, task, ctx, attempt, record)
    entry = task.entry if task.kind == "action" else None
    if entry is None or entry.is_pure:
        kind = task.operation if task.kind == "action" else None
        output = ev.evaluate_pure(task, kind, ctx, rs.plan, view)
        # With its digest now: ``prepare_task`` then has no copy to make (one per pure task).
        return Settled(task, attempt, "succeeded", output, decision=record, input_digest=digest)
    given = ev.render_input(task, ctx)
    config = ev.render_action_config(task, ctx)
    return _prepare_effect(rs, task, entry, (given, config), (attempt, digest), record)


def _prepare_agent(
    rs: RunSettings, task: PlannedTask, ctx: ev.Context, attempt: int, record: JsonObject | None
) -> Prepared:
    if rs.check_mode:
        provider = task.agent_config.provider_name if task.agent_config else None
        output = preview.requires_execution(provider=provider)
        return Settled(task, attempt, "succeeded", output, decision=record)
    prompt = agent_prompt(ev.render_input(task, ctx))
    instructions = ev.render_instructions(task, ctx)
    return PendingAgent(task, attempt, prompt, instructions, decision=record)


def _prepare_effect(
    rs: RunSettings,
    task: PlannedTask,
    entry: Operation,
    rendered: tuple[JsonValue, Mapping[str, JsonValue]],
    attempt_digest: tuple[int, str],
    record: JsonObject | None,
) -> Prepared:
    """``rendered``: the task's ``with`` and its action configuration, both rendered;
    ``attempt_digest``: the attempt and the task's resolved input digest."""
    attempt, digest = attempt_digest
    decision = _decide(rs, task, entry)
    unresolved = _built(rs, task, entry, *rendered)
    # A path the policy denies is denied now, before any secret resolves and before an
    # approval could be asked for an effect that could only be denied afterwards. A file
    # write's preview below resolves its target by the same rule: not walked twice.
    if entry.preview != "file_write":
        confine(entry.effect_operation, unresolved.request)
    if rs.check_mode and entry.preview == "stand_in":
        # Built for its checks only: a preview sends nothing, so it resolves no secret (an
        # unset variable is no error here, and a {process} helper must not run).
        output = preview.requires_execution(kind=entry.name)
        return Settled(task, attempt, "succeeded", output, decision=record)
    built = _with_secrets(rs, task, unresolved)
    if entry.preview == "file_write":
        previewed = _preview_write(rs, task, built.request, attempt, record)
        if previewed is not None:
            return previewed
        built.request["diff"] = rs.diff
    plan = _effect_plan(rs, task, entry, attempt, built, decision)
    return PendingEffect(task, attempt, plan, decision=record, input_digest=digest)


def _decide(rs: RunSettings, task: PlannedTask, entry: Operation) -> Decision:
    # Keyed by every argument ``decide`` takes beyond the run's own (policy, interactive).
    key = (entry.policy_name or entry.name, str(entry.effect_class), str(entry.risk))
    decision = rs.decisions.get(key)
    if decision is None:
        decision = rs.decisions[key] = decide(
            rs.plan.run.policy,
            name=key[0],
            effect_class=key[1],
            risk=key[2],
            interactive=rs.interactive,
        )
    if decision.denied:
        raise PolicyDeniedError(f"task {task.id}: {decision.reason}")
    return decision


@dataclass(frozen=True)
class _Resolved:
    """A built effect with its secret references resolved."""

    recorded: JsonObject  # secret-free: sources and SHA-256 only
    request: JsonObject  # carries the resolved values
    secrets: tuple[str, ...]  # the values, to redact from whatever is recorded


def _built(
    rs: RunSettings,
    task: PlannedTask,
    entry: Operation,
    given: JsonValue,
    config: Mapping[str, JsonValue],
) -> Built:
    """The task's effect, built by its registry entry (secret references unresolved)."""
    if entry.builder is None:
        raise RunFailedError(f"task {task.id}: action kind {entry.name} cannot run in this version")
    return entry.builder(
        BuildInput(
            task_id=task.id,
            name=task.action or "",
            config=config,
            args=given,
            run=rs.context,
            memory_writes=task.memory_writes,
            timeout_seconds=float(task.timeout_seconds),
        )
    )


def _with_secrets(rs: RunSettings, task: PlannedTask, built: Built) -> _Resolved:
    """Resolve secret references (``env`` names and pointer-named places such as MCP
    headers): values to the worker, source + SHA-256 recorded."""
    if not built.secret_refs and not built.secret_env:
        return _Resolved(built.recorded, built.request, ())  # most effects: nothing to resolve
    context = (rs.plan.run.policy, rs.root, f"task {task.id}")
    pointed = secrets.resolve_pointers(built.recorded, built.request, built.secret_refs, context)
    recorded, request = pointed.recorded, pointed.request
    if not built.secret_env:
        return _Resolved(recorded, request, pointed.values)
    values, kept = secrets.resolve_named(built.secret_env, *context)
    recorded["env"] = {**_env(recorded), **kept}
    request["env"] = {**_env(request), **dict(values.items())}
    return _Resolved(recorded, request, (*pointed.values, *values.values()))


def _env(built: JsonObject) -> JsonObject:
    env = built.get("env")
    return dict(env) if isinstance(env, dict) else {}


def _preview_write(
    rs: RunSettings,
    task: PlannedTask,
    request: JsonObject,
    attempt: int,
    record: JsonObject | None,
) -> Prepared | None:
    """Check mode's diff, or no effect at all when the content is already there."""
    given = request.get("writableRoots")
    roots = [str(root) for root in given] if isinstance(given, list) else []
    path, content = str(request["path"]), str(request["content"])
    before = preview.current_content(rs.root, roots, path, rs.protected_paths)
    unchanged = before == content and not rs.compensates
    if not (rs.check_mode or unchanged):
        return None
    output = preview.write_output(path, before, content, diff=rs.diff or rs.check_mode)
    return Settled(task, attempt, "succeeded", output, decision=record)


def _effect_plan(
    rs: RunSettings,
    task: PlannedTask,
    entry: Operation,
    attempt: int,
    built: _Resolved,
    decision: Decision,
) -> EffectPlan:
    operation = entry.effect_operation
    declared = task.config().get("idempotency")
    idempotency = declared if declared in entry.idempotency_choices else entry.idempotency
    text, digest = encoded_input(built.recorded)  # the ledger stores the same text
    return EffectPlan(
        effect_id=effect_id(rs.run_id, task.id, attempt, 0, operation, digest),
        operation=operation,
        effect_class=str(entry.effect_class),
        risk=str(entry.risk),
        idempotency=str(idempotency),
        recorded_input=built.recorded,
        request=built.request,
        timeout_s=entry.effect_seconds(float(task.timeout_seconds)),
        approval_reason=(decision.reason or "approval required")
        if decision.needs_approval
        else None,
        in_process=entry.placement == "coordinator",
        secrets=built.secrets,
        budget=entry.estimate(built.request) if entry.estimate is not None else {},
        policy=verdict(decision),
        input_digest=digest,
        recorded_text=text,
    )
