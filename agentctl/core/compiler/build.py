"""Builds each ``PlannedTask`` from a resolved node: merges, checks and compiled sub-parts.

Merges (spec/dsl.md §3, §6.4): ``with_`` = action ``with`` defaults shallow-merged under the
task ``with``; ``vars`` = the layers of ``variables.base_vars`` and ``task_vars`` (var files,
vars, CLI variables; whole-key replacement) with the engine bindings last;
``timeout_seconds`` = task timeout, else action timeout, else
``runtime.defaultTimeoutSeconds``. Aggregates are pure:
no ``with``, vars, retry or schema.

Carried (outside every digest): an action task's normalized action definition and its kind as
registry operation; an agent task's agent, provider and tool definitions, its provider's kind
(the name of its model call's registry operation), and its own ``timeoutSeconds`` when it gives
one (``agent_timeout_seconds``: the bound of its whole attempt; the resolved
``timeout_seconds`` cannot tell it from the runtime default).

Checked here per task: template reads against ``needs`` (the task's ``with`` at the task, the
action's ``with`` defaults it does not replace at the action's keys, its variables at the layer
and key that writes each — ``varreads`` —, its engine bindings where the expansion writes
them), the ``with`` keys its action kind reads, the templates of its action's configuration
(``actionchecks``) and of its agent's instructions (``instructions``).

Invariant: the returned task is a draft (``position`` -1, no fingerprint); ``compile`` fixes
both once the order is known.
"""

from __future__ import annotations

import copy
from typing import Any, get_args

from agentctl.core.compiler.actionchecks import (
    ActionFacts,
    check_action,
    check_required_with,
    check_with_keys,
    whole_number,
)
from agentctl.core.compiler.capabilities import check_compensation
from agentctl.core.compiler.diagnostics import Collector
from agentctl.core.compiler.engine_reads import check_engine_reads
from agentctl.core.compiler.instructions import check_instructions
from agentctl.core.compiler.ir import Env, Node
from agentctl.core.compiler.memory import memory_writes
from agentctl.core.compiler.references import (
    check_compensation_reference,
    check_default_reads,
    check_reads,
    check_templates,
    check_when,
)
from agentctl.core.compiler.routes import compile_route
from agentctl.core.compiler.variables import base_vars, task_vars
from agentctl.core.compiler.varreads import VarReads
from agentctl.core.jsonschema import schema_problems
from agentctl.core.plan import AgentConfig, Compensation, PlannedTask, RetryPolicy, TaskKind
from agentctl.core.timeouts import TASK_TIMEOUT_SECONDS

_AGGREGATES = frozenset({"aggregate", "loop_aggregate"})
_AUTHORED = frozenset({"action", "agent", "router"})
# Kinds that render templates without being authored tasks: a sub-workflow's boundary renders
# the invoking task's ``with``, its aggregate the ``outputs``; both read the workflow's vars.
_RENDERING = _AUTHORED | {"subworkflow_input", "subworkflow_output"}


def _check_bindings(node: Node, graph: dict[str, Node], diags: Collector) -> None:
    """``check_reads`` of the engine bindings, each where it is written: a foreach child's
    item at its place in ``foreach.items``, a matrix child's values at their axes, the first
    loop child's ``loopPrevious`` at ``loop.initial`` (a later child's is the engine's read of
    the child before, which it needs), those a caller gave (``compile._bound``) at the task.
    Variables of the layers are ``VarReads``' to check."""
    for name, value in node.bindings.items():
        at = _binding_path(node, name)
        if at is not None and not isinstance(value, int):
            check_reads(node, value, name, graph, diags, at)


def _binding_path(node: Node, name: str) -> str | None:
    """Where the value of binding ``name`` is written; None for one the engine makes."""
    bindings, path = node.bindings, node.path
    if node.expansion == "foreach":
        index = bindings.get("foreachIndex")
        return None if name == "foreachIndex" else f"{path}.foreach.items.{index}"
    if node.expansion == "matrix":
        return f"{path}.matrix.axes" if name == "matrix" else None
    if node.expansion == "loop":
        first = name == "loopPrevious" and bindings.get("loopIndex") == 0
        return f"{path}.loop.initial" if first else None
    return path


