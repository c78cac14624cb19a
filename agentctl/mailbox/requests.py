"""The ``Execute.request`` payload of each built-in operation, shared by both sides.

The coordinator builds these (after policy, approvals and secret resolution) and sends
``model_dump(by_alias=True)``; the worker validates the dict back into the same model before
acting. Invariants: paths are workspace-relative strings (the worker confines them again);
``env`` holds only names the coordinator's policy allowed, already resolved to values;
defaults match spec/dsl.md §3; ``protected_paths`` (file effects) are the real paths of the
ledger's own state, which the worker refuses to read or write (it never opens the ledger, so
the coordinator tells it where the ledger lives).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from agentctl.core.timeouts import (
    A2A_TIMEOUT_SECONDS,
    AGENT_CALL_TIMEOUT_SECONDS,
    MCP_TIMEOUT_SECONDS,
    TASK_TIMEOUT_SECONDS,
)
from agentctl.mailbox.messages import WireModel

MIB = 1024 * 1024


class ReadRequest(WireModel):
    """``builtin.read``: ``path`` relative to ``workspace``."""

    workspace: str
    path: str
    max_bytes: int = Field(default=MIB, ge=1)
    protected_paths: list[str] = Field(default_factory=list)


class WriteRequest(WireModel):
    """``builtin.write``: writable roots are workspace-relative (or absolute) directories."""

    workspace: str
    writable_roots: list[str] = Field(default_factory=list)
    path: str
    content: str
    diff: bool = False
    protected_paths: list[str] = Field(default_factory=list)


class ProcessLimits(WireModel):
    timeout_seconds: float = Field(default=TASK_TIMEOUT_SECONDS, gt=0)
    stdout_limit_bytes: int = Field(default=MIB, ge=1, le=16 * MIB)
    stderr_limit_bytes: int = Field(default=MIB, ge=1, le=16 * MIB)
    combined_output_limit_bytes: int = Field(default=2 * MIB, ge=1, le=16 * MIB)
    memory_limit_bytes: int | None = Field(default=None, ge=1)
    cpu_limit_seconds: float | None = Field(default=None, gt=0)


class ContainerConfig(WireModel):
    image: str  # NAME@sha256:<64hex> or sha256:<64hex>
    runtime: Literal["auto", "docker", "podman"] = "auto"
    memory_limit_bytes: int = Field(default=256 * MIB, ge=16 * MIB, le=16 * 1024 * MIB)
    cpu_limit_millis: int = Field(default=1000, ge=1, le=64000)
    pids_limit: int = Field(default=64, ge=1, le=4096)


class ShellRequest(WireModel):
    """``builtin.shell.exec``: argv only, cleared environment plus ``env``."""

    workspace: str
    command: str
    args: list[str] = Field(default_factory=list)
    cwd: str | None = None  # workspace-relative; None = the workspace itself
    env: dict[str, str] = Field(default_factory=dict)
    # Names in ``env`` whose values are rendered templates, not secrets: never redacted.
    plain_env: list[str] = Field(default_factory=list)
    limits: ProcessLimits = Field(default_factory=ProcessLimits)
    isolation: Literal["process", "container"] = "process"
    container: ContainerConfig | None = None
    # Defence in depth: when present, the command's basename must be listed (policy checked it).
    process_allowlist: list[str] | None = None


class PreflightRequest(WireModel):
    """``container.preflight``: is the engine answering and the image present locally?"""

    runtime: Literal["auto", "docker", "podman"] = "auto"
    image: str


class ExtensionRequest(ShellRequest):
    """``extension.process``: a configured process that speaks the process-extension protocol.

    The declared ``protocolVersion``, schemas and capabilities are what the handshake must
    answer; ``input`` (already checked against ``inputSchema``) is what the invocation gets.
    """

    protocol_version: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]
    capabilities: list[str]
    input: Any = None


Scheme = Literal["https", "http"]


def _both_schemes() -> list[Scheme]:
    return ["https", "http"]


class EgressSettings(WireModel):
    """The egress policy a network effect runs under (spec/dsl.md §7 ``networkAllowlist`` +
    ``network``); ``custom_ca`` is the resolved PEM, never a reference."""

    network_allowlist: list[str] = Field(default_factory=list)
    allowed_schemes: list[Scheme] = Field(default_factory=_both_schemes, min_length=1)
    allowed_ports: list[int] = Field(default_factory=list)
    allow_private: bool = False
    allow_proxy: bool = False
    custom_ca: str | None = None
    connect_timeout_seconds: float = Field(default=10, gt=0, le=120)
    max_response_bytes: int = Field(default=8 * MIB, ge=1, le=64 * MIB)


class ToolDefinition(WireModel):
    """A function tool as the model sees it: only what it needs to call it."""

    name: str
    description: str = ""
    input_schema: dict[str, Any]


class Reasoning(WireModel):
    effort: Literal["none", "low", "medium", "high", "xhigh", "max"]
    mode: str | None = None


class ModelRequest(WireModel):
    """A real provider's model call (its operation: the provider kind): one call of its API.

    ``credential`` and ``headers`` hold resolved values (the coordinator fills them from the
    secret references the builder named); ``messages`` is the conversation in the shape the
    fake provider receives (system / user / assistant with ``toolCalls`` / tool).
    """

    provider: str
    kind: Literal["openai", "azure_openai", "anthropic", "google"]
    endpoint: str
    api_version: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    credential: str
    model: str
    messages: list[dict[str, Any]]
    tools: list[ToolDefinition] = Field(default_factory=list)
    max_output_tokens: int = Field(default=2048, ge=1)
    structured_output: dict[str, Any] | None = None
    reasoning: Reasoning | None = None
    options: dict[str, Any] = Field(default_factory=dict)
    stream: bool = False
    timeout_seconds: float = Field(default=AGENT_CALL_TIMEOUT_SECONDS, gt=0)
    egress: EgressSettings = Field(default_factory=EgressSettings)
    call_number: int | None = None  # added by the coordinator to every model call


class McpRequest(WireModel):
    """``mcp.call`` / an agent's MCP tool / ``mcp.list_tools``: one session with one server.

    ``headers`` hold resolved values (the coordinator fills them from the server's secret
    references); ``method`` is what the session does after ``initialize``.
    """

    server: str  # the spec.mcpServers key
    url: str
    headers: dict[str, str] = Field(default_factory=dict)
    protocol_version: str = "2025-11-25"
    timeout_seconds: float = Field(default=MCP_TIMEOUT_SECONDS, gt=0)
    egress: EgressSettings = Field(default_factory=EgressSettings)
    method: Literal["tools/call", "tools/list"]
    tool: str | None = None  # tools/call: the remote tool's name
    arguments: dict[str, Any] = Field(default_factory=dict)
    tools: list[str] = Field(default_factory=list)  # tools/list: the tools to report
    # tools/call: an answer with ``isError`` fails the effect (an action) or is handed to the
    # model as the tool's result (an agent's tool).
    fail_on_tool_error: bool = True
    # tools/call: the call's declared idempotency is ``keyed``, so the worker sends the effect
    # id as ``params._meta["agentctl.dev/idempotency-key"]`` (docs/protocols.md).
    keyed: bool = False


class A2aDelegateRequest(WireModel):
    """``a2a.delegate``: one message to an A2A peer (protocol 1.0), its task polled.

    ``headers`` hold resolved values (card fetch and every call); ``continue_task_id`` set means
    *observe* that remote task only — the message is never sent again (resume, and
    ``effects continue-remote``).
    """

    peer: str
    card_url: str
    protocol_version: str = "1.0"
    headers: dict[str, str] = Field(default_factory=dict)
    message_id: str | None = None
    message: Any
    egress: EgressSettings = Field(default_factory=EgressSettings)
    request_timeout_seconds: float = Field(default=A2A_TIMEOUT_SECONDS, gt=0)
    max_polls: int = Field(default=100, ge=1, le=1000)
    poll_interval_ms: int = Field(default=100, ge=1, le=60_000)
    continue_task_id: str | None = None
