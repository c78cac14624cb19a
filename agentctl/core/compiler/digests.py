"""Workflow digest, plan digest and per-task definition fingerprints (spec/dsl.md §9).

Invariants: every digest is taken over canonical JSON (sorted keys, compact, non-ASCII kept),
so dict key order in the source never matters while any semantic change does.
- ``workflow_digest``: bare sha256 hex of the normalized document after sub-workflow
  flattening (``spec.tasks`` replaced by the flattened tasks, ``spec.subworkflows`` dropped).
- ``plan_digest``: bare sha256 hex of {name, workflowDigest, order, maxConcurrency, tasks,
  requirements}.
- ``definition_fingerprint``: ``sha256:v1:`` digest of the task's static definition (position
  excluded) plus the resolved action or agent (with its provider and tools) it runs.
"""

from __future__ import annotations

from typing import Any

from agentctl.core.canonical import Items, streamed_json_digest, v1_digest
from agentctl.core.compiler.ir import Env, Source
from agentctl.core.compiler.serialize import definition_json, task_json
from agentctl.core.plan import PlannedTask


def workflow_digest(doc: dict[str, Any], sources: list[Source]) -> str:
    """The digest of the flattened document, hashed task by task (never the whole text)."""
    spec = {key: value for key, value in doc["spec"].items() if key != "subworkflows"}
    spec["tasks"] = Items(source.to_json() for source in sources)
    return streamed_json_digest({**doc, "spec": spec})


def resolved_definition(task: PlannedTask, env: Env) -> dict[str, Any] | None:
    if task.action is not None:
        return {"action": env.actions.get(task.action)}
    if task.agent is None:
        return None
    agent = env.agents.get(task.agent) or {}
    tools = {name: env.tools.get(name) for name in agent.get("tools") or []}
    return {
        "agent": agent,
        "provider": env.providers.get(str(agent.get("provider"))),
        "tools": tools,
    }


def definition_fingerprint(task: PlannedTask, env: Env) -> str:
    return v1_digest({"task": definition_json(task), "uses": resolved_definition(task, env)})


def plan_digest(
    name: str,
    workflow: str,
    order: tuple[str, ...],
    max_concurrency: int,
    tasks: tuple[PlannedTask, ...],
    requirements: dict[str, Any],
) -> str:
    # Hashed task by task: the whole plan as one text was the compiler's peak of memory.
    return streamed_json_digest(
        {
            "name": name,
            "workflowDigest": workflow,
            "order": list(order),
            "maxConcurrency": max_concurrency,
            "tasks": Items(task_json(task) for task in tasks),
            "requirements": requirements,
        }
    )
