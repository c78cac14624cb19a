"""Builds each ``PlannedTask`` from a resolved node: merges, checks and compiled sub-parts.

Merges (spec/dsl.md §3, §6.4): ``with_`` = action ``with`` defaults shallow-merged under the
task ``with``; ``vars`` = the layers of ``variables.merged_vars`` (var files, vars, CLI
variables; whole-key replacement) with the engine bindings last; ``timeout_seconds`` = task
timeout, else action timeout, else ``runtime.defaultTimeoutSeconds``. Aggregates are pure:
no ``with``, vars, retry or schema.

Carried (outside every digest): an action task's normalized action definition and its kind as
registry operation; an agent task's agent, provider and tool definitions, ``model.<kind>``, and
its own ``timeoutSeconds`` when it gives one (``agent_timeout_seconds``: the bound of its whole
attempt; the resolved ``timeout_seconds`` cannot tell it from the runtime default).

Checked here per task: template reads against ``needs`` (the task's ``with`` at the task, the
action's ``with`` defaults it does not replace at the action's keys), the ``with`` keys its
action kind reads, the templates of its action's configuration (``actionchecks``) and of its
agent's instructions (``instructions``).

Invariant: the returned task is a draft (``position`` -1, no fingerprint); ``compile`` fixes
both once the order is known.
"""

from __future__ import annotations

import copy
from typing import Any

from agentctl.core.compiler.actionchecks import check_action, check_required_with, check_with_keys
from agentctl.core.compiler.capabilities import check_compensation
from agentctl.core.compiler.diagnostics import Collector
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
from agentctl.core.compiler.variables import merged_vars
from agentctl.core.jsonschema import schema_problems
from agentctl.core.plan import AgentConfig, Compensation, PlannedTask, RetryPolicy, TaskKind
from agentctl.core.registry import MODEL_PREFIX
from agentctl.core.timeouts import TASK_TIMEOUT_SECONDS

_AGGREGATES = frozenset({"aggregate", "loop_aggregate"})
_AUTHORED = frozenset({"action", "agent", "router"})


def retry_of(raw: Any) -> RetryPolicy:
    raw = raw if isinstance(raw, dict) else {}
    return RetryPolicy(
        max_attempts=int(raw.get("maxAttempts") or 1), backoff_ms=int(raw.get("backoffMs") or 0)
    )


def draft_task(node: Node, env: Env, graph: dict[str, Node], diags: Collector) -> PlannedTask:
    kind = str(node.kind)
    task = node.task
    action = env.action_of(node)
    agent = env.agent_of(node)
    # Own copies: children of one expansion share their parent's definition dicts.
    with_ = _own_copy(_merged_with(node, action))
    vars_ = _own_copy(_merged_vars(node, env, agent))
    _check_task(node, (action, agent), vars_, graph, diags)
    output_schema = None if kind in _AGGREGATES else _own_copy(task.get("outputSchema"))
    _check_output_schema(node, output_schema, diags)
    authored = kind in _AUTHORED
    return PlannedTask(
        id=node.id,
        position=-1,
        kind=_task_kind(kind),
        uses=str(task.get("uses", "")),
        action=str(task["uses"]).removeprefix("action:") if action is not None else None,
        agent=str(task["uses"]).removeprefix("agent:") if agent is not None else None,
        needs=tuple(dict.fromkeys(node.needs)),
        with_=with_,
        vars=vars_,
        bindings=dict(node.bindings),
        when=node.when,
        retry=retry_of(task.get("retry")) if authored else RetryPolicy(),
        timeout_seconds=_timeout(node, env, action),
        failure="continue" if task.get("failure") == "continue" else "stop",
        memory_writes=(
            memory_writes(node, action, with_, diags, env.memory_writers) if authored else ()
        ),
        output_schema=output_schema,
        compensate=_compensation(node, env, graph, diags) if authored else None,
        route=compile_route(node, graph, diags) if kind == "router" else None,
        children=node.children,
        parent=node.parent,
        guard=node.guard,
        max_iterations=node.max_iterations,
        subworkflow=_subworkflow(node, env),
        agent_timeout_seconds=_explicit_timeout(node) if agent is not None else None,
        **_carried(env, action, agent),
    )


_IMMUTABLE = (str, int, float, bool, type(None))


