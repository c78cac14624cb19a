"""JSON shapes of compiled tasks, shared by the plan digest, fingerprints and ``plan`` output.

Invariant: keys are camelCase and values are plain JSON, so canonical JSON of these shapes
is stable across processes and Python versions.
"""

from __future__ import annotations

from typing import Any

from agentctl.core.plan import Compensation, PlannedTask, RetryPolicy, Route


def retry_json(retry: RetryPolicy) -> dict[str, int]:
    return {"maxAttempts": retry.max_attempts, "backoffMs": retry.backoff_ms}


def compensation_json(compensation: Compensation | None) -> dict[str, Any] | None:
    if compensation is None:
        return None
    return {
        "action": compensation.action,
        "with": compensation.with_,
        "retry": retry_json(compensation.retry),
        "timeoutSeconds": compensation.timeout_seconds,
    }


def route_json(route: Route | None) -> dict[str, Any] | None:
    if route is None:
        return None
    return {
        "select": route.select,
        "cases": [{"equals": case.equals, "tasks": list(case.tasks)} for case in route.cases],
        "default": list(route.default),
    }


def definition_json(task: PlannedTask) -> dict[str, Any]:
    """The static definition of a task: everything but its position and fingerprint."""
    return {
        "id": task.id,
        "kind": task.kind,
        "uses": task.uses,
        "action": task.action,
        "agent": task.agent,
        "needs": list(task.needs),
        "with": task.with_,
        "vars": task.vars,
        "bindings": task.bindings,
        "when": task.when,
        "retry": retry_json(task.retry),
        "timeoutSeconds": task.timeout_seconds,
        "failure": task.failure,
        "memoryWrites": list(task.memory_writes),
        "outputSchema": task.output_schema,
        "compensate": compensation_json(task.compensate),
        "route": route_json(task.route),
        "children": list(task.children),
        "parent": task.parent,
        "guard": task.guard,
        "maxIterations": task.max_iterations,
    }


def task_json(task: PlannedTask) -> dict[str, Any]:
    return {
        **definition_json(task),
        "position": task.position,
        "definitionFingerprint": task.definition_fingerprint,
    }
