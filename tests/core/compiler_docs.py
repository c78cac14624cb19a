"""Builders of normalized workflow documents for compiler tests.

They fill the defaults the loader would (spec/dsl.md §2, §4) so compiler tests do not depend
on YAML loading; ``example`` loads the spec's §10 examples through the real loader.
"""

from __future__ import annotations

import copy
from typing import Any

from agentctl.core.compiler import compile_workflow
from agentctl.core.plan import Plan
from agentctl.errors import ValidationError

# Two tasks sharing a workflow variable whose template is VALUE (a template error there is
# reported once, at `spec.vars.q`): read by the compiler and the CLI tests of it.
SHARED_VARS = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: {name: x}
spec:
  vars:
    q: "VALUE"
  actions: {a: {kind: builtin.assign}}
  tasks:
  - {id: a, uses: "action:a"}
  - {id: b, uses: "action:a"}
"""

TASK_DEFAULTS: dict[str, Any] = {
    "needs": [],
    "foreach": None,
    "matrix": None,
    "route": None,
    "loop": None,
    "memoryWrites": [],
    "when": None,
    "vars": {},
    "with": {},
    "retry": {"maxAttempts": 1, "backoffMs": 0},
    "timeoutSeconds": None,
    "failure": "stop",
    "compensate": None,
    "outputSchema": None,
}


def task(task_id: str, uses: str = "action:put", **fields: Any) -> dict[str, Any]:
    """A task with every default filled; ``with_`` stands for the ``with`` key."""
    if "with_" in fields:
        fields["with"] = fields.pop("with_")
    return {"id": task_id, "uses": uses, **copy.deepcopy(TASK_DEFAULTS), **fields}


def workflow(
    tasks: list[dict[str, Any]],
    *,
    name: str = "t",
    max_concurrency: int = 1,
    budgets: dict[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A normalized document; ``spec`` entries replace the defaults below."""
    body: dict[str, Any] = {
        "inputs": {},
        "vars": {},
        "outputs": {},
        "providers": {},
        "agents": {},
        "actions": {
            "put": {"kind": "builtin.assign", "with": {}},
            "remember": {"kind": "builtin.memory.write", "with": {}},
            "save": {"kind": "builtin.write", "with": {}},
        },
        "tools": {},
        "subworkflows": {},
        "runtime": {
            "maxConcurrency": max_concurrency,
            "defaultTimeoutSeconds": 120,
            "budgets": budgets,
        },
        "policy": {"approval": "mutations"},
        "tasks": tasks,
    }
    body.update(spec)
    return {
        "apiVersion": "agentctl.dev/v1alpha1",
        "kind": "Workflow",
        "metadata": {"name": name},
        "spec": body,
    }


def compile_ok(doc: dict[str, Any]) -> Plan:
    return compile_workflow(doc)


def diagnostics(doc: dict[str, Any]) -> list[tuple[str, str]]:
    """(code, message) of every diagnostic; fails the test if the document compiles."""
    try:
        compile_workflow(doc)
    except ValidationError as exc:
        return [(d.code, d.message) for d in exc.diagnostics]
    raise AssertionError("expected the document to be rejected")


def codes(doc: dict[str, Any]) -> set[str]:
    return {code for code, _ in diagnostics(doc)}
