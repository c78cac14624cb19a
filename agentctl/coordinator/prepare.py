"""Preparing one task of a batch: skip, compute pure work, or plan the effect to record.

Nothing here writes to the ledger or runs an effect; the driver records what this module
decides. A task reads only the immutable ``RuntimeView`` snapshot of its batch.

Invariants:
- an effect's identity covers exactly the recorded input (rendered ``with`` plus the action
  configuration), never a secret value: secrets are recorded as source + SHA-256 only;
- a policy denial or a template failure is decided here, before any effect row exists;
- ``builtin.write`` of content already on disk is no effect at all (no row, no approval).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from agentctl.coordinator import preview, secrets
from agentctl.core import evaluate as ev
from agentctl.core.canonical import v1_digest
from agentctl.core.effects import action_kind, effect_id, input_digest
from agentctl.core.plan import Plan, PlannedTask
from agentctl.core.policy import decide
from agentctl.errors import PolicyDeniedError, RunFailedError
from agentctl.ledger.model import EffectOutcome

PrepKind = Literal["done", "effect", "waiting", "agent"]


@dataclass
class EffectPlan:
    """An effect about to be recorded and dispatched."""

    effect_id: str
    operation: str
    effect_class: str
    risk: str
    idempotency: str
    recorded_input: dict[str, Any]  # what the ledger stores (secret-free)
    request: dict[str, Any]  # what the worker gets (may carry resolved secret values)
    timeout_s: float
    needs_approval: bool
    approval_reason: str | None
    in_process: bool  # working-memory writes run in the coordinator
    secrets: tuple[str, ...] = ()  # resolved values, redacted from everything recorded
    budget: dict[str, int] = field(default_factory=dict)


@dataclass
class Prepared:
    task: PlannedTask
    attempt: int
    kind: PrepKind
    state: str = "succeeded"
    output: Any = None
    error: str | None = None
    decision: dict[str, Any] | None = None
    effect: EffectPlan | None = None
    memory_delta: dict[str, Any] | None = None
    retryable: bool = False
    recorded: bool = False  # the effect row already exists (resumed in-flight effect)
    started: bool = False  # its `started` row committed with its request (fast path)
    deferred_finish: EffectOutcome | None = None  # outcome to commit with the completion
    input_digest: str | None = None
    prompt: str | None = None  # agents: the rendered user message
    artifact_paths: list[str] = field(default_factory=list)
    artifacts: list[Any] = field(default_factory=list)  # ArtifactRef of ingested files
    lease_ids: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class RunSettings:
    """What every task of one run shares: the workflow document and where it runs."""

    run_id: str
    plan: Plan
    document: Mapping[str, Any]
    workspace: str
    interactive: bool = False
    check_mode: bool = False  # `run --check`: only pure, internal and observe work runs
    diff: bool = False  # `--diff`: write outputs carry a unified diff
    # compensation runs: compensation task id → the source effects its inverse compensates
    compensates: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def spec(self) -> Mapping[str, Any]:
        return self.document["spec"]  # type: ignore[no-any-return]


def prepare_task(
    rs: RunSettings, task: PlannedTask, view: ev.RuntimeView, attempt: int
) -> Prepared:
    """Decide what one ready task does in this batch."""
    if rs.check_mode and _routed_by_unknown(rs.plan, task, view):
        reason = "its router's decision needs work that only a real run performs"
        output = preview.requires_execution(reason=reason)
        return Prepared(task, attempt, "done", output=output)
    skip = ev.dependency_skip(task, view) or ev.route_skip(task, rs.plan, view)
    if skip is not None:
        return Prepared(task, attempt, "done", state="skipped", output=skip)
    try:
        ctx = ev.task_context(task, view)
        digest = resolved_input_digest(task, ctx, view)
        prep = _prepare_in_context(rs, task, ctx, view, attempt)
        prep.input_digest = digest
        return prep
    except RunFailedError as exc:
        if rs.check_mode and _reads_unknown(rs.plan, task, view):
            # A preview cannot know what unexecuted work returns; neither can what reads it.
            output = preview.requires_execution(reason=exc.message)
            return Prepared(task, attempt, "done", output=output)
        return Prepared(
            task, attempt, "done", state="failed", error=exc.message, retryable=exc.retryable
        )


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
    rs: RunSettings, task: PlannedTask, ctx: dict[str, Any], view: ev.RuntimeView, attempt: int
) -> Prepared:
    record = ev.when_decision(task, ctx)
    if record is not None and not record["result"]:
        return Prepared(
            task, attempt, "done", "skipped", ev.when_skip_record(record), decision=record
        )
    if task.kind == "agent":
        return _prepare_agent(rs, task, ctx, attempt, record)
    kind = _action_kind(rs, task)
    if kind is None or action_kind(kind).is_pure:
        output = ev.evaluate_pure(task, kind, ctx, rs.plan, view)
        return Prepared(task, attempt, "done", output=output, decision=record)
    return _prepare_effect(rs, task, kind, ev.render_input(task, ctx), view, attempt, record)


def _prepare_agent(
    rs: RunSettings,
    task: PlannedTask,
    ctx: dict[str, Any],
    attempt: int,
    record: dict[str, Any] | None,
) -> Prepared:
    from agentctl.coordinator.agent import agent_prompt

    if rs.check_mode:
        agent = rs.spec["agents"][task.agent or ""]
        output = preview.requires_execution(provider=agent["provider"])
        return Prepared(task, attempt, "done", output=output, decision=record)
    prompt = agent_prompt(ev.render_input(task, ctx))
    return Prepared(task, attempt, "agent", state="running", decision=record, prompt=prompt)


def resolved_input_digest(task: PlannedTask, ctx: Mapping[str, Any], view: ev.RuntimeView) -> str:
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


def _action_kind(rs: RunSettings, task: PlannedTask) -> str | None:
    if task.kind != "action" or task.action is None:
        return None
    return str(rs.spec["actions"][task.action]["kind"])


def _prepare_effect(
    rs: RunSettings,
    task: PlannedTask,
    kind: str,
    given: Any,
    view: ev.RuntimeView,
    attempt: int,
    record: dict[str, Any] | None,
) -> Prepared:
    spec = action_kind(kind)
    action = rs.spec["actions"][task.action or ""]
    args = given if isinstance(given, Mapping) else {}
    decision = decide(
        rs.spec["policy"],
        name=spec.policy_name or kind,
        effect_class=str(spec.effect_class),
        risk=str(spec.risk),
        interactive=rs.interactive,
    )
    if decision.kind == "deny":
        raise PolicyDeniedError(f"task {task.id}: {decision.reason}")
    builder = _BUILDERS.get(kind)
    if builder is None:
        raise RunFailedError(f"task {task.id}: action kind {kind} cannot run in this version")
    recorded, request = builder(rs, task, action, args)
    if kind == "builtin.write":
        roots = list(request["writableRoots"])
        before = preview.current_content(rs.workspace, roots, str(args["path"]))
        unchanged = before == args["content"] and not rs.compensates
        if rs.check_mode or unchanged:
            output = preview.write_output(
                str(args["path"]), before, str(args["content"]), diff=rs.diff or rs.check_mode
            )
            return Prepared(task, attempt, "done", output=output, decision=record)
        request["diff"] = rs.diff
    elif rs.check_mode and spec.effect_class not in ("internal_state", "observe"):
        output = preview.requires_execution(kind=kind)
        return Prepared(task, attempt, "done", output=output, decision=record)
    digest = input_digest(recorded)
    plan = EffectPlan(
        effect_id=effect_id(rs.run_id, task.id, attempt, 0, kind, digest),
        operation=kind,
        effect_class=str(spec.effect_class),
        risk=str(spec.risk),
        idempotency=str(spec.idempotency),
        recorded_input=recorded,
        request=request,
        timeout_s=float(task.timeout_seconds),
        needs_approval=decision.kind == "require_approval",
        approval_reason=decision.reason if decision.kind == "require_approval" else None,
        in_process=kind in IN_PROCESS,
        budget=_budget_estimate(kind, request),
        secrets=tuple(str(v) for v in (request.get("env") or {}).values()),
    )
    return Prepared(task, attempt, "effect", state="running", effect=plan, decision=record)


def _budget_estimate(kind: str, request: Mapping[str, Any]) -> dict[str, int]:
    if kind == "builtin.shell.exec":
        limits = request.get("limits") or {}
        return {"processOutputBytes": int(limits.get("combinedOutputLimitBytes", 2 * 1024 * 1024))}
    return {}


# ----------------------------------------------------------------------------- builders

Built = tuple[dict[str, Any], dict[str, Any]]


def _read(
    rs: RunSettings, task: PlannedTask, action: Mapping[str, Any], args: Mapping[str, Any]
) -> Built:
    path = _str_arg(task, args, "path")
    return {"path": path}, {"workspace": rs.workspace, "path": path}


def _write(
    rs: RunSettings, task: PlannedTask, action: Mapping[str, Any], args: Mapping[str, Any]
) -> Built:
    path = _str_arg(task, args, "path")
    content = _str_arg(task, args, "content")
    roots = list(rs.spec["policy"].get("writableRoots") or [])
    request = {"workspace": rs.workspace, "writableRoots": roots, "path": path, "content": content}
    return {"path": path, "content": content}, request


def _memory_write(
    rs: RunSettings, task: PlannedTask, action: Mapping[str, Any], args: Mapping[str, Any]
) -> Built:
    key = _str_arg(task, args, "key")
    if task.memory_writes and key not in task.memory_writes:
        raise PolicyDeniedError(
            f"task {task.id}: memory key {key!r} is not in its memoryWrites "
            f"{list(task.memory_writes)}"
        )
    recorded = {"key": key, "value": args.get("value")}
    return recorded, dict(recorded)


def _shell(
    rs: RunSettings, task: PlannedTask, action: Mapping[str, Any], args: Mapping[str, Any]
) -> Built:
    policy = rs.spec["policy"]
    command = str(action.get("command") or "")
    allow = list(policy.get("processAllowlist") or [])
    if os.path.basename(command) not in allow:
        raise PolicyDeniedError(
            f"task {task.id}: process {os.path.basename(command)!r} is not in "
            "policy.processAllowlist"
        )
    env, recorded_env = _resolve_env(rs, task, action, policy)
    limits = {
        "timeoutSeconds": float(task.timeout_seconds),
        "stdoutLimitBytes": action.get("stdoutLimitBytes") or 1024 * 1024,
        "stderrLimitBytes": action.get("stderrLimitBytes") or 1024 * 1024,
        "combinedOutputLimitBytes": action.get("combinedOutputLimitBytes") or 2 * 1024 * 1024,
    }
    base = {
        "command": command,
        "args": list(action.get("args") or []),
        "cwd": action.get("cwd"),
        "isolation": action.get("isolation") or "process",
        "container": action.get("container"),
    }
    request = {
        **base,
        "workspace": rs.workspace,
        "env": env,
        "limits": limits,
        "processAllowlist": allow,
    }
    return {**base, "env": recorded_env, "limits": limits}, request


def _resolve_env(
    rs: RunSettings, task: PlannedTask, action: Mapping[str, Any], policy: Mapping[str, Any]
) -> tuple[dict[str, str], dict[str, Any]]:
    """Resolve ``env`` secret references; record only their source and SHA-256."""
    values: dict[str, str] = {}
    recorded: dict[str, Any] = {}
    for name, ref in sorted((action.get("env") or {}).items()):
        got = secrets.resolve(ref, policy, rs.workspace, f"task {task.id}: env {name}")
        values[name] = got.value
        recorded[name] = got.recorded()
    return values, recorded


def _str_arg(task: PlannedTask, args: Mapping[str, Any], key: str) -> str:
    value = args.get(key)
    if not isinstance(value, str):
        raise RunFailedError(f"task {task.id}: `with.{key}` must be a string, got {value!r}")
    return value


def _long_term(
    rs: RunSettings, task: PlannedTask, action: Mapping[str, Any], args: Mapping[str, Any]
) -> Built:
    settings = (rs.spec.get("memory") or {}).get("longTerm") or {}
    recorded: dict[str, Any] = {"namespace": str(settings.get("namespace") or "default"),
                "key": _str_arg(task, args, "key")}  # fmt: skip
    if action["kind"] == "builtin.long_term_memory.write":
        recorded["value"] = args.get("value")
    return recorded, dict(recorded)


# Effects on state the coordinator owns run in the coordinator, under the same protocol.
IN_PROCESS = frozenset(
    {"builtin.memory.write", "builtin.long_term_memory.read", "builtin.long_term_memory.write"}
)

_BUILDERS = {
    "builtin.long_term_memory.read": _long_term,
    "builtin.long_term_memory.write": _long_term,
    "builtin.read": _read,
    "builtin.write": _write,
    "builtin.memory.write": _memory_write,
    "builtin.shell.exec": _shell,
}


def memory_write_output(memory: Mapping[str, Any], recorded: Mapping[str, Any]) -> dict[str, Any]:
    """The output of ``builtin.memory.write`` against the batch's memory snapshot."""
    key = str(recorded["key"])
    before = memory.get(key)
    after = recorded.get("value")
    changed = key not in memory or before != after
    return {
        "status": "changed" if changed else "unchanged",
        "changed": changed,
        "before": before,
        "after": after,
        "key": key,
    }