def _own_copy(value: Any) -> Any:
    """A deep copy of ``value``; a flat mapping of scalars (most ``with`` and ``vars``) is
    copied one level only, which is the same thing, at a fraction of ``deepcopy``'s cost."""
    if isinstance(value, _IMMUTABLE):
        return value
    if type(value) is dict and all(isinstance(v, _IMMUTABLE) for v in value.values()):
        return dict(value)
    return copy.deepcopy(value)


def _subworkflow(node: Node, env: Env) -> str | None:
    """``NAME@VERSION`` of the definition a sub-workflow boundary or aggregate invokes."""
    if node.kind not in ("subworkflow_input", "subworkflow_output"):
        return None
    name = str(node.task.get("uses", "")).removeprefix("workflow:")
    definition = (env.spec.get("subworkflows") or {}).get(name) or {}
    return f"{name}@{definition.get('version')}"


def _check_task(
    node: Node,
    definitions: tuple[dict[str, Any] | None, dict[str, Any] | None],
    vars_: dict[str, Any],
    graph: dict[str, Node],
    diags: Collector,
) -> None:
    """Template reads of the task's ``with``, its action's ``with`` defaults (at the action)
    and the merged vars, ``when``, the action's own checks and the agent's instructions
    (``definitions``: the task's action and agent, either None)."""
    action, agent = definitions
    if node.kind not in _AGGREGATES:
        # The task's own `with` at the task; its action's defaults at the action's keys.
        check_reads(node, node.task.get("with"), "with", graph, diags)
    check_reads(node, vars_, "vars", graph, diags)
    check_when(node, graph, diags)
    if action is not None:
        name = str(node.task["uses"]).removeprefix("action:")
        check_default_reads(node, name, action, graph, diags)
        check_action(node, name, action, graph, diags)
    if agent is not None:
        name = str(node.task["uses"]).removeprefix("agent:")
        check_instructions(node, (name, agent), graph, diags)


def _carried(
    env: Env, action: dict[str, Any] | None, agent: dict[str, Any] | None
) -> dict[str, Any]:
    """What the run needs of the task's action or agent (shared, never copied per task)."""
    if action is not None:
        return {"operation": str(action.get("kind")), "action_config": action}
    if agent is None:
        return {}
    name = str(agent.get("provider"))
    provider = env.providers.get(name) or {}
    tools = {tool: env.tools.get(tool) or {} for tool in agent.get("tools") or []}
    config = AgentConfig(agent=agent, provider_name=name, provider=provider, tools=tools)
    return {"operation": f"{MODEL_PREFIX}{provider.get('kind')}", "agent_config": config}


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


def _task_kind(kind: str) -> TaskKind:
    kinds: dict[str, TaskKind] = {
        "action": "action",
        "agent": "agent",
        "router": "router",
        "aggregate": "aggregate",
        "loop_aggregate": "loop_aggregate",
        "subworkflow_input": "subworkflow_input",
        "subworkflow_output": "subworkflow_output",
    }
    return kinds[kind]


def _merged_with(node: Node, action: dict[str, Any] | None) -> Any:
    if node.kind in _AGGREGATES:
        return {}
    given = node.task.get("with")
    defaults = action.get("with") if action is not None else None
    if isinstance(defaults, dict) and isinstance(given, dict):
        return {**defaults, **given}
    return given if given is not None else (defaults or {})


def _merged_vars(node: Node, env: Env, agent: dict[str, Any] | None) -> dict[str, Any]:
    if node.kind not in _AUTHORED:
        return {}
    merged = merged_vars(env.spec, agent, node.task, env.variables)
    merged.update(node.bindings)
    return merged


def _timeout(node: Node, env: Env, action: dict[str, Any] | None) -> int:
    runtime = env.spec.get("runtime") or {}
    for candidate in (
        node.task.get("timeoutSeconds") if node.kind in _AUTHORED else None,
        action.get("timeoutSeconds") if action is not None else None,
        runtime.get("defaultTimeoutSeconds"),
    ):
        if isinstance(candidate, int) and not isinstance(candidate, bool):
            return candidate
    return TASK_TIMEOUT_SECONDS


def _explicit_timeout(node: Node) -> int | None:
    """The task's own ``timeoutSeconds``, None when it gives none (an agent task bounds its
    whole attempt by it, never by a default it did not ask for)."""
    given = node.task.get("timeoutSeconds")
    return given if isinstance(given, int) and not isinstance(given, bool) else None


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
