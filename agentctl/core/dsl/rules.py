"""Schema rules that look across the document (run after the models validated).

Invariants:
- Only rules whose inputs are all inside the document and that do not resolve references
  belong here; a reference to a name that does not exist is skipped (the compiler reports it
  as ``missing_reference``).
- Each rule yields ``Finding`` objects with the dotted source path of the offending key; all
  findings are reported together.
- The rules read a ``RuleParts``, never the whole document: a document that failed validation
  still has its valid parts judged (``core.dsl.partial``), and an invalid part is never judged
  (what it would report follows from the problem already reported).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from agentctl.core import registry
from agentctl.core.dsl.actions import Action
from agentctl.core.dsl.agents import Agent, Provider, Tool
from agentctl.core.dsl.diagnostics import Finding
from agentctl.core.dsl.secrets import EnvSecret, FileSecret, ProcessSecret
from agentctl.core.dsl.settings import A2aPeer, McpServer, Policy, Runtime
from agentctl.core.dsl.tasks import Task
from agentctl.core.dsl.workflow import Spec, Workflow
from agentctl.core.pricing import pricing_keys
from agentctl.core.providerdefaults import PROVIDER_OPTIONS

_INT_OPTION = "a non-negative integer"
# provider kind -> option -> (check, expected description)
_OPTION_TYPES: dict[str, tuple[Any, str]] = {
    "toolInput": (lambda v: isinstance(v, dict), "a mapping"),
    "finalText": (lambda v: isinstance(v, str), "a string"),
    "delayMs": (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0, _INT_OPTION),
    "failFirst": (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0, _INT_OPTION),
    "store": (lambda v: isinstance(v, bool), "true or false"),
    "reasoningContext": (
        lambda v: v in ("auto", "current_turn", "all_turns"),
        "auto, current_turn or all_turns",
    ),
    "promptCacheMode": (lambda v: v in ("implicit", "explicit"), "implicit or explicit"),
    "promptCacheTtl": (lambda v: v == "30m", '"30m"'),
    "parallelToolCalls": (lambda v: isinstance(v, bool), "true or false"),
    "safetyIdentifier": (lambda v: isinstance(v, str), "a string"),
}


@dataclass(frozen=True)
class RuleParts:
    """What the document rules read, each part a validated model.

    For a valid document these are all of its parts (``parts_of``); for one that failed
    validation, only the parts that are valid on their own (``core.dsl.partial``), so the
    rules still judge those and never a part already reported (no cascades). ``tasks`` maps
    the dotted path of each task (``spec.tasks.0``) to it; ``policy`` None means the policy
    was invalid, and the rules that read it are left out.
    """

    tasks: dict[str, Task]
    actions: dict[str, Action]
    providers: dict[str, Provider]
    agents: dict[str, Agent]
    tools: dict[str, Tool]
    mcp_servers: dict[str, McpServer]
    a2a_peers: dict[str, A2aPeer]
    policy: Policy | None
    runtime: Runtime | None = None  # None: invalid (or, salvaged, absent)


def parts_of(spec: Spec) -> RuleParts:
    tasks = {f"spec.tasks.{i}": task for i, task in enumerate(spec.tasks)}
    for name, sub in spec.subworkflows.items():
        tasks.update({f"spec.subworkflows.{name}.tasks.{i}": t for i, t in enumerate(sub.tasks)})
    return RuleParts(
        tasks=tasks,
        actions=spec.actions,
        providers=spec.providers,
        agents=spec.agents,
        tools=spec.tools,
        mcp_servers=spec.mcp_servers,
        a2a_peers=spec.a2a_peers,
        policy=spec.policy,
        runtime=spec.runtime,
    )


def document_findings(workflow: Workflow) -> list[Finding]:
    return part_findings(parts_of(workflow.spec))


def part_findings(parts: RuleParts) -> list[Finding]:
    """Every rule's findings on ``parts``, in document order of the parts."""
    findings: list[Finding] = []
    findings.extend(_memory_writes(parts))
    for name, agent in parts.agents.items():
        provider = parts.providers.get(agent.provider)
        if provider is not None:
            findings.extend(_agent_provider(agent, provider, f"spec.agents.{name}"))
    if parts.policy is not None:
        findings.extend(_secret_rules(parts, parts.policy))
    if parts.runtime is not None and parts.runtime.pricing is not None:
        findings.extend(_pricing(parts, parts.runtime))
    return findings


def _pricing(parts: RuleParts, runtime: Runtime) -> Iterator[Finding]:
    """A pricing key names a declared provider (by name or kind); under ``maxCostMicrousd``
    every agent's provider/model has a price: an unpriced call costs nothing, so the cap
    would silently not hold."""
    assert runtime.pricing is not None
    models = runtime.pricing.models
    known = {*parts.providers, *(p.kind for p in parts.providers.values())}
    for key in models:
        named = key.partition("/")[0]
        if named not in known:
            yield Finding(
                "missing_reference",
                f"spec.runtime.pricing.models.{key}",
                f"pricing key {key!r} names no provider of spec.providers ({named!r})",
                "write PROVIDER/MODEL with a spec.providers name (or its kind)",
                "key",
            )
    if runtime.budgets.max_cost_microusd is None:
        return
    for name, agent in parts.agents.items():
        provider = parts.providers.get(agent.provider)
        if provider is None:
            continue  # the compiler reports the missing provider
        keys = pricing_keys(agent.provider, provider.kind, agent.model)
        if not any(k in models for k in keys):
            yield Finding(
                "schema_violation",
                f"spec.agents.{name}.model",
                f"agent {name} calls {keys[0]}, which runtime.pricing does not price, and "
                "budgets.maxCostMicrousd is set: its calls would cost nothing against the cap",
                f"add runtime.pricing.models.{keys[0]} (or {keys[1]})",
            )


