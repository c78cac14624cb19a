"""Schema rules that look across the document (run after the models validated).

Invariants:
- Only rules whose inputs are all inside the document and that do not resolve references
  belong here; a reference to a name that does not exist is skipped (the compiler reports it
  as ``missing_reference``).
- Each rule yields ``Finding`` objects with the dotted source path of the offending key; all
  findings are reported together.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from agentctl.core import registry
from agentctl.core.dsl.agents import Agent, Provider
from agentctl.core.dsl.diagnostics import Finding
from agentctl.core.dsl.secrets import EnvSecret, FileSecret, ProcessSecret
from agentctl.core.dsl.tasks import Task
from agentctl.core.dsl.workflow import Spec, Workflow
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


def document_findings(workflow: Workflow) -> list[Finding]:
    spec = workflow.spec
    findings: list[Finding] = []
    findings.extend(_memory_writes(spec, spec.tasks, "spec.tasks"))
    for name, sub in spec.subworkflows.items():
        findings.extend(_memory_writes(spec, sub.tasks, f"spec.subworkflows.{name}.tasks"))
    for name, agent in spec.agents.items():
        provider = spec.providers.get(agent.provider)
        if provider is not None:
            findings.extend(_agent_provider(agent, provider, f"spec.agents.{name}"))
    findings.extend(_secret_rules(spec))
    return findings


def _memory_writes(spec: Spec, tasks: list[Task], base: str) -> Iterator[Finding]:
    for index, task in enumerate(tasks):
        if not task.memory_writes:
            continue
        kind, _, name = task.uses.partition(":")
        action = spec.actions.get(name) if kind == "action" else None
        if kind == "action" and action is None:
            continue
        if action is None or action.kind not in registry.working_memory_writers():
            what = f"a {action.kind} action" if action is not None else f"`uses: {task.uses}`"
            yield Finding(
                "schema_violation",
                f"{base}.{index}.memoryWrites",
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


def _secret_refs(spec: Spec) -> Iterator[tuple[str, Any]]:
    for name, provider in spec.providers.items():
        if provider.credential is not None:
            yield f"spec.providers.{name}.credential", provider.credential
        for header, ref in provider.headers.items():
            yield f"spec.providers.{name}.headers.{header}", ref
    for name, action in spec.actions.items():
        for var, value in (action.env or {}).items():
            if not isinstance(value, str):  # a string is a template, not a reference
                yield f"spec.actions.{name}.env.{var}", value
    for name, tool in spec.tools.items():
        for index, ref in enumerate(tool.secrets):
            yield f"spec.tools.{name}.secrets.{index}", ref
    for kind, peers in (("mcpServers", spec.mcp_servers), ("a2aPeers", spec.a2a_peers)):
        for name, peer in peers.items():
            for header, ref in peer.headers.items():
                yield f"spec.{kind}.{name}.headers.{header}", ref
    if spec.policy.network.custom_ca is not None:
        yield "spec.policy.network.customCa", spec.policy.network.custom_ca


def _secret_rules(spec: Spec) -> Iterator[Finding]:
    policy = spec.policy
    for path, ref in _secret_refs(spec):
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
        elif (
            isinstance(ref, EnvSecret)
            and path == "spec.policy.network.customCa"
            and ref.env not in policy.environment_allowlist
        ):
            yield Finding(
                "invalid_secret_reference",
                path,
                f"customCa reads ${ref.env}, which is not in policy.environmentAllowlist",
                f"add {ref.env!r} to policy.environmentAllowlist",
            )