def _check_engine_reads(
    node: Node,
    action: tuple[ActionFacts | None, dict[str, Any] | None],
    agent: tuple[str | None, dict[str, Any] | None],
    diags: Collector,
) -> None:
    facts, definition = action
    name, agent_definition = agent
    check_engine_reads(
        node,
        None if facts is None or definition is None else (facts.name, definition),
        None if name is None or agent_definition is None else (name, agent_definition),
        _with_path(node),
        diags,
    )


def _with_path(node: Node) -> str:
    """Where a task's ``with`` was written: a sub-workflow's output boundary renders the
    definition's ``outputs`` (its source path is the invoking task's)."""
    if node.kind == "subworkflow_output" and node.source.subworkflow:
        return f"spec.subworkflows.{node.source.subworkflow.partition('@')[0]}.outputs"
    return f"{node.path}.with"


def retry_of(raw: Any) -> RetryPolicy:
    raw = raw if isinstance(raw, dict) else {}
    return RetryPolicy(
        max_attempts=int(raw.get("maxAttempts") or 1), backoff_ms=int(raw.get("backoffMs") or 0)
    )


class Drafter:
    """One compile's maker of drafts (``draft``). What every task of one action or agent
    needs of it is found once per compile, not once per task (the document does not change
    during a compile): the action's ``ActionFacts``, the agent's carried configuration, the
    variable layers of the workflow and the agent merged, and one ``RetryPolicy`` per value.

    Invariant: a draft's ``position`` is -1 and it has no fingerprint; ``compile`` fixes
    both once the order is known."""

    def __init__(self, env: Env, graph: dict[str, Node], diags: Collector) -> None:
        self.env = env
        self.graph = graph
        self.diags = diags
        self._actions: dict[str, ActionFacts] = {}
        self._agents: dict[str, dict[str, Any]] = {}
        self._base_vars: dict[str | None, dict[str, Any]] = {}
        self._retries: dict[tuple[int, int], RetryPolicy] = {}
        # Shared variable layers are checked once, here; ``compile`` ends with ``report_shared``.
        self.var_reads = VarReads(env, graph, diags)
        runtime = env.spec.get("runtime") or {}
        default = whole_number(runtime.get("defaultTimeoutSeconds"))
        self._default_timeout = TASK_TIMEOUT_SECONDS if default is None else default

    def draft(self, node: Node) -> PlannedTask:
        kind, task, diags = str(node.kind), node.task, self.diags
        uses = str(task.get("uses", ""))
        action = self.env.action_of(node) if kind == "action" else None
        agent = self.env.agent_of(node) if kind == "agent" else None
        facts = None if action is None else self._facts(uses.removeprefix("action:"), action)
        agent_name = None if agent is None else uses.removeprefix("agent:")
        # Own copies: children of one expansion share their parent's definition dicts.
        with_ = _merged_with(node, action)
        vars_ = self._merged_vars(node, agent_name, agent)
        self._check_task(node, (facts, action), (agent_name, agent))
        output_schema = _output_schema(node, diags)
        authored = kind in _AUTHORED
        return PlannedTask(
            id=node.id,
            position=-1,
            kind=_TASK_KINDS[kind],
            uses=uses,
            action=None if facts is None else facts.name,
            agent=agent_name,
            needs=tuple(dict.fromkeys(node.needs)),
            with_=with_,
            vars=vars_,
            bindings=dict(node.bindings),
            when=node.when,
            retry=self._retry(task.get("retry")) if authored else RetryPolicy(),
            timeout_seconds=self._timeout(node, facts),
            failure="continue" if task.get("failure") == "continue" else "stop",
            memory_writes=self._writes(node, action, with_) if authored else (),
            output_schema=output_schema,
            compensate=_compensation(node, self.env, self.graph, diags) if authored else None,
            route=compile_route(node, self.graph, diags) if kind == "router" else None,
            children=node.children,
            parent=node.parent,
            guard=node.guard,
            max_iterations=node.max_iterations,
            subworkflow=_subworkflow(node, self.env),
            agent_timeout_seconds=_explicit_timeout(node) if agent is not None else None,
            **self._carried(facts, action, agent_name, agent),
        )

    def _writes(self, node: Node, action: dict[str, Any] | None, with_: Any) -> tuple[str, ...]:
        return memory_writes(node, action, with_, self.diags, self.env.memory_writers)

    def _facts(self, name: str, action: dict[str, Any]) -> ActionFacts:
        known = self._actions.get(name)
        if known is None:
            known = self._actions[name] = ActionFacts.of(name, action)
        return known

    def _check_task(
        self,
        node: Node,
        action: tuple[ActionFacts | None, dict[str, Any] | None],
        agent: tuple[str | None, dict[str, Any] | None],
    ) -> None:
        """Template reads of the task's ``with``, its action's ``with`` defaults (at the
        action), its variables (each at its layer's key: ``VarReads``) and engine bindings,
        ``when``, the action's own checks and the agent's instructions (``action``: its facts
        and definition; ``agent``: its name and definition; either pair None)."""
        graph, diags = self.graph, self.diags
        facts, definition = action
        if node.kind not in _AGGREGATES:
            # The task's own `with` at the task; its action's defaults at the action's keys.
            check_reads(node, node.task.get("with"), "with", graph, diags, _with_path(node))
        if node.kind in _RENDERING:  # (an aggregate renders no variables)
            self.var_reads.check(node, agent[0])
            _check_bindings(node, graph, diags)
        check_when(node, graph, diags)
        if facts is not None and definition is not None:
            if facts.defaults_templated:  # (else no default can read anything)
                check_default_reads(node, facts.name, definition, graph, diags)
            check_action(node, facts, definition, graph, diags)
        name, agent_definition = agent
        if name is not None and agent_definition is not None:
            check_instructions(node, (name, agent_definition), graph, diags)
        if node.kind not in _AGGREGATES:
            _check_engine_reads(node, action, agent, diags)

    def _merged_vars(
        self, node: Node, agent_name: str | None, agent: dict[str, Any] | None
    ) -> dict[str, Any]:
        """The task's variable layers and bindings (``variables``), its own copy."""
        if node.kind not in _RENDERING:
            return {}
        base = self._base_vars.get(agent_name)
        if base is None:
            base = self._base_vars[agent_name] = base_vars(self.env.spec, agent, self.env.variables)
        merged = task_vars(base, node.task, self.env.variables)
        merged.update(node.bindings)
        return _own_values(merged)

    def _retry(self, raw: Any) -> RetryPolicy:
        """``retry_of(raw)``: one policy for every task giving the same int values."""
        if type(raw) is not dict:
            return retry_of(raw)
        attempts, backoff = raw.get("maxAttempts"), raw.get("backoffMs")
        if type(attempts) is not int or type(backoff) is not int:
            return retry_of(raw)
        known = self._retries.get((attempts, backoff))
        if known is None:
            known = self._retries[(attempts, backoff)] = retry_of(raw)
        return known

    def _timeout(self, node: Node, facts: ActionFacts | None) -> int:
        """The task's ``timeoutSeconds``, else its action's, else the runtime default."""
        own = whole_number(node.task.get("timeoutSeconds")) if node.kind in _AUTHORED else None
        if own is not None:
            return own
        if facts is not None and facts.timeout_seconds is not None:
            return facts.timeout_seconds
        return self._default_timeout

    def _carried(
        self,
        facts: ActionFacts | None,
        action: dict[str, Any] | None,
        agent_name: str | None,
        agent: dict[str, Any] | None,
    ) -> dict[str, Any]:
        """What the run needs of the task's action or agent (shared, never copied per task)."""
        if facts is not None:
            return {"operation": facts.kind, "action_config": action}
        if agent_name is None or agent is None:
            return {}
        known = self._agents.get(agent_name)
        if known is None:
            known = self._agents[agent_name] = _agent_carried(self.env, agent)
        return known


