"""The compiled plan: the deterministic task graph a run executes.

The compiler (``core.compiler``) is the only producer; the coordinator, the recovery planners
and the CLI are consumers. A plan is immutable and fully static: foreach, matrix, loops and
sub-workflows are already expanded into ordinary namespaced tasks, so nothing at run time can
grow the graph.

Invariants:
- ``order`` is the Kahn topological order with the ready queue kept in expanded declaration
  order; ``tasks[i].position == i`` and ``tasks[i].id == order[i]``.
- every id in ``needs``, ``children``, ``parent`` and route destinations names a task of the plan.
- templates in ``with_``, ``vars``, ``when``, ``guard`` and ``route.select`` are stored unrendered;
  the coordinator renders them against the runtime context (spec/dsl.md §6.5).
- the plan carries everything a run needs, so the coordinator never reads the document while
  driving: each action task its normalized action definition and registry operation, each
  agent task its agent, provider and tools, and ``Plan.run`` the run-level settings. These
  carried parts never enter the plan digest, the fingerprints or the printed plan (those are
  user contracts computed from the fields above); ``agentctl.core.compiler.stored`` turns the
  whole plan into JSON and back, exactly.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

from agentctl.core import registry
from agentctl.core.frozen import direct_init
from agentctl.core.jsonvalue import JsonObject, JsonValue
from agentctl.core.operations import Operation

TaskKind = Literal[
    "action",  # uses: action:N
    "agent",  # uses: agent:N
    "router",  # uses: router (pure)
    "aggregate",  # foreach / matrix parent (pure): {items: [...]}
    "loop_aggregate",  # loop parent (pure): {iterations, items}
    "subworkflow_input",  # sub-workflow input boundary (pure): output = render(with_)
    "subworkflow_output",  # sub-workflow output aggregate (pure): output = render(with_)
]

FailureMode = Literal["stop", "continue"]


@dataclass(frozen=True)
class RetryPolicy:
    """A task's resolved retry: how many attempts in all and the wait between them."""

    max_attempts: int = 1
    backoff_ms: int = 0


@dataclass(frozen=True)
class RouteCase:
    """One case of a router: the value it matches and the tasks it selects."""

    equals: JsonValue
    tasks: tuple[str, ...]


@dataclass(frozen=True)
class Route:
    """A router's compiled selection: the template, its cases and the default tasks."""

    select: str  # one exact template
    cases: tuple[RouteCase, ...]
    default: tuple[str, ...]


@dataclass(frozen=True)
class Compensation:
    """The action a task's ``compensate`` block runs, with its resolved inputs and limits."""

    action: str  # name in spec.actions
    with_: JsonObject  # action defaults shallow-merged under the compensate `with`
    retry: RetryPolicy
    timeout_seconds: int | None


@dataclass(frozen=True)
class AgentConfig:
    """An agent task's resolved definitions (normalized document shapes)."""

    agent: JsonObject
    provider_name: str
    provider: JsonObject
    tools: dict[str, JsonObject]  # in the agent's `tools` order

    @property
    def provider_kind(self) -> str:
        return str(self.provider.get("kind"))


@dataclass(frozen=True)
class RunConfig:
    """The run-level settings a run needs while driving (normalized document shapes)."""

    policy: JsonObject = field(default_factory=dict)
    working_memory: JsonObject = field(default_factory=dict)  # the initial working memory
    long_term: JsonObject | None = None  # spec.memory.longTerm
    budgets: JsonObject = field(default_factory=dict)  # spec.runtime.budgets
    outputs: JsonObject = field(default_factory=dict)  # spec.outputs (templates)
    # The run-level variables ``outputs`` reads (``variables.run_vars``), kept only when they
    # read some: values a template never reads are not carried in every stored plan.
    vars: JsonObject = field(default_factory=dict)
    compensation: JsonObject = field(default_factory=dict)  # spec.compensation
    mcp_servers: JsonObject = field(default_factory=dict)  # spec.mcpServers
    pricing: JsonObject | None = None  # spec.runtime.pricing (core.pricing reads it)
    a2a_peers: JsonObject = field(default_factory=dict)  # spec.a2aPeers (name → peer)

    @property
    def long_term_namespace(self) -> str:
        return str((self.long_term or {}).get("namespace") or "default")

    def budget_limits(self) -> dict[str, int]:
        """The integer budget limits the run's budget ledger enforces."""
        return {
            k: v for k, v in self.budgets.items() if isinstance(v, int) and not isinstance(v, bool)
        }

    def wall_time_limit(self) -> int | None:
        limit = self.budgets.get("maxWallTimeSeconds")
        return limit if isinstance(limit, int) and not isinstance(limit, bool) else None


