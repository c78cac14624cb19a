"""The parts of a failed workflow document that are valid on their own, for the document rules.

A document whose schema check failed can hold other, independent problems that only the
document rules (``rules.py``) find: a schema error in one task must not hide a misplaced
``memoryWrites`` on another, or a ``reasoning`` option a fake provider cannot honour.

Invariants:
- each part (a task, an action, a provider, an agent, a tool, an MCP server, an A2A peer, the
  policy) is validated on its own, from the document as the schema check last saw it (plain
  scalars already taken as written); a part that fails is left out, so nothing it would report
  is reported twice or as a consequence of its own error (no cascades);
- nothing is salvaged when the envelope itself failed (``apiVersion``, ``kind``, a ``spec``
  that is not a mapping): the document may be of another version or format altogether;
- pure: returns findings, raises nothing of its own.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, TypeVar

from pydantic import BaseModel
from pydantic import ValidationError as PydanticValidationError

from agentctl.core.dsl.actions import Action
from agentctl.core.dsl.agents import Agent, Provider, Tool
from agentctl.core.dsl.diagnostics import Finding
from agentctl.core.dsl.rules import RuleParts, part_findings
from agentctl.core.dsl.settings import A2aPeer, McpServer, Policy, Runtime
from agentctl.core.dsl.tasks import Task

M = TypeVar("M", bound=BaseModel)
_SALVAGEABLE = ("spec", "metadata")


def salvaged_findings(raw: Any, failed: list[Finding]) -> list[Finding]:
    """The document rules' findings on the valid parts of ``raw``, whose schema check found
    ``failed``; [] when a failure is outside ``spec`` and ``metadata``."""
    if not isinstance(raw, dict) or not isinstance(raw.get("spec"), dict):
        return []
    if any(f.path.split(".")[0] not in _SALVAGEABLE or f.path == "spec" for f in failed):
        return []
    spec: dict[str, Any] = raw["spec"]
    policy = _valid(Policy, spec["policy"]) if "policy" in spec else Policy.model_construct()
    return part_findings(
        RuleParts(
            tasks=_tasks(spec),
            actions=_valid_map(Action, spec.get("actions")),
            providers=_valid_map(Provider, spec.get("providers")),
            agents=_valid_map(Agent, spec.get("agents")),
            tools=_valid_map(Tool, spec.get("tools")),
            mcp_servers=_valid_map(McpServer, spec.get("mcpServers")),
            a2a_peers=_valid_map(A2aPeer, spec.get("a2aPeers")),
            policy=policy,
            runtime=_valid(Runtime, spec["runtime"]) if "runtime" in spec else None,
        )
    )


def raw_tasks(spec: Mapping[str, object]) -> Iterator[tuple[str, Mapping[str, object]]]:
    """The task mappings of the workflow and of each sub-workflow as written, by dotted path
    (``spec.tasks.0``, ``spec.subworkflows.NAME.tasks.0``); anything not a mapping skipped."""
    for base, tasks in task_lists(spec):
        for index, task in enumerate(tasks):
            if isinstance(task, Mapping):
                yield f"{base}.{index}", task


def task_lists(spec: Mapping[str, object]) -> list[tuple[str, list[object]]]:
    """The task lists of the workflow and of each sub-workflow as written, by dotted path
    (``spec.tasks``, ``spec.subworkflows.NAME.tasks``); a ``tasks`` not a list is empty."""
    lists: list[tuple[str, object]] = [("spec.tasks", spec.get("tasks"))]
    subworkflows = spec.get("subworkflows")
    if isinstance(subworkflows, Mapping):
        for name, sub in subworkflows.items():
            if isinstance(sub, Mapping):
                lists.append((f"spec.subworkflows.{name}.tasks", sub.get("tasks")))
    return [(base, tasks if isinstance(tasks, list) else []) for base, tasks in lists]


def _tasks(spec: dict[str, Any]) -> dict[str, Task]:
    """The valid tasks of the workflow and of each sub-workflow, by dotted path."""
    found = {path: _valid(Task, raw) for path, raw in raw_tasks(spec)}
    return {path: task for path, task in found.items() if task is not None}


def _valid_map(model: type[M], value: Any) -> dict[str, M]:
    """The entries of a name-keyed mapping that are valid ``model`` objects."""
    if not isinstance(value, dict):
        return {}
    found = {str(name): _valid(model, entry) for name, entry in value.items()}
    return {name: entry for name, entry in found.items() if entry is not None}


def _valid(model: type[M], value: Any) -> M | None:
    try:
        return model.model_validate(value, by_alias=True, by_name=False)
    except PydanticValidationError:
        return None