_IMMUTABLE = (str, int, float, bool, type(None))


def _own_copy(value: Any) -> Any:
    """A deep copy of ``value``; a flat mapping of scalars (most ``with`` and ``vars``) is
    copied one level only, which is the same thing, at a fraction of ``deepcopy``'s cost."""
    if isinstance(value, _IMMUTABLE):
        return value
    if type(value) is dict and all(isinstance(v, _IMMUTABLE) for v in value.values()):
        return dict(value)
    return copy.deepcopy(value)


def _own_values(fresh: dict[str, Any]) -> dict[str, Any]:
    """``_own_copy`` of a dict this compile just made: the dict itself when its values are
    scalars (no second one-level copy), else a deep copy."""
    for value in fresh.values():
        if not isinstance(value, _IMMUTABLE):
            return copy.deepcopy(fresh)
    return fresh


def _merged_with(node: Node, action: dict[str, Any] | None) -> Any:
    """The task's ``with`` over its action's defaults, its own copy (``_own_copy``)."""
    if node.kind in _AGGREGATES:
        return {}
    given = node.task.get("with")
    defaults = action.get("with") if action is not None else None
    if isinstance(defaults, dict) and isinstance(given, dict):
        return _own_values({**defaults, **given})
    return _own_copy(given if given is not None else (defaults or {}))