@direct_init
@dataclass(frozen=True)
class PlannedTask:
    """One task of the compiled plan, with everything resolved that running it needs."""

    id: str
    position: int
    kind: TaskKind
    uses: str  # as authored ("action:put", "agent:w", "router", "workflow:shout")
    action: str | None  # spec.actions key when kind == "action"
    agent: str | None  # spec.agents key when kind == "agent"
    needs: tuple[str, ...]
    with_: JsonValue  # action `with` defaults merged under the task `with`; unrendered
    vars: JsonObject  # merged variable layers plus engine bindings; unrendered
    bindings: JsonObject  # engine bindings only (foreachIndex, matrix, loopIndex, ...)
    when: str | None  # condition text (loop children: the rewritten guard)
    retry: RetryPolicy
    timeout_seconds: int
    failure: FailureMode
    memory_writes: tuple[str, ...]
    output_schema: JsonObject | None  # None = default contract {"type": "object"}
    compensate: Compensation | None
    route: Route | None
    children: tuple[str, ...] = ()  # aggregates: child ids in expansion order
    parent: str | None = None  # expanded children: their aggregate
    guard: str | None = None  # loop aggregate: the guard, checked once more after the chain
    max_iterations: int | None = None  # loop aggregate
    definition_fingerprint: str = ""  # sha256:v1:... of the task's static definition
    # Carried for the run, outside every digest: the registry operation name (action kind, or
    # for agents the provider kind: its model call's name; plans stored before hold the legacy
    # "model.<kind>", which the registry resolves) and the resolved definitions it runs.
    operation: str | None = field(default=None, repr=False)
    action_config: JsonObject | None = field(default=None, repr=False)
    agent_config: AgentConfig | None = field(default=None, repr=False)
    # Sub-workflow boundaries and aggregates: "NAME@VERSION" of the invoked definition (for
    # the printed plan only; outside every digest, absent from plans stored before it).
    subworkflow: str | None = field(default=None, repr=False)
    # Agent tasks: the task's own ``timeoutSeconds`` as written, which bounds the whole
    # attempt (spec/dsl.md §4); None when the task gives none (``timeout_seconds`` is then the
    # runtime default, which an agent task does not apply). Outside every digest
    # (``timeout_seconds``, in them, holds its value); absent from plans stored before it.
    agent_timeout_seconds: int | None = field(default=None, repr=False)

    @cached_property
    def entry(self) -> Operation | None:
        """The registry entry of ``operation`` (None for routers, aggregates, boundaries).

        Looked up once per task (the drive asks ~5 times a task): entries are never replaced
        while registered, and a task's ``operation`` is fixed. Kept in the instance's dict,
        outside the fields, so equality, hashing and the stored plan do not see it."""
        return registry.find(self.operation) if self.operation is not None else None

    def config(self) -> Mapping[str, JsonValue]:
        """The action definition of an action task ({} otherwise)."""
        return self.action_config or {}


# What a compiled plan carries to its run's creation outside its fields (``Plan``).
_CARRIED = frozenset({"_document_text", "_stored_tasks"})


