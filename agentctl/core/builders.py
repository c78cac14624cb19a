"""The request builders, budget estimates and tool-output shapes of the built-in operations.

Each builder turns a task's resolved configuration and rendered input into the recorded
(secret-free) effect input and the worker request; the registry names one per operation.

Invariants:
- pure functions: no clock, file, environment or network; a secret reference in ``env`` is
  returned unresolved in ``Built.secret_env`` (the coordinator resolves it);
- an invalid input fails with the same ``RunFailedError`` / ``PolicyDeniedError`` message the
  coordinator reported before the registry existed (messages are part of the CLI contract);
- the recorded input is exactly what the effect identity covers, so it never changes shape.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping

from agentctl.core.canonical import canonical_json
from agentctl.core.jsonvalue import JsonObject, JsonValue, as_list, as_object
from agentctl.core.operations import BuildInput, Built, Endpoint, ReachInput, pointer
from agentctl.core.process_allowlist import process_denial
from agentctl.core.timeouts import AGENT_CALL_TIMEOUT_SECONDS
from agentctl.errors import PolicyDeniedError, RunFailedError

MIB = 1024 * 1024


def str_arg(b: BuildInput, key: str) -> str:
    """``with.<key>`` as a string, else the task fails."""
    value = b.args.get(key) if isinstance(b.args, dict) else None
    if not isinstance(value, str):
        raise RunFailedError(f"task {b.task_id}: `with.{key}` must be a string, got {value!r}")
    return value


def _args(b: BuildInput) -> JsonObject:
    return b.args if isinstance(b.args, dict) else {}


def _roots(b: BuildInput) -> list[JsonValue]:
    roots = b.run.policy.get("writableRoots")
    return list(roots) if isinstance(roots, list) else []


def _protected(b: BuildInput) -> list[JsonValue]:
    """The ledger's own paths, which a file effect refuses (``sandbox.paths``)."""
    return list(b.run.protected_paths)


# ----------------------------------------------------------------------------- actions


def build_read(b: BuildInput) -> Built:
    path = str_arg(b, "path")
    request: JsonObject = {
        "workspace": b.run.workspace,
        "path": path,
        "protectedPaths": _protected(b),
    }
    return Built({"path": path}, request)


def build_write(b: BuildInput) -> Built:
    path = str_arg(b, "path")
    content = str_arg(b, "content")
    request: JsonObject = {
        "workspace": b.run.workspace,
        "writableRoots": _roots(b),
        "path": path,
        "content": content,
        "protectedPaths": _protected(b),
    }
    return Built({"path": path, "content": content}, request)


def build_memory_write(b: BuildInput) -> Built:
    key = str_arg(b, "key")
    if b.memory_writes and key not in b.memory_writes:
        raise PolicyDeniedError(
            f"task {b.task_id}: memory key {key!r} is not in its memoryWrites "
            f"{list(b.memory_writes)}"
        )
    recorded: JsonObject = {"key": key, "value": _args(b).get("value")}
    return Built(recorded, dict(recorded))


def build_shell(b: BuildInput) -> Built:
    """``builtin.shell.exec``: the process allowlist is checked before any secret resolves."""
    command = str(b.config.get("command") or "")
    allowed = b.run.policy.get("processAllowlist")
    allow: list[JsonValue] = list(allowed) if isinstance(allowed, list) else []
    denial = process_denial(command, allow)  # doctor asks the same function
    if denial is not None:
        raise PolicyDeniedError(f"task {b.task_id}: {denial}")
    env = dict(sorted(as_object(b.config.get("env") or {}).items()))
    # String values are rendered templates (plain data); mappings are secret references.
    refs = {name: ref for name, ref in env.items() if not isinstance(ref, str)}
    plain = [name for name, value in env.items() if isinstance(value, str)]
    limits: JsonObject = {
        "timeoutSeconds": float(b.timeout_seconds),
        "stdoutLimitBytes": b.config.get("stdoutLimitBytes") or MIB,
        "stderrLimitBytes": b.config.get("stderrLimitBytes") or MIB,
        "combinedOutputLimitBytes": b.config.get("combinedOutputLimitBytes") or 2 * MIB,
    }
    base: JsonObject = {
        "command": command,
        "args": list(as_list(b.config.get("args"))),
        "cwd": b.config.get("cwd"),
        "isolation": b.config.get("isolation") or "process",
        "container": b.config.get("container"),
    }
    request: JsonObject = {**base, "workspace": b.run.workspace, "env": dict(env)}
    request.update({"limits": limits, "processAllowlist": allow})
    if plain:
        request["plainEnv"] = list(plain)
    return Built({**base, "env": dict(env), "limits": limits}, request, secret_env=refs)


