"""The compiler's intermediate records between the document and the final ``Plan``.

``Source`` is a task after sub-workflow flattening (still one authored definition, possibly
with foreach/matrix/loop pending); ``Node`` is one task of the expanded graph. Both keep the
dotted document ``path`` of the authored definition so diagnostics about synthetic tasks point
at the YAML the user wrote.

Invariant: ``task`` dicts keep the normalized-document shape (camelCase keys, defaults filled);
the compiler copies them before changing anything, so the input document is never mutated.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Literal

from agentctl.core import registry
from agentctl.core.compiler.instructions import resolved_agents
from agentctl.core.compiler.variables import CapturedVars

SourceRole = Literal["task", "subworkflow_input", "subworkflow_output"]

DEFAULT_RETRY: dict[str, int] = {"maxAttempts": 1, "backoffMs": 0}

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
    "retry": DEFAULT_RETRY,
    "timeoutSeconds": None,
    "failure": "stop",
    "compensate": None,
    "outputSchema": None,
}


# The defaults that are None (a key already there keeps its place and value), and the others.
_NONE_DEFAULTS = frozenset(key for key, default in TASK_DEFAULTS.items() if default is None)
_OTHER_DEFAULTS = tuple((key, d) for key, d in TASK_DEFAULTS.items() if d is not None)


def with_defaults(task: dict[str, Any]) -> dict[str, Any]:
    """A shallow copy of ``task`` with every optional key present (tolerates sparse input)."""
    filled = dict(task)
    # A normalized task has every key: only the non-None defaults can change it (the loop
    # below over 14 keys was ~1 us a task).
    defaults = _OTHER_DEFAULTS if filled.keys() >= _NONE_DEFAULTS else TASK_DEFAULTS.items()
    for key, default in defaults:
        if filled.get(key) is None:
            # Most defaults are None: nothing to copy (deepcopy per key per task added up); the
            # others are an empty list or a flat dict of scalars, whose one-level copy is the
            # deep copy (``copy.deepcopy`` cost ~4 calls a task of a plain chain).
            filled[key] = None if default is None else _fresh(default)
    return filled


def _fresh(default: Any) -> Any:
    """A deep copy of one of ``TASK_DEFAULTS``' values."""
    if type(default) is str:  # immutable ("failure": "stop")
        return default
    if type(default) is list and not default:
        return []
    if type(default) is dict and all(type(v) in (int, str) for v in default.values()):
        return dict(default)
    return copy.deepcopy(default)


@dataclass
class Source:
    """One task definition after sub-workflow flattening."""

    task: dict[str, Any]
    path: str
    role: SourceRole = "task"
    subworkflow: str | None = None  # "name@version" for boundary roles
    parent: str | None = None  # the invocation id of the enclosing sub-workflow
    children: tuple[str, ...] = ()  # output boundary: the invocation's own task ids
    # Task ids of the invoking workflow this definition's task named, already reported as
    # outside the sub-workflow's scope: no later check reports them again (not in the digest).
    foreign: frozenset[str] = frozenset()

    def to_json(self) -> dict[str, Any]:
        """The flattened definition as it enters the workflow digest."""
        data = dict(self.task)
        if self.role != "task":
            data["subworkflow"] = {
                "role": self.role,
                "workflow": self.subworkflow,
                "children": list(self.children),
            }
        return data


@dataclass
class Node:
    """One task of the expanded graph, before references are resolved."""

    id: str
    source: Source
    task: dict[str, Any]
    needs: list[str]
    kind: str | None = None  # fixed for synthetic tasks; derived from ``uses`` otherwise
    bindings: dict[str, Any] = field(default_factory=dict)
    when: str | None = None
    children: tuple[str, ...] = ()
    parent: str | None = None
    guard: str | None = None
    max_iterations: int | None = None
    expansion: str | None = None  # "foreach" | "matrix" | "loop" for expanded children

    @property
    def path(self) -> str:
        return self.source.path


@dataclass
class Env:
    """The document's name-keyed maps, shared read-only by every compiler pass."""

    spec: dict[str, Any]
    actions: dict[str, Any]
    agents: dict[str, Any]
    providers: dict[str, Any]
    tools: dict[str, Any]
    variables: CapturedVars = field(default_factory=CapturedVars)
    # The registry's working-memory writer kinds, read once per compile (not once per task).
    memory_writers: frozenset[str] = field(default_factory=registry.working_memory_writers)

    @classmethod
    def of(cls, doc: dict[str, Any], variables: CapturedVars | None = None) -> Env:
        spec = doc["spec"]
        variables = variables or CapturedVars()
        return cls(
            spec=spec,
            actions=spec.get("actions") or {},
            agents=resolved_agents(spec.get("agents") or {}, variables),
            providers=spec.get("providers") or {},
            tools=spec.get("tools") or {},
            variables=variables,
        )

    def action_of(self, node: Node) -> dict[str, Any] | None:
        uses = str(node.task.get("uses", ""))
        if node.kind != "action" or not uses.startswith("action:"):
            return None
        action = self.actions.get(uses.removeprefix("action:"))
        return action if isinstance(action, dict) else None

    def agent_of(self, node: Node) -> dict[str, Any] | None:
        uses = str(node.task.get("uses", ""))
        if node.kind != "agent" or not uses.startswith("agent:"):
            return None
        agent = self.agents.get(uses.removeprefix("agent:"))
        return agent if isinstance(agent, dict) else None
