"""MCP requests: ``mcp.call`` actions, agents' ``mcp.tool`` calls and their ``tools/list``.

Each builds one ``McpRequest`` (``agentctl.mailbox.requests``) for the worker executor
``agentctl.workers.executors.mcp`` from the run's ``spec.mcpServers`` entry.

Invariants:
- the recorded input names the server, its URL and protocol version, the method, the tool and
  the arguments (so the effect identity changes with any of them) and each header only as its
  secret reference (the coordinator records source + SHA-256 and sends the value);
- the egress policy goes to the worker only; it is not part of the call's input;
- the session's read timeout of an ``mcp.call`` action is the server's ``timeoutSeconds``,
  capped by the task's own timeout, so a slow server ends the call before the effect's
  deadline does; an agent's call (a tool or a listing) is given its whole timeout already
  resolved (``BuildInput.timeout_seconds``: the tool's own ``timeoutSeconds``, else the
  server's — ``tool_call_timeout``, ``listing_timeout`` — else the agent's, cut to what is
  left of its task's deadline), which is then the read timeout as it is;
- a ``tools/call`` whose declared idempotency is ``keyed`` (the action's or the tool's
  ``idempotency``) says so in the request only (``keyed``), never in the recorded input: the
  worker then sends the effect id as ``params._meta["agentctl.dev/idempotency-key"]`` — the
  identity is the effect's own, and declaring ``keyed`` changes no effect identity.
"""

from __future__ import annotations

from collections.abc import Mapping

from agentctl.core.builders import egress_settings, str_arg
from agentctl.core.effects import Idempotency
from agentctl.core.jsonvalue import JsonObject, JsonValue, as_list, as_object
from agentctl.core.operations import (
    IDEMPOTENCY_KEY,
    BuildInput,
    Built,
    Endpoint,
    ReachInput,
    RunContext,
    named_endpoints,
    pointer,
)
from agentctl.core.timeouts import MCP_TIMEOUT_SECONDS
from agentctl.errors import RunFailedError

LIST_OPERATION = "mcp.list_tools"
SERVER_OWNER = "MCP server"  # how endpoints, pre-flights and errors name a server


def _server(b: BuildInput, name: str) -> JsonObject:
    server = b.run.mcp_servers.get(name)
    if not isinstance(server, dict):
        raise RunFailedError(f"task {b.task_id}: MCP server {name!r} is not in spec.mcpServers")
    return server


def _request(
    b: BuildInput, name: str, method: str, call: JsonObject, *, resolved: bool = False
) -> Built:
    """The request to server ``name``; ``resolved``: ``b.timeout_seconds`` is the call's whole
    timeout (an agent's call), not a cap on the server's."""
    server = _server(b, name)
    headers = dict(sorted(as_object(server.get("headers") or {}).items()))
    recorded: JsonObject = {
        "server": name,
        "url": server.get("url"),
        "protocolVersion": server.get("protocolVersion") or "2025-11-25",
        "headers": dict(headers),
        "method": method,
        **call,
    }
    refs: dict[str, JsonValue] = {pointer("headers", h): ref for h, ref in headers.items()}
    egress = egress_settings(b.run.policy)
    if egress.get("customCa") is not None:
        refs[pointer("egress", "customCa")] = egress["customCa"]
    limit = server.get("timeoutSeconds")
    timeout = float(limit) if isinstance(limit, int | float) else float(MCP_TIMEOUT_SECONDS)
    request: JsonObject = {**recorded, "headers": dict(headers), "egress": egress}
    request["timeoutSeconds"] = b.timeout_seconds if resolved else min(timeout, b.timeout_seconds)
    if method == "tools/call" and b.config.get(IDEMPOTENCY_KEY) == Idempotency.KEYED:
        request["keyed"] = True
    return Built(recorded, request, secret_refs=refs)


def _server_timeout(run: RunContext, server: str) -> float | None:
    limit = as_object(run.mcp_servers.get(server) or {}).get("timeoutSeconds")
    return float(limit) if isinstance(limit, int | float) else None


def tool_call_timeout(_name: str, config: Mapping[str, JsonValue], run: RunContext) -> float | None:
    """An agent's ``mcp.tool`` call: its server's ``timeoutSeconds``."""
    return _server_timeout(run, str(config.get("server")))


def listing_timeout(name: str, _config: Mapping[str, JsonValue], run: RunContext) -> float | None:
    """An agent's ``tools/list`` of server ``name``: that server's ``timeoutSeconds``."""
    return _server_timeout(run, name)


def literal_call_problems(given: Mapping[str, JsonValue]) -> list[tuple[str, str]]:
    """What ``check`` can tell of an ``mcp.call``'s literal ``with`` values: the ones the
    builder would refuse when the task runs (a template is judged once rendered)."""
    literal = {k: v for k, v in given.items() if not (isinstance(v, str) and "${{" in v)}
    found: list[tuple[str, str]] = [
        (key, f"must be a non-empty string, got {literal[key]!r}")
        for key in ("server", "tool")
        if key in literal and not (isinstance(literal[key], str) and literal[key])
    ]
    if "arguments" in literal and not isinstance(literal["arguments"], dict):
        found.append(("arguments", f"must be an object, got {literal['arguments']!r}"))
    return found


def build_mcp_call(b: BuildInput) -> Built:
    """``mcp.call``: ``with`` = ``{server, tool, arguments}``; a tool error fails the task."""
    arguments = as_object(b.args).get("arguments", {})
    if not isinstance(arguments, dict):
        raise RunFailedError(f"task {b.task_id}: mcp.call `with.arguments` must be an object")
    call: JsonObject = {"tool": str_arg(b, "tool"), "arguments": arguments}
    return _request(b, str_arg(b, "server"), "tools/call", call)


def build_mcp_tool_call(b: BuildInput) -> Built:
    """An agent's ``mcp.tool``: a tool error goes back to the model as the tool's result."""
    call: JsonObject = {
        "tool": b.config.get("tool"),
        "arguments": as_object(b.args),
        "failOnToolError": False,
    }
    return _request(b, str(b.config.get("server")), "tools/call", call, resolved=True)


def build_mcp_list(b: BuildInput) -> Built:
    """``tools/list`` of one server, reporting the tools ``config["tools"]`` names."""
    wanted = sorted(str(t) for t in as_list(b.config.get("tools")))
    return _request(b, b.name, "tools/list", {"tools": list(wanted)}, resolved=True)


def reach_mcp_call(r: ReachInput) -> tuple[Endpoint, ...]:
    """The server ``with.server`` names (every declared one when it is a template)."""
    return named_endpoints(SERVER_OWNER, as_object(r.with_).get("server"), r.mcp_servers, "url")


def reach_mcp_tool(r: ReachInput) -> tuple[Endpoint, ...]:
    """The server the tool definition names."""
    return named_endpoints(SERVER_OWNER, r.config.get("server"), r.mcp_servers, "url")


def mcp_call_estimate(request: Mapping[str, JsonValue]) -> dict[str, int]:
    """A tools/call counts as one tool call against ``maxToolCalls``; a listing as nothing."""
    return {"toolCalls": 1} if request.get("method") == "tools/call" else {}


def listed_tool(listing: JsonValue, name: str) -> JsonObject | None:
    """The tool ``name`` of a ``tools/list`` result, if the server offered it."""
    for tool in as_list(as_object(listing).get("tools")):
        if isinstance(tool, dict) and tool.get("name") == name:
            return tool
    return None