def shell_estimate(request: Mapping[str, JsonValue]) -> dict[str, int]:
    limits = as_object(request.get("limits") or {})
    limit = limits.get("combinedOutputLimitBytes", 2 * MIB)
    return {"processOutputBytes": int(limit) if isinstance(limit, int) else 2 * MIB}


# ----------------------------------------------------------------------------- agents


def agent_prompt(given: JsonValue) -> str:
    """The user message: ``with.prompt`` when it is a string, else the JSON text of ``with``.

    The JSON text is compact, keys sorted, non-ASCII kept — the form the original's
    serializer writes — so a fake agent's ``"fake: " + prompt`` answer is the same text.
    """
    if isinstance(given, dict) and isinstance(given.get("prompt"), str):
        return str(given["prompt"])
    return canonical_json(given)


def build_model_call(b: BuildInput) -> Built:
    """A model call: the whole conversation so far is the recorded input (its identity).

    The fake provider's recorded input is fixed (resumed runs compare effect ids); a real
    provider's adds what its adapter needs (``_provider_call``).
    """
    agent = as_object(b.config.get("agent") or {})
    provider = as_object(b.config.get("provider") or {})
    kind = provider.get("kind")
    if isinstance(kind, str) and kind != "fake":
        return _provider_call(b, agent, provider, kind)
    recorded: JsonObject = {
        "provider": b.name,
        "model": agent.get("model"),
        "messages": b.args,
        "tools": list(as_list(agent.get("tools"))),
        "maxOutputTokens": agent.get("maxOutputTokens"),
        "options": dict(as_object(agent.get("providerOptions") or {})),
    }
    # Streaming changes how the answer travels, not what it is: the request says so, the
    # recorded input (the call's identity) does not.
    streaming: JsonObject = {"stream": True} if agent.get("stream") is True else {}
    return Built(recorded, {**recorded, **streaming})


def _provider_call(b: BuildInput, agent: JsonObject, provider: JsonObject, kind: str) -> Built:
    """A real provider's call (``agentctl.mailbox.requests.ModelRequest``).

    ``credential``, every ``headers`` value and ``policy.network.customCa`` stay secret
    references, named in ``secret_refs`` for the coordinator to resolve; ``egress`` (the
    policy the call runs under) goes to the worker only, it is not the call's input.
    """
    credential = provider.get("credential")
    if credential is None:
        raise RunFailedError(f"task {b.task_id}: provider {b.name} has no credential")
    headers = dict(sorted(as_object(provider.get("headers") or {}).items()))
    recorded: JsonObject = {
        "provider": b.name,
        "kind": kind,
        "endpoint": provider.get("endpoint"),
        "apiVersion": provider.get("apiVersion"),
        "headers": dict(headers),
        "credential": credential,
        "model": agent.get("model"),
        "messages": b.args,
        "tools": _tool_definitions(b, agent),
        "maxOutputTokens": agent.get("maxOutputTokens"),
        "structuredOutput": agent.get("structuredOutput"),
        "reasoning": agent.get("reasoning"),
        "stream": agent.get("stream") is True,
        "options": dict(as_object(agent.get("providerOptions") or {})),
    }
    refs: dict[str, JsonValue] = {pointer("credential"): credential}
    refs.update({pointer("headers", name): ref for name, ref in headers.items()})
    egress = egress_settings(b.run.policy)
    if egress.get("customCa") is not None:
        refs[pointer("egress", "customCa")] = egress["customCa"]
    timeout = agent.get("timeoutSeconds")
    own = float(timeout) if isinstance(timeout, int | float) else float(AGENT_CALL_TIMEOUT_SECONDS)
    request: JsonObject = {**recorded, "headers": dict(headers), "egress": egress}
    # The agent's ``timeoutSeconds``, or less: the loop's timeout for this call when what is
    # left of its task's own ``timeoutSeconds`` cuts it (``BuildInput.timeout_seconds``).
    request["timeoutSeconds"] = min(own, float(b.timeout_seconds))
    return Built(recorded, request, secret_refs=refs)


