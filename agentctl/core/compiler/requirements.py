"""What a plan needs from the outside world: providers, tools, effects and processes.

Shape (camelCase, every list sorted or in plan order, so the plan digest is stable):
``{providers: [{name, kind, agents, capabilities}], tools: [{name, kind, capability,
effectClass, risk, approval}], effects: [{task, operation, effectClass, risk,
approvalPossible, predictability}], processes: [{action, kind, command, args, isolation,
image}], budgets: {...}}``. Every action and agent task has one effect entry (pure kinds
too, with effectClass ``pure``) — that entry carries the task's predictability.
"""

from __future__ import annotations

from typing import Any

from agentctl.core import registry
from agentctl.core.compiler.capabilities import PROVIDER_CAPABILITIES, tool_class
from agentctl.core.compiler.ir import Env
from agentctl.core.plan import PlannedTask

_UNKNOWN_KIND = ("external_mutate", "high")  # never reached: the DSL accepts only known kinds
_MUTATION_CLASSES = frozenset(
    {"workspace_mutate", "external_mutate", "process_execution", "remote_agent"}
)


def action_predictability(kind: str) -> str:
    entry = registry.find(kind)
    return str(entry.predictability) if entry is not None else "requires_execution"


def _approval_possible(env: Env, effect_class: str, risk: str, tool_approval: str) -> bool:
    if tool_approval == "always":  # a tool's contract holds even a pure call (spec §9)
        return True
    if effect_class == "pure":  # a pure action is computed, never put to the policy (dsl §3)
        return False
    mode = str((env.spec.get("policy") or {}).get("approval", "mutations"))
    if mode == "always":
        return True
    if mode == "mutations":
        return effect_class in _MUTATION_CLASSES
    return mode == "high_risk" and risk in ("high", "critical")


def plan_requirements(tasks: list[PlannedTask], env: Env) -> dict[str, Any]:
    agents = sorted({task.agent for task in tasks if task.agent is not None})
    actions = sorted({task.action for task in tasks if task.action is not None})
    tool_names = sorted({tool for name in agents for tool in (env.agents[name].get("tools") or [])})
    return {
        "providers": _providers(agents, env),
        "tools": [_tool(name, env.tools.get(name) or {}) for name in tool_names],
        "effects": _all_effects(tasks, env),
        "processes": [
            _process(name, env.actions[name]) for name in actions if _is_process(name, env)
        ],
        "budgets": (env.spec.get("runtime") or {}).get("budgets"),
    }


def _providers(agents: list[str], env: Env) -> list[dict[str, Any]]:
    users: dict[str, list[str]] = {}
    for agent in agents:
        users.setdefault(str(env.agents[agent].get("provider")), []).append(agent)
    result = []
    for name in sorted(users):
        kind = str((env.providers.get(name) or {}).get("kind"))
        capabilities = sorted(PROVIDER_CAPABILITIES.get(kind, frozenset()))
        result.append(
            {"name": name, "kind": kind, "agents": users[name], "capabilities": capabilities}
        )
    return result


def _tool(name: str, tool: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": name,
        "kind": tool.get("kind"),
        "capability": tool.get("capability"),
        "effectClass": tool_class(tool),
        "risk": tool.get("risk", "low"),
        "approval": tool.get("approval", "policy"),
    }


def _all_effects(tasks: list[PlannedTask], env: Env) -> list[dict[str, Any]]:
    """Every task's effect entries, in plan order. An action's entry but its ``task`` is the
    same for every task using it: made once per action (~1 us a task less)."""
    actions: dict[str, dict[str, Any]] = {}
    effects: list[dict[str, Any]] = []
    for task in tasks:
        if task.action is not None:
            shared = actions.get(task.action)
            if shared is None:
                shared = actions[task.action] = _action_effect(task.action, env)
            effects.append({"task": task.id, **shared})
        elif task.agent is not None:
            effects.extend(_agent_effects(task.id, task.agent, env))
    return effects


def _action_effect(name: str, env: Env) -> dict[str, Any]:
    kind = str(env.actions[name].get("kind"))
    op = registry.find(kind)
    effect_class, risk = (str(op.effect_class), str(op.risk)) if op else _UNKNOWN_KIND
    entry = _effect(f"action:{name}", effect_class, risk, "policy", env)
    return {**entry, "predictability": action_predictability(kind)}


def _agent_effects(task: str, agent: str, env: Env) -> list[dict[str, Any]]:
    entries = [_effect(f"agent:{agent}", "model", "medium", "policy", env)]
    for name in env.agents[agent].get("tools") or []:
        tool = env.tools.get(name) or {}
        approval = str(tool.get("approval", "policy"))
        risk = str(tool.get("risk", "low"))
        entries.append(_effect(f"tool:{name}", tool_class(tool), risk, approval, env))
    return [{"task": task, **entry, "predictability": "requires_execution"} for entry in entries]


def _effect(
    operation: str, effect_class: str, risk: str, approval: str, env: Env
) -> dict[str, Any]:
    """An effect entry but its ``task`` (which comes first)."""
    return {
        "operation": operation,
        "effectClass": effect_class,
        "risk": risk,
        "approvalPossible": _approval_possible(env, effect_class, risk, approval),
    }


def _is_process(name: str, env: Env) -> bool:
    entry = registry.find(str(env.actions[name].get("kind")))
    return entry is not None and entry.is_process


def _process(name: str, action: dict[str, Any]) -> dict[str, Any]:
    container = action.get("container") or {}
    return {
        "action": name,
        "kind": action.get("kind"),
        "command": action.get("command"),
        "args": list(action.get("args") or []),
        "isolation": action.get("isolation") or "process",
        "image": container.get("image") if isinstance(container, dict) else None,
    }
