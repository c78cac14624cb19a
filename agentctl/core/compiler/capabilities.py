"""Provider capability negotiation (spec/dsl.md §5) and compensation rules (§4.10).

Invariants: an agent is accepted only when its provider kind offers every capability the
agent's configuration needs and every ``providerOptions`` key is on that kind's allow-list;
a ``compensate`` block is accepted only on a task that can mutate something, with an inverse
that is itself an effectful action. Violations are ``unsupported_capability``.
"""

from __future__ import annotations

from typing import Any

from agentctl.core import registry
from agentctl.core.compiler.diagnostics import Collector
from agentctl.core.compiler.ir import Env, Node

_COMMON = frozenset({"text", "usage", "cancellation"})
_OPENAI = frozenset(
    {
        "function_tools",
        "structured_output",
        "reasoning_effort",
        "reasoning_mode",
        "continuation",
        "persisted_reasoning",
        "prompt_caching",
        "multiple_function_calls",
        "response_storage",
        "streaming",
    }
)
_SMALL = frozenset({"function_tools", "structured_output", "reasoning_effort", "continuation"})
PROVIDER_CAPABILITIES: dict[str, frozenset[str]] = {
    "fake": _COMMON | {"function_tools", "structured_output", "continuation", "streaming"},
    "openai": _COMMON | _OPENAI,
    "azure_openai": _COMMON | _OPENAI,
    "anthropic": _COMMON | _SMALL,
    "google": _COMMON | _SMALL,
}
# Option key → (capability it needs or None, value check, expected-value wording).
_OPTION_RULES: dict[str, dict[str, tuple[str | None, Any, str]]] = {
    "fake": {
        "toolInput": (None, lambda v: isinstance(v, dict), "an object"),
        "finalText": (None, lambda v: isinstance(v, str), "a string"),
        "delayMs": (None, lambda v: _count(v), "a non-negative integer"),
        "failFirst": (None, lambda v: _count(v), "a non-negative integer"),
    },
    "openai": {
        "store": ("response_storage", lambda v: isinstance(v, bool), "a boolean"),
        "reasoningContext": (
            "persisted_reasoning",
            lambda v: v in ("auto", "current_turn", "all_turns"),
            "auto, current_turn or all_turns",
        ),
        "promptCacheMode": (
            "prompt_caching",
            lambda v: v in ("implicit", "explicit"),
            "implicit or explicit",
        ),
        "promptCacheTtl": ("prompt_caching", lambda v: v == "30m", '"30m"'),
        "parallelToolCalls": (
            "multiple_function_calls",
            lambda v: isinstance(v, bool),
            "a boolean",
        ),
        "safetyIdentifier": (None, lambda v: isinstance(v, str), "a string"),
    },
}
_OPTION_RULES["azure_openai"] = _OPTION_RULES["openai"]

_NON_MUTATING_CLASSES = frozenset({"pure", "observe", "model"})


def mutating_kind(kind: object) -> bool:
    """Whether an action kind may change state (its registry entry says so)."""
    entry = registry.find(str(kind))
    return entry is not None and entry.family == "action" and entry.mutating


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def agent_needs(agent: dict[str, Any]) -> list[str]:
    """Capabilities an agent's configuration requires, in a stable order."""
    needs: list[str] = []
    if agent.get("tools"):
        needs += ["function_tools", "continuation"]
    if agent.get("structuredOutput") is not None:
        needs.append("structured_output")
    reasoning = agent.get("reasoning")
    if reasoning is not None:
        needs.append("reasoning_effort")
        if isinstance(reasoning, dict) and reasoning.get("mode") is not None:
            needs.append("reasoning_mode")
    usage_limit = agent.get("usageLimit")
    if isinstance(usage_limit, dict) and usage_limit.get("maxCostUsd") is not None:
        needs.append("cost_metadata")
    if agent.get("stream"):
        needs.append("streaming")
    return needs


def check_agents(env: Env, diags: Collector) -> None:
    for name, agent in env.agents.items():
        provider = env.providers.get(str(agent.get("provider")))
        if not isinstance(provider, dict):
            continue  # reported as a missing reference
        kind = str(provider.get("kind"))
        offered = PROVIDER_CAPABILITIES.get(kind, _COMMON)
        for capability in agent_needs(agent):
            if capability not in offered:
                diags.add(
                    "unsupported_capability",
                    f"agent `{name}` needs {capability}, which provider kind {kind} lacks",
                    f"spec.agents.{name}",
                )
        _check_options(name, agent, kind, offered, diags)


def _check_options(
    name: str, agent: dict[str, Any], kind: str, offered: frozenset[str], diags: Collector
) -> None:
    rules = _OPTION_RULES.get(kind, {})
    options = agent.get("providerOptions") or {}
    for key, value in options.items():
        path = f"spec.agents.{name}.providerOptions.{key}"
        rule = rules.get(key)
        if rule is None:
            diags.add(
                "unsupported_capability",
                f"agent `{name}`: provider kind {kind} has no option `{key}`",
                path,
                help=f"options for {kind}: {', '.join(sorted(rules)) or 'none'}",
            )
            continue
        capability, valid, expected = rule
        if not valid(value):
            diags.add("schema_violation", f"agent `{name}`: `{key}` must be {expected}", path)
        elif capability is not None and capability not in offered:
            diags.add(
                "unsupported_capability",
                f"agent `{name}`: `{key}` needs {capability}, which {kind} lacks",
                path,
            )
    if options.get("store") is False and agent.get("tools"):
        diags.add(
            "unsupported_capability",
            f"agent `{name}`: tools need stored responses; `store: false` forbids them",
            f"spec.agents.{name}.providerOptions.store",
        )


def tool_class(tool: dict[str, Any]) -> str:
    if tool.get("effectClass"):
        return str(tool["effectClass"])
    entry = registry.find(str(tool.get("kind")))
    return str(entry.effect_class) if entry is not None and entry.family == "tool" else "pure"


def can_mutate(node: Node, env: Env) -> bool:
    """Whether a task may change the world, which makes compensating it meaningful."""
    action = env.action_of(node)
    if action is not None:
        return mutating_kind(action.get("kind"))
    agent = env.agent_of(node)
    if agent is None:
        return False
    tools = [env.tools.get(name) for name in agent.get("tools") or []]
    return any(
        isinstance(tool, dict) and tool_class(tool) not in _NON_MUTATING_CLASSES for tool in tools
    )


def check_compensation(
    node: Node, inverse: dict[str, Any] | None, env: Env, diags: Collector
) -> None:
    if node.task.get("compensate") is None:
        return
    if not can_mutate(node, env):
        diags.add(
            "unsupported_capability",
            f"task `{node.task['id']}` cannot mutate anything, so it cannot be compensated",
            f"{node.path}.compensate",
            help="compensate only writes, processes, memory writes, remote calls, "
            "or agents with mutating tools",
        )
    if inverse is not None and not mutating_kind(inverse.get("kind")):
        diags.add(
            "unsupported_capability",
            f"task `{node.task['id']}` compensates with a {inverse.get('kind')} action; "
            "the inverse must be an effectful action",
            f"{node.path}.compensate.uses",
        )