def _tool_definitions(b: BuildInput, agent: JsonObject) -> list[JsonValue]:
    """``{name, description, inputSchema}`` of each agent tool, in the agent's order.

    The definitions come from ``config["tools"]`` (the plan's ``AgentConfig.tools``)."""
    known = as_object(b.config.get("tools") or {})
    found: list[JsonValue] = []
    for name in as_list(agent.get("tools")):
        tool = known.get(str(name))
        if not isinstance(tool, dict):
            raise RunFailedError(
                f"task {b.task_id}: the model call needs the definition of tool {name!r}"
            )
        description = tool.get("description")
        found.append(
            {
                "name": name,
                "description": description if isinstance(description, str) else "",
                "inputSchema": tool.get("inputSchema"),
            }
        )
    return found


def egress_settings(policy: Mapping[str, JsonValue]) -> JsonObject:
    """The egress half of the policy as a network request carries it (``EgressSettings``)."""
    network = as_object(policy.get("network") or {})
    settings: JsonObject = {"networkAllowlist": list(as_list(policy.get("networkAllowlist")))}
    for key in (
        "allowedSchemes",
        "allowedPorts",
        "allowPrivate",
        "allowProxy",
        "customCa",
        "connectTimeoutSeconds",
        "maxResponseBytes",
    ):
        if network.get(key) is not None:
            settings[key] = network[key]
    return settings


def reach_provider(r: ReachInput) -> tuple[Endpoint, ...]:
    """A model call's endpoint: the provider's ``endpoint`` (the DSL fills in its kind's
    default public one); none for the fake provider, which calls nothing."""
    endpoint = as_object(r.config.get("provider")).get("endpoint")
    return (Endpoint(f"provider {r.name}", endpoint),) if isinstance(endpoint, str) else ()


def model_estimate(request: Mapping[str, JsonValue]) -> dict[str, int]:
    """1 request + 1 turn + the serialized input's tokens + the agent's maxOutputTokens."""
    estimate = len(json.dumps(request.get("messages"))) // 4 + 1
    out = request.get("maxOutputTokens")
    out_tokens = int(out) if isinstance(out, int) else 0
    return {
        "providerRequests": 1,
        "turns": 1,
        "inputTokens": estimate,
        "outputTokens": out_tokens,
        "totalTokens": estimate + out_tokens,
    }


def build_tool_read(b: BuildInput) -> Built:
    args = _args(b)
    request: JsonObject = {
        "workspace": b.run.workspace,
        "path": args.get("path"),
        "protectedPaths": _protected(b),
    }
    return Built({"tool": b.name, "arguments": b.args}, request)


def build_tool_write(b: BuildInput) -> Built:
    args = _args(b)
    request: JsonObject = {
        "workspace": b.run.workspace,
        "writableRoots": _roots(b),
        "path": args.get("path"),
        "content": args.get("content"),
        "protectedPaths": _protected(b),
    }
    return Built({"tool": b.name, "arguments": b.args}, request)


def build_tool_echo(b: BuildInput) -> Built:
    """A pure tool's call, recorded only when it is held for an approval: nothing is sent,
    the coordinator answers it with its arguments once approved."""
    return Built({"tool": b.name, "arguments": b.args}, {"arguments": b.args})


def tool_call_estimate(request: Mapping[str, JsonValue]) -> dict[str, int]:
    return {"toolCalls": 1}


def _file_shape(args: JsonValue, output: Mapping[str, JsonValue]) -> JsonObject:
    given = as_object(args)
    content = output.get("content")
    text = content if isinstance(content, str) else str(given.get("content", ""))
    raw = text.encode("utf-8")
    return {
        "path": given.get("path"),
        "bytes": len(raw),
        "sha256": hashlib.sha256(raw).hexdigest(),
        "content": text,
    }


def shape_tool_read(args: JsonValue, output: Mapping[str, JsonValue]) -> JsonValue:
    """``{path, bytes, sha256, content}`` of the file read."""
    return _file_shape(args, output)


def shape_tool_write(args: JsonValue, output: Mapping[str, JsonValue]) -> JsonValue:
    """``{path, bytes, sha256}`` of the content written."""
    shaped = _file_shape(args, output)
    del shaped["content"]
    return shaped
