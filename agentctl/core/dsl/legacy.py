"""Translate the legacy flat ``playbook:`` document into the v1alpha1 shape (spec/dsl.md §1).

The legacy form has no ``apiVersion``; its top level holds ``playbook: NAME`` and the spec
keys directly. Translation is pure and total on any mapping; the result is then validated as
strictly as any v1alpha1 document, and the caller adds a ``migration_required`` warning (and
one per key the translation dropped, ``Translation.dropped``).

Invariants:
- ``playbook`` → ``metadata.name``; ``modules`` → ``actions``; ``uses: module:X`` →
  ``action:X`` (tasks, sub-workflow tasks, compensations), and a ``module:builtin.K`` no module
  declares gets an action ``builtin.K`` of kind ``builtin.K``; ``memory.working.initial`` →
  ``memory.working``; ``memory.longTerm.dbPath`` is dropped with a ``migration_required``
  finding (long-term memory lives in the run database); ``policy.approvalMode`` →
  ``policy.approval`` (never/always kept, anything else becomes mutations); ``version`` (the
  playbook's own version, which nothing read: v1 metadata has none) is dropped quietly, and
  ``defaults``, ``promptCache``, ``mcpServers``, ``a2aAgents`` and ``packs`` are dropped with a
  ``migration_required`` finding each (none has a v1 form the translation could fill in
  without guessing: a legacy MCP server or A2A agent carried plain header values and a
  ``bearerTokenEnv``, where v1 takes secret references; the original's migration guide leaves
  them to the user).
- Agents: a heuristic agent (``heuristic: true``, or ``kind``/``type`` ``heuristic`` or
  ``builtin.heuristic``) uses provider ``fake``, else its own provider, else ``openai``;
  ``model`` defaults to ``scripted``; every other key an agent does not have in v1alpha1
  (vendor-specific ones such as ``temperature``, and misspelt ones) is dropped with a
  ``migration_required`` finding naming the agent and the key. Without ``providers`` the
  document gets ``fake`` and ``openai``
  (credential ``{env: OPENAI_API_KEY}``); a provider chosen by the heuristic above is added
  when the document's own providers lack it.
- A legacy provider keeps only the keys a v1alpha1 provider has, less ``endpoint`` (a legacy
  base URL is not a v1 request URL: the kind's default endpoint applies); every key it loses
  comes back as a ``migration_required`` finding naming the provider and the key, which the
  loader reports as a warning. Providers of an ``apiVersion`` document are never touched.
- Tool-level ``compensation`` and ``uses: team:NAME`` are refused (``schema_violation``), and so
  is a document holding a legacy key beside its new name (``modules`` with ``actions``,
  ``policy.approvalMode`` with ``policy.approval``): translating would drop one of them.
- The position table is remapped so diagnostics still point into the legacy source.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from agentctl.core.dsl.agents import Agent, Provider
from agentctl.core.dsl.diagnostics import Finding, Locator

# (mapping holding the pair, legacy key, its v1alpha1 name): renames a translation could collide.
_RENAMED = (("", "modules", "actions"), ("policy", "approvalMode", "approval"))
# Top-level legacy keys with no v1 place: (why, where the setting goes now). ``version`` is
# left out quietly: it only labelled the playbook, so nothing it did is lost.
_DROPPED_TOP: dict[str, tuple[str, str]] = {
    "defaults": (
        "workflow-wide agent defaults and tool profiles are gone",
        "give each agent its own `tools` and limits (`maxTurns`, `maxToolCalls`)",
    ),
    "promptCache": (
        "prompt caching is a provider option now",
        "set `providerOptions.promptCacheMode`/`promptCacheTtl` on an openai or azure_openai agent",
    ),
    "mcpServers": (
        "a legacy MCP server, with plain header values and `bearerTokenEnv`, is not a v1 one,"
        " and the translation does not guess credentials",
        "declare each under `spec.mcpServers` (`url`, `headers` as secret references such as"
        " `{env: NAME}`) and use it from `mcp.call` actions or `mcp.tool` tools",
    ),
    "a2aAgents": (
        "a legacy A2A agent, with plain header values and `bearerTokenEnv`, is not a v1 peer,"
        " and the translation does not guess credentials",
        "declare each under `spec.a2aPeers` (`cardUrl`, `headers` as secret references) and"
        " delegate to it with `a2a.delegate` actions",
    ),
    "packs": (
        "a legacy pack was named only; a v1 pack reference says where it is and its digest",
        "list each pack under `spec.packs` as `{name, version, path, integrity}`",
    ),
}
_DROPPED = ("version", *_DROPPED_TOP)
# Dropped keys that hold named things, named in the warning (a server lost is then findable).
_NAMED = frozenset({"mcpServers", "a2aAgents", "packs"})
_AGENT_KEYS = frozenset(f.alias or n for n, f in Agent.model_fields.items())
# Legacy agent keys the translation reads (they choose the provider) instead of dropping.
_AGENT_READ = frozenset({"kind", "type", "heuristic"})
_TO_PROVIDER = "connection settings belong to the agent's provider (`spec.providers`)"
# Where a known legacy agent setting lives now; any other key gets a spelling hint.
_AGENT_KEY_HELP = {
    "profile": "tool profiles are gone: list the tools the agent may call in `tools`",
    "promptCache": "prompt caching is `providerOptions.promptCacheMode`/`promptCacheTtl`",
    "reasoningEffort": "the current form is `reasoning: {effort: ...}`",
    **dict.fromkeys(
        ("baseUrl", "endpoint", "apiVersion", "deployment", "organization", "project"),
        _TO_PROVIDER,
    ),
}
# A legacy ``endpoint`` was a base URL (``https://api.openai.com/v1``) the old runtime appended
# paths to; a v1 endpoint is the full request URL, so keeping it would fail every call.
_PROVIDER_KEYS = frozenset(f.alias or n for n, f in Provider.model_fields.items()) - {"endpoint"}
_DEFAULT_PROVIDERS: dict[str, Any] = {
    "fake": {"kind": "fake"},
    "openai": {"kind": "openai", "credential": {"env": "OPENAI_API_KEY"}},
}


def is_legacy(raw: dict[str, Any]) -> bool:
    return "apiVersion" not in raw and "playbook" in raw


@dataclass(frozen=True)
class Translation:
    """A legacy document in the v1alpha1 shape, with what translating it refused or dropped."""

    document: dict[str, Any]
    rejected: list[Finding]  # legacy forms that cannot be translated: the load fails
    dropped: list[Finding]  # legacy keys left out (``migration_required``): warnings


def translate_legacy(raw: dict[str, Any]) -> Translation:
    """The v1alpha1 form of a legacy document, the legacy forms that cannot be translated,
    and the legacy keys left out (top-level, memory, provider and agent keys)."""
    body = {k: copy.deepcopy(v) for k, v in raw.items() if k not in _DROPPED}
    name = body.pop("playbook")
    metadata: dict[str, Any] = {"name": name}
    for key in ("description", "labels"):
        if key in body:
            metadata[key] = body.pop(key)
    rejected = _clashes(body) + _rejections(body)
    if "modules" in body and not rejected:
        body["actions"] = body.pop("modules")
    _translate_tasks(body.get("tasks"))
    for sub in (body.get("subworkflows") or {}).values():
        if isinstance(sub, dict):
            _translate_tasks(sub.get("tasks"))
    if not rejected:
        _builtin_actions(body)
    dropped = _dropped_top(raw) + _translate_memory(body)
    _translate_policy(body)
    dropped += _translate_providers(body)
    dropped += _translate_agents(body)
    doc = {"apiVersion": "agentctl.dev/v1alpha1", "kind": "Workflow", "metadata": metadata}
    doc["spec"] = body
    return Translation(doc, rejected, dropped)


def legacy_locator(locator: Locator) -> Locator:
    """Positions of the translated paths, taken from the legacy source."""
    locator = locator.filled()
    result = Locator()
    for table, target in (
        (locator.positions, result.positions),
        (locator.key_positions, result.key_positions),
    ):
        for path, pos in table.items():
            target[_new_path(path)] = pos
    root = locator.positions.get("", (1, 1))
    result.positions.update({"": root, "spec": root})
    if "modules" in locator.key_positions:
        result.key_positions["spec.modules"] = locator.key_positions["modules"]
    if "playbook" in locator.key_positions:
        result.positions["metadata"] = locator.key_positions["playbook"]
    return result


def _new_path(path: str) -> str:
    head, _, rest = path.partition(".")
    if head == "playbook":
        return "metadata.name"
    if head in ("description", "labels"):
        return f"metadata.{path}"
    if head == "modules":
        head = "actions"  # a clash with ``actions`` is located at ``spec.modules`` (_clashes)
    if not path:
        return ""
    return f"spec.{head}.{rest}" if rest else f"spec.{head}"


def _clashes(body: dict[str, Any]) -> list[Finding]:
    # Both spellings present: the translation would keep one and silently drop the other
    # (an `approval: always` lost to `approvalMode: never`, a whole `actions` map replaced).
    found: list[Finding] = []
    for parent, old, new in _RENAMED:
        holder = body.get(parent) if parent else body
        if isinstance(holder, dict) and old in holder and new in holder:
            where = f"{parent}." if parent else ""
            found.append(
                Finding(
                    "schema_violation",
                    f"spec.{where}{old}",
                    f"`{where}{old}` is the legacy name of `{where}{new}` and both are present",
                    f"keep only one of `{where}{old}` and `{where}{new}`",
                    "key",
                )
            )
    return found


def _rejections(body: dict[str, Any]) -> list[Finding]:
    found: list[Finding] = []
    tools = body.get("tools")
    for name, tool in (tools if isinstance(tools, dict) else {}).items():
        if isinstance(tool, dict) and "compensation" in tool:
            found.append(
                Finding(
                    "schema_violation",
                    f"spec.tools.{name}.compensation",
                    "tool-level `compensation` is a legacy form that cannot be migrated",
                    "declare `compensate` on the task that uses the tool's agent",
                    "key",
                )
            )
    tasks = body.get("tasks")
    for index, task in enumerate(tasks if isinstance(tasks, list) else []):
        if isinstance(task, dict) and str(task.get("uses", "")).startswith("team:"):
            found.append(
                Finding(
                    "schema_violation",
                    f"spec.tasks.{index}.uses",
                    "`uses: team:NAME` is a legacy form that cannot be migrated",
                    "split the team into agent tasks joined by handoff tasks",
                )
            )
    return found


def _module_to_action(task: dict[str, Any]) -> None:
    uses = task.get("uses")
    if isinstance(uses, str) and uses.startswith("module:"):
        task["uses"] = "action:" + uses.removeprefix("module:")


def _translate_tasks(tasks: Any) -> None:
    for task in tasks if isinstance(tasks, list) else []:
        if isinstance(task, dict):
            _module_to_action(task)
            if isinstance(task.get("compensate"), dict):
                _module_to_action(task["compensate"])


def _builtin_actions(body: dict[str, Any]) -> None:
    """A legacy task could name a built-in kind directly (``module:builtin.assign``, now
    ``action:builtin.assign``) with no module declared for it: declare the action, of that
    kind, under that name. An unknown kind is then refused by the strict validation."""
    actions = body.get("actions")
    if actions is None:
        actions = body["actions"] = {}
    if not isinstance(actions, dict):
        return
    for task in _all_tasks(body):
        uses = task.get("uses")
        name = uses.removeprefix("action:") if isinstance(uses, str) else ""
        if name.startswith("builtin.") and name not in actions:
            actions[name] = {"kind": name}
    if not actions:
        del body["actions"]


def _all_tasks(body: dict[str, Any]) -> list[dict[str, Any]]:
    tasks = [t for t in body.get("tasks") or [] if isinstance(t, dict)]
    for sub in (body.get("subworkflows") or {}).values():
        if isinstance(sub, dict):
            tasks += [t for t in sub.get("tasks") or [] if isinstance(t, dict)]
    return tasks


def _translate_memory(body: dict[str, Any]) -> list[Finding]:
    memory = body.get("memory")
    if not isinstance(memory, dict):
        return []
    if isinstance(memory.get("working"), dict):
        working = memory["working"]
        if set(working) == {"initial"}:
            memory["working"] = working["initial"]
    long_term = memory.get("longTerm")
    if isinstance(long_term, dict) and "dbPath" in long_term:
        # The legacy store was a file of its own; long-term memory now lives in the ledger.
        del long_term["dbPath"]
        return [
            Finding(
                "migration_required",
                "spec.memory.longTerm.dbPath",
                "legacy `memory.longTerm.dbPath` dropped (long-term memory is kept in the run "
                "database, `--db`)",
                "`agentctl migrate` writes the memory settings without it",
                "key",
            )
        ]
    return []


def _translate_policy(body: dict[str, Any]) -> None:
    policy = body.get("policy")
    if isinstance(policy, dict) and "approvalMode" in policy:
        mode = policy.pop("approvalMode")
        policy["approval"] = mode if mode in ("never", "always") else "mutations"


def _translate_providers(body: dict[str, Any]) -> list[Finding]:
    # Legacy providers carried runtime knobs (``cache``, ``profile``) and base URLs that v1
    # removed; dropping them with a warning keeps the document loadable without guessing.
    providers = body.get("providers")
    dropped: list[Finding] = []
    for name, provider in (providers if isinstance(providers, dict) else {}).items():
        if not isinstance(provider, dict):
            continue  # left for the strict validation to refuse
        for key in [k for k in provider if k not in _PROVIDER_KEYS]:
            del provider[key]
            dropped.append(_dropped_provider_key(str(name), str(key)))
    return dropped


def _dropped_provider_key(name: str, key: str) -> Finding:
    if key == "endpoint":
        why = "a legacy base URL is not a v1 request URL"
        help_text = (  # azure_openai has no default, so its load then fails on this
            "the kind's default endpoint applies (azure_openai has none): where it is wrong,"
            " set a v1 `endpoint`, the full request URL"
        )
    else:
        why = "the current workflow format has no such provider setting"
        help_text = "`agentctl migrate` writes the provider without it"
    return Finding(
        "migration_required",
        f"spec.providers.{name}.{key}",
        f"legacy provider `{name}`: `{key}` dropped ({why})",
        help_text,
        "key",
    )


def _dropped_top(raw: dict[str, Any]) -> list[Finding]:
    """A finding for each top-level legacy key that held something and has no v1 place."""
    found: list[Finding] = []
    for key, value in raw.items():
        if key not in _DROPPED_TOP or value in (None, {}, []):
            continue  # an empty one drops nothing
        why, help_text = _DROPPED_TOP[key]
        names = _names(value) if key in _NAMED else []
        named = f" ({', '.join(f'`{n}`' for n in names)})" if names else ""
        message = f"legacy `{key}`{named} dropped ({why})"
        found.append(Finding("migration_required", f"spec.{key}", message, help_text, "key"))
    return found


def _names(value: Any) -> list[str]:
    """The names a dropped collection held: a mapping's keys, a list's texts (legacy packs)."""
    if isinstance(value, dict):
        return [str(name) for name in value]
    return [item for item in value if isinstance(item, str)] if isinstance(value, list) else []


def _translate_agents(body: dict[str, Any]) -> list[Finding]:
    agents = body.get("agents")
    if "providers" not in body:
        body["providers"] = copy.deepcopy(_DEFAULT_PROVIDERS)
    if not isinstance(agents, dict):
        return []
    dropped: list[Finding] = []
    for name, agent in list(agents.items()):
        if not isinstance(agent, dict):
            continue
        # ``builtin.heuristic`` is how the legacy packs and playbooks spelled the kind.
        spelled = {agent.get("kind"), agent.get("type")}
        heuristic = agent.get("heuristic") is True or bool(
            spelled & {"heuristic", "builtin.heuristic"}
        )
        provider = "fake" if heuristic else agent.get("provider", "openai")
        kept = {k: v for k, v in agent.items() if k in _AGENT_KEYS}
        kept["provider"] = provider
        kept.setdefault("model", "scripted")
        agents[name] = kept
        lost = [k for k in agent if k not in _AGENT_KEYS and k not in _AGENT_READ]
        dropped += [_dropped_agent_key(str(name), str(key)) for key in lost]
        providers = body["providers"]
        chosen = heuristic or "provider" not in agent
        if chosen and isinstance(providers, dict):
            providers.setdefault(provider, copy.deepcopy(_DEFAULT_PROVIDERS[provider]))
    return dropped


def _dropped_agent_key(name: str, key: str) -> Finding:
    # A key the legacy format had says where its setting went; any other is likely misspelt
    # (``maxturns``), and a silently lost limit is what this warning exists to prevent.
    help_text = _AGENT_KEY_HELP.get(key)
    if help_text is None:
        import difflib  # here, not at the top: only a legacy agent with a stray key needs it

        close = difflib.get_close_matches(key, sorted(_AGENT_KEYS), n=1)
        hint = f"did you mean `{close[0]}`? " if close else ""
        help_text = f"{hint}`agentctl migrate` writes the agent without it"
    return Finding(
        "migration_required",
        f"spec.agents.{name}.{key}",
        f"legacy agent `{name}`: `{key}` dropped (the current workflow format has no such"
        " agent setting)",
        help_text,
        "key",
    )
