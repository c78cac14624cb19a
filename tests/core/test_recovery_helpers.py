"""Builders shared by the recovery planner tests (no tests here).

Workflows go through the real loader and compiler; source runs are hand-made ``SourceRun``
values shaped like the ledger's rows of a run that executed the same workflow.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from agentctl.core.canonical import json_digest, sha256_hex
from agentctl.core.compiler import compile_workflow
from agentctl.core.dsl import load_workflow
from agentctl.core.plan import Plan, PlannedTask
from agentctl.core.recovery import (
    SourceEffect,
    SourceRun,
    SourceTask,
    output_contract_fingerprint,
)
from agentctl.core.registry import lookup

BASE = """
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: recov }
spec:
  policy: { approval: never, processAllowlist: [echo] }
  providers: { sim: { kind: fake } }
  agents:
    scout: { provider: sim, model: m, instructions: Go. }
  actions:
    put: { kind: builtin.assign }
    write: { kind: builtin.write }
    remember: { kind: builtin.memory.write }
    sh: { kind: builtin.shell.exec, command: echo, args: [hi] }
  tasks:
    - { id: a, uses: "action:put", with: { n: 1 } }
    - { id: b, uses: "action:write", needs: [a], with: { path: b.txt, content: B }, compensate: { uses: "action:write", with: { path: b.txt, content: "" } } }
    - { id: c, uses: "action:remember", needs: [b], with: { key: k, value: 1 } }
    - { id: d, uses: "action:put", needs: [a], with: { n: 2 } }
    - { id: e, uses: "action:put", needs: [c, d], with: { n: 3 } }
"""


def always_ok(digest: str, size: int) -> bool:
    return True


@dataclass(frozen=True)
class Compiled:
    plan: Plan
    document: dict[str, Any]

    def kind_of(self, task: PlannedTask) -> str | None:
        if task.action is None:
            return None
        return str(self.document["spec"]["actions"][task.action]["kind"])


def compile_yaml(text: str) -> Compiled:
    loaded = load_workflow(text)
    return Compiled(compile_workflow(loaded.document), loaded.document)


def base(**replacements: str) -> Compiled:
    text = BASE
    for old, new in replacements.items():
        assert old in text, old
        text = text.replace(old, new)
    return compile_yaml(text)


def effect(
    task_id: str,
    operation: str = "builtin.write",
    effect_class: str = "workspace_mutate",
    idempotency: str = "idempotent",
    *,
    status: str = "succeeded",
    confirmed: bool | None = None,
    reconciliation: str | None = None,
    attempt: int = 1,
    ordinal: int = 0,
) -> SourceEffect:
    return SourceEffect(
        effect_id=sha256_hex(f"{task_id}\0{attempt}\0{ordinal}\0{operation}"),
        task_id=task_id,
        attempt=attempt,
        operation=operation,
        effect_class=effect_class,
        idempotency=idempotency,
        status=status,
        confirmed=status == "succeeded" if confirmed is None else confirmed,
        reconciliation=reconciliation,
    )


def _default_effects(compiled: Compiled, task: PlannedTask) -> tuple[SourceEffect, ...]:
    if task.kind == "agent":
        return (effect(task.id, "model.call", "model", "at_most_once"),)
    kind = compiled.kind_of(task)
    if kind is None or lookup(kind).is_pure:
        return ()
    spec = lookup(kind)
    return (effect(task.id, kind, spec.effect_class.value, spec.idempotency.value),)


def succeeded_task(compiled: Compiled, task: PlannedTask) -> SourceTask:
    output: dict[str, Any] = {"task": task.id, "with": task.with_}
    kind = compiled.kind_of(task)
    delta = None
    if kind == "builtin.memory.write":
        delta = {str(task.with_["key"]): task.with_.get("value")}
    artifacts: tuple[dict[str, Any], ...] = ()
    if kind == "builtin.write":
        path = str(task.with_["path"])
        artifacts = ({"path": path, "digest": sha256_hex(path), "sizeBytes": 1},)
    return SourceTask(
        task_id=task.id,
        state="succeeded",
        attempt=1,
        disposition="executed",
        output=output,
        definition_fingerprint=task.definition_fingerprint,
        input_digest="sha256:v1:" + json_digest(task.with_),
        output_contract_fingerprint=output_contract_fingerprint(task),
        output_digest=json_digest(output),
        state_delta=delta,
        artifacts=artifacts,
        effects=_default_effects(compiled, task),
        needs=task.needs,
    )


def succeeded_run(
    compiled: Compiled, *, run_id: str = "run-src", state: str = "succeeded", mode: str = "execute"
) -> SourceRun:
    return SourceRun(
        run_id=run_id,
        mode=mode,
        state=state,
        workflow_name=compiled.plan.name,
        workflow_digest=compiled.plan.workflow_digest,
        tasks={task.id: succeeded_task(compiled, task) for task in compiled.plan.tasks},
    )


def with_task(run: SourceRun, task_id: str, **changes: Any) -> SourceRun:
    tasks = dict(run.tasks)
    tasks[task_id] = dataclasses.replace(tasks[task_id], **changes)
    return dataclasses.replace(run, tasks=tasks)


def failed(run: SourceRun, task_id: str, *downstream: str) -> SourceRun:
    """``task_id`` failed (its effect failed too) and ``downstream`` were skipped."""
    task = run.tasks[task_id]
    run = with_task(
        run,
        task_id,
        state="failed",
        output=None,
        output_digest=None,
        state_delta=None,
        artifacts=(),
        effects=tuple(
            dataclasses.replace(e, status="failed", confirmed=False) for e in task.effects
        ),
    )
    for skipped in downstream:
        run = with_task(
            run,
            skipped,
            state="skipped",
            output=None,
            output_digest=None,
            effects=(),
            state_delta=None,
        )
    return dataclasses.replace(run, state="failed")


def rules(plan: Any) -> list[str]:
    return [block.rule for block in plan.blocked]