def _agent_carried(env: Env, agent: dict[str, Any]) -> dict[str, Any]:
    name = str(agent.get("provider"))
    provider = env.providers.get(name) or {}
    tools = {tool: env.tools.get(tool) or {} for tool in agent.get("tools") or []}
    config = AgentConfig(agent=agent, provider_name=name, provider=provider, tools=tools)
    # The model entry is named as its provider kind (``core.registry``).
    return {"operation": str(provider.get("kind")), "agent_config": config}


# Each compiled task kind by its name (a KeyError for any other name).
_TASK_KINDS: dict[str, TaskKind] = {kind: kind for kind in get_args(TaskKind)}


def _subworkflow(node: Node, env: Env) -> str | None:
    """``NAME@VERSION`` of the definition a sub-workflow boundary or aggregate invokes."""
    if node.kind not in ("subworkflow_input", "subworkflow_output"):
        return None
    name = str(node.task.get("uses", "")).removeprefix("workflow:")
    definition = (env.spec.get("subworkflows") or {}).get(name) or {}
    return f"{name}@{definition.get('version')}"


def _output_schema(node: Node, diags: Collector) -> Any:
    """The task's own copy of its ``outputSchema`` (none for an aggregate), checked."""
    schema = None if node.kind in _AGGREGATES else _own_copy(node.task.get("outputSchema"))
    _check_output_schema(node, schema, diags)
    return schema


def _check_output_schema(node: Node, schema: Any, diags: Collector) -> None:
    if schema is None:
        return
    key = "inputSchema" if node.kind == "subworkflow_input" else "outputSchema"
    base = f"{node.path}.outputSchema" if node.kind in _AUTHORED else node.path
    for problem in schema_problems(schema):
        diags.add(
            "schema_violation",
            f"task `{node.task['id']}` {key} is not a usable JSON Schema: {problem.message()}",
            f"{base}.{problem.dotted}" if node.kind in _AUTHORED and problem.path else base,
        )


def _explicit_timeout(node: Node) -> int | None:
    """The task's own ``timeoutSeconds``, None when it gives none (an agent task bounds its
    whole attempt by it, never by a default it did not ask for)."""
    return whole_number(node.task.get("timeoutSeconds"))


def _compensation(
    node: Node, env: Env, graph: dict[str, Node], diags: Collector
) -> Compensation | None:
    raw = node.task.get("compensate")
    if not isinstance(raw, dict):
        return None
    inverse = check_compensation_reference(node, env, diags)
    check_compensation(node, inverse, env, diags)
    if inverse is None:
        return None
    given = raw.get("with") or {}
    check_templates(node, given, "compensate.with", graph, diags)
    where = f"{node.path}.compensate.with"
    check_with_keys(str(inverse.get("kind")), given, where, str(node.task["id"]), diags)
    defaults = inverse.get("with") or {}
    layers = [
        (f"spec.actions.{raw['uses'].removeprefix('action:')}.with", defaults),
        (where, given),
    ]
    check_required_with(str(inverse.get("kind")), layers, str(node.task["id"]), diags)
    timeout = raw.get("timeoutSeconds", inverse.get("timeoutSeconds"))
    return Compensation(
        action=str(raw["uses"]).removeprefix("action:"),
        with_={**defaults, **given} if isinstance(given, dict) else given,
        retry=retry_of(raw.get("retry")),
        timeout_seconds=timeout if isinstance(timeout, int) else None,
    )