@dataclass(frozen=True)
class Plan:
    """A compiled workflow: tasks in compiled order, digests and run settings."""

    name: str
    workflow_digest: str  # bare sha256 hex
    plan_digest: str  # bare sha256 hex
    max_concurrency: int
    order: tuple[str, ...]
    tasks: tuple[PlannedTask, ...]
    # The compiler (core/compiler/) builds and reads it unnarrowed; typed there first.
    requirements: dict[str, Any] = field(default_factory=dict)
    run: RunConfig = field(default_factory=RunConfig, repr=False)  # outside every digest

    def task(self, task_id: str) -> PlannedTask:
        return self.tasks[self.index[task_id]]

    def expanded(self, task_id: str) -> tuple[str, ...]:
        """``task_id`` and, for an aggregate (foreach, matrix, loop, sub-workflow), every task
        its expansion made — children, theirs in turn — depth first in expansion order: what
        the task the user wrote stands for when an operator names it."""
        found = [task_id]
        for child in self.task(task_id).children:
            found += self.expanded(child)
        return tuple(found)

    @cached_property
    def index(self) -> dict[str, int]:
        return {t.id: t.position for t in self.tasks}

    def carrying_document_text(self, document: object, text: str | None) -> Plan:
        """This plan, carrying ``text`` (None: nothing), the canonical JSON of the very object
        ``document`` as compiled (the compile made it for the workflow digest), to the run's
        creation. Kept in the instance's dict, outside the fields: equality, hashing and the
        stored plan do not see it, and a copy or a pickle of the plan does not carry it
        (``__getstate__``). Contract: the document is not changed between the compile and the
        run's creation (identity cannot see an in-place change); a caller that changes it
        compiles it again (the plan's digests would not describe it either)."""
        if text is not None:
            self.__dict__["_document_text"] = (document, text)
        return self

    def take_document_text(self, document: object) -> str | None:
        """The carried text if it is of ``document`` (that very object), else None; given
        once and let go, so the drive after the run's creation does not hold it."""
        carried = self.__dict__.pop("_document_text", None)
        if carried is None or carried[0] is not document:
            return None
        text: str = carried[1]
        return text

    def carrying_stored_tasks(self, texts: tuple[str, ...] | None) -> Plan:
        """This plan, carrying ``texts`` (None: nothing), each task's stored form as canonical
        JSON (``core.compiler.stored``), which the compile joins from the runs of canonical
        JSON it made for the fingerprint and the plan digest: the run's creation stores them
        instead of encoding every task again. Kept in the instance's dict with the very
        ``tasks`` tuple they describe, outside the fields, and not carried by a copy or a
        pickle (``__getstate__``), as the document text is."""
        if texts is not None:
            self.__dict__["_stored_tasks"] = (self.tasks, texts)
        return self

    def stored_tasks(self) -> tuple[str, ...] | None:
        """The carried stored task texts if they are of this plan's ``tasks``, else None.
        Kept until ``let_go_stored_tasks``: a write of the stored plan retried part way (a
        plan stored inline after all, ``ledger.plans``) reads them again."""
        carried = self.__dict__.get("_stored_tasks")
        if carried is None or carried[0] is not self.tasks:
            return None
        texts: tuple[str, ...] = carried[1]
        return texts

    def let_go_stored_tasks(self) -> None:
        """Forget the carried stored task texts (a whole stored plan was made from them): the
        drive that follows the run's creation does not hold them (~6 MB at 10,000 tasks)."""
        self.__dict__.pop("_stored_tasks", None)

    def __getstate__(self) -> dict[str, object]:
        """The state ``copy`` and ``pickle`` take: the fields, without the carried texts, so
        only the compiled object itself hands them to a run's creation."""
        return {k: v for k, v in self.__dict__.items() if k not in _CARRIED}


def compensates_automatically(plan: Plan, state: str, mode: str) -> bool:
    """Whether a run of ``plan`` that ended ``state`` is compensated at once: it failed (never
    cancelled) and its workflow says ``compensation.onFailure: automatic`` — whichever command
    drove it to that end (spec/cli.md §5: "after a failed terminal run"). A compensation run
    (``mode``) is never compensated in turn."""
    automatic = plan.run.compensation.get("onFailure") == "automatic"
    return state == "failed" and automatic and mode != "compensation"