def _memory_writes(parts: RuleParts) -> Iterator[Finding]:
    for path, task in parts.tasks.items():
        if not task.memory_writes:
            continue
        kind, _, name = task.uses.partition(":")
        action = parts.actions.get(name) if kind == "action" else None
        if kind == "action" and action is None:
            continue
        if action is None or action.kind not in registry.working_memory_writers():
            what = f"a {action.kind} action" if action is not None else f"`uses: {task.uses}`"
            yield Finding(
                "schema_violation",
                f"{path}.memoryWrites",
                "`memoryWrites` is only allowed on working-memory writes (builtin.memory.write, "
                f"builtin.long_term_memory.promote), not on {what}",
                "remove `memoryWrites` from this task",
                "key",
            )


def _agent_provider(agent: Agent, provider: Provider, base: str) -> Iterator[Finding]:
    if agent.reasoning is not None and provider.kind == "fake":
        yield Finding(
            "unsupported_capability",
            f"{base}.reasoning",
            f"provider {agent.provider!r} (kind fake) does not support `reasoning`",
            "remove `reasoning` or use a provider that supports reasoning_effort",
            "key",
        )
    allowed = PROVIDER_OPTIONS[provider.kind]
    for option, value in agent.provider_options.items():
        path = f"{base}.providerOptions.{option}"
        if option not in allowed:
            listed = ", ".join(allowed) if allowed else "none"
            yield Finding(
                "unsupported_capability",
                path,
                f"provider kind {provider.kind} does not accept providerOptions.{option}",
                f"options accepted by {provider.kind}: {listed}",
                "key",
            )
            continue
        check, expected = _OPTION_TYPES[option]
        if not check(value):
            yield Finding("schema_violation", path, f"providerOptions.{option} must be {expected}")
    store = agent.provider_options.get("store")
    if store is False and agent.tools and provider.kind in ("openai", "azure_openai"):
        yield Finding(
            "unsupported_capability",
            f"{base}.providerOptions.store",
            "`store: false` cannot be combined with tools on openai/azure_openai providers",
            "remove `store: false` or the agent's tools",
        )


def _secret_refs(parts: RuleParts, policy: Policy) -> Iterator[tuple[str, Any]]:
    for name, provider in parts.providers.items():
        if provider.credential is not None:
            yield f"spec.providers.{name}.credential", provider.credential
        for header, ref in provider.headers.items():
            yield f"spec.providers.{name}.headers.{header}", ref
    for name, action in parts.actions.items():
        for var, value in (action.env or {}).items():
            if not isinstance(value, str):  # a string is a template, not a reference
                yield f"spec.actions.{name}.env.{var}", value
    for name, tool in parts.tools.items():
        for index, ref in enumerate(tool.secrets):
            yield f"spec.tools.{name}.secrets.{index}", ref
    peers_by_kind: tuple[tuple[str, Mapping[str, McpServer | A2aPeer]], ...] = (
        ("mcpServers", parts.mcp_servers),
        ("a2aPeers", parts.a2a_peers),
    )
    for kind, peers in peers_by_kind:
        for name, peer in peers.items():
            for header, ref in peer.headers.items():
                yield f"spec.{kind}.{name}.headers.{header}", ref
    if policy.network.custom_ca is not None:
        yield "spec.policy.network.customCa", policy.network.custom_ca


def _secret_rules(parts: RuleParts, policy: Policy) -> Iterator[Finding]:
    for path, ref in _secret_refs(parts, policy):
        if isinstance(ref, FileSecret) and not policy.secret_file_roots:
            yield Finding(
                "invalid_secret_reference",
                path,
                f"file secret {ref.file!r} needs at least one policy.secretFileRoots entry",
                "add the directory holding the secret to policy.secretFileRoots",
            )
        elif isinstance(ref, ProcessSecret):
            program = ref.process.command.rsplit("/", 1)[-1]
            if program not in policy.secret_process_allowlist:
                yield Finding(
                    "invalid_secret_reference",
                    path,
                    f"secret process {program!r} is not in policy.secretProcessAllowlist",
                    f"add {program!r} to policy.secretProcessAllowlist",
                )
        elif isinstance(ref, EnvSecret) and not _env_readable(path, ref.env, policy):
            what = "customCa" if path == "spec.policy.network.customCa" else path
            yield Finding(
                "invalid_secret_reference",
                path,
                f"{what} reads ${ref.env}, which is not in policy.environmentAllowlist",
                f"add {ref.env!r} to policy.environmentAllowlist",
            )


def _env_readable(path: str, name: str, policy: Policy) -> bool:
    """Whether ``{env: name}`` at ``path`` may pass ``check``: the policy is static, so an
    action's ``env``, a tool's ``secrets`` or ``customCa`` naming an unlisted variable would be
    denied by every run. The references ``run`` pre-flights — a provider's credential and
    headers, an MCP server's or A2A peer's headers — are not judged here: an unlisted one is
    ``missing_or_denied`` to ``auth check`` and exit 6 to ``run`` (spec/cli.md §1, §12), and
    only when a task reaches it."""
    return name in policy.environment_allowlist or path.startswith(_PREFLIGHTED)


# The owners whose secret references the credential pre-flight checks (coordinator/credentials).
_PREFLIGHTED = ("spec.providers.", "spec.mcpServers.", "spec.a2aPeers.")
