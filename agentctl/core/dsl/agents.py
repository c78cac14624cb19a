"""Providers, agents and tools (spec/dsl.md §5): their keys, defaults and local rules.

Invariants:
- A non-fake provider gets its spec default endpoint (Azure must name one) and, when no
  ``credential`` is written, the conventional environment variable of its kind.
- An agent has exactly one of ``instructions`` / ``instructionsFile``.
- Provider and tool kinds are those of ``agentctl.core.registry``; a tool's registry entry
  fixes its capability, effect class and idempotency (absent ones are filled in, written ones
  must agree); its ``inputSchema`` is strict (object, no additional properties,
  every property required); built-in tools declare no secrets and no network.
- An ``mcp.tool`` names a tool of an MCP server (``server``: a ``spec.mcpServers`` key,
  ``tool``: the server's name for it) and declares no ``inputSchema``: the model sees the
  schema the server lists at run time. Only ``mcp.tool`` takes ``server`` and ``tool``.
- Rules that need other parts of the document (the agent's provider kind for ``reasoning`` and
  ``providerOptions``) live in ``rules.py``.
"""

from __future__ import annotations

import re
from typing import Any, Literal, Self

from pydantic import Field, ValidationInfo, field_validator, model_validator

from agentctl.core import registry
from agentctl.core.dsl.base import (
    U32_MAX,
    InstructionsFile,
    JsonObject,
    NonEmptyStr,
    PositiveU64,
    Seconds,
    StrictModel,
    VarsFiles,
    check_http_url,
    check_json_schema,
    given_keys,
    registered_kind,
    rule_error,
)
from agentctl.core.dsl.secrets import EnvSecret, SecretRef
from agentctl.core.dsl.tasks import RESERVED_VARS
from agentctl.core.providerdefaults import CREDENTIAL_ENVS, DEFAULT_ENDPOINTS
from agentctl.core.timeouts import AGENT_CALL_TIMEOUT_SECONDS

TOOL_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*\Z")
MCP_TOOL_KIND = "mcp.tool"


class Provider(StrictModel):
    kind: str  # a provider kind with a model-call entry in the registry (named as the kind)
    endpoint: str | None = None
    credential: SecretRef | None = None
    api_version: str | None = Field(None, alias="apiVersion")
    headers: dict[str, SecretRef] = Field(default_factory=dict)

    @field_validator("kind", mode="before")
    @classmethod
    def _known_kind(cls, value: object) -> str:
        return registered_kind(value, registry.names("model"))

    @model_validator(mode="after")
    def _defaults(self) -> Self:
        if self.api_version is not None and self.kind != "azure_openai":
            raise rule_error(
                "schema_violation",
                "`apiVersion` applies to azure_openai providers only",
                at="apiVersion",
                key=True,
            )
        if self.kind == "azure_openai" and self.endpoint is None:
            raise rule_error(
                "schema_violation",
                "an azure_openai provider needs an explicit `endpoint`",
                help="set endpoint to your Azure OpenAI deployment URL",
            )
        if self.kind == "azure_openai" and self.api_version is None:
            raise rule_error(  # the call's URL carries it: without one no call could be made
                "schema_violation",
                "an azure_openai provider needs an `apiVersion`",
                help="set apiVersion to the API version of your resource, e.g. 2025-04-01-preview",
            )
        if self.kind == "fake":
            self._nothing_to_reach()
            return self
        if self.endpoint is not None:
            _check_endpoint(self.endpoint)
        if self.endpoint is None:
            self.endpoint = DEFAULT_ENDPOINTS[self.kind]
        if self.credential is None:
            self.credential = EnvSecret(env=CREDENTIAL_ENVS[self.kind])
        return self

    def _nothing_to_reach(self) -> None:
        """A fake provider answers in-process: an endpoint, credential or headers would never
        be used (and would otherwise be checked against policy before the run)."""
        unused = [k for k in ("endpoint", "credential", "headers") if k in given_keys(self)]
        if unused:
            raise rule_error(
                "schema_violation",
                f"a fake provider makes no requests: `{unused[0]}` would never be used",
                at=unused[0],
                key=True,
                help="remove it, or give the provider a real kind",
            )


def _check_endpoint(endpoint: str) -> None:
    check_http_url(
        endpoint, "provider endpoint", "https://api.openai.com/v1/responses", at="endpoint"
    )


class Reasoning(StrictModel):
    effort: Literal["none", "low", "medium", "high", "xhigh", "max"]
    mode: str | None = None


class UsageLimit(StrictModel):
    max_input_tokens: PositiveU64 | None = Field(None, alias="maxInputTokens")
    max_output_tokens: PositiveU64 | None = Field(None, alias="maxOutputTokens")
    max_cost_usd: float | None = Field(None, alias="maxCostUsd", gt=0)


class AgentRetry(StrictModel):
    max_attempts: int = Field(1, alias="maxAttempts", ge=1, le=20)
    backoff_ms: int = Field(0, alias="backoffMs", ge=0, le=60_000)


class Agent(StrictModel):
    provider: NonEmptyStr
    model: NonEmptyStr
    description: str | None = None
    instructions: str | None = None
    instructions_file: InstructionsFile | None = Field(None, alias="instructionsFile")
    vars: JsonObject = Field(default_factory=dict)
    vars_files: VarsFiles = Field(default_factory=list, alias="varsFiles")
    tools: list[str] = Field(default_factory=list)
    max_turns: int = Field(8, alias="maxTurns", ge=1, le=64)
    max_tool_calls: int = Field(16, alias="maxToolCalls", ge=0, le=256)
    max_output_tokens: int = Field(2048, alias="maxOutputTokens", ge=1, le=U32_MAX)
    timeout_seconds: Seconds = Field(AGENT_CALL_TIMEOUT_SECONDS, alias="timeoutSeconds")
    retry: AgentRetry | None = None
    reasoning: Reasoning | None = None
    structured_output: JsonObject | None = Field(None, alias="structuredOutput")
    usage_limit: UsageLimit | None = Field(None, alias="usageLimit")
    stream: bool = False
    provider_options: JsonObject = Field(default_factory=dict, alias="providerOptions")

    @model_validator(mode="after")
    def _rules(self) -> Self:
        if (self.instructions is None) == (self.instructions_file is None):
            raise rule_error(
                "schema_violation",
                "an agent needs exactly one of `instructions` or `instructionsFile`",
                at="instructionsFile" if self.instructions_file is not None else None,
            )
        reserved = sorted(RESERVED_VARS.intersection(self.vars))
        if reserved:
            raise rule_error(
                "schema_violation",
                f"variable name {reserved[0]!r} is reserved for the engine",
                at=f"vars.{reserved[0]}",
                key=True,
            )
        if len(set(self.tools)) != len(self.tools):
            raise rule_error("schema_violation", "agent `tools` lists a tool twice", at="tools")
        check_json_schema(self.structured_output, "structuredOutput")
        return self


EffectClass = Literal[
    "pure",
    "internal_state",
    "observe",
    "workspace_mutate",
    "external_mutate",
    "process_execution",
    "network",
    "model",
    "remote_agent",
]
ToolIdempotency = Literal["pure", "idempotent", "keyed", "at_most_once", "unknown"]


class Tool(StrictModel):
    kind: str  # a tool kind of the registry (checked by ``_known_kind``)
    description: str | None = None
    input_schema: JsonObject | None = Field(None, alias="inputSchema")
    output_schema: JsonObject | None = Field(None, alias="outputSchema")
    server: NonEmptyStr | None = None  # mcp.tool only
    tool: NonEmptyStr | None = None  # mcp.tool only
    capability: str | None = None
    risk: Literal["low", "medium", "high", "critical"] | None = None
    effect_class: EffectClass | None = Field(None, alias="effectClass")
    idempotency: ToolIdempotency | None = None
    retry_safe: bool = Field(False, alias="retrySafe")
    timeout_seconds: Seconds | None = Field(None, alias="timeoutSeconds")
    secrets: list[SecretRef] = Field(default_factory=list)
    network: list[str] = Field(default_factory=list)
    approval: Literal["policy", "never", "always"] = "policy"

    @field_validator("kind", mode="before")
    @classmethod
    def _known_kind(cls, value: object) -> str:
        return registered_kind(value, registry.names("tool"))

    @field_validator("input_schema")
    @classmethod
    def _strict_schema(
        cls, schema: dict[str, Any] | None, info: ValidationInfo
    ) -> dict[str, Any] | None:
        # An mcp.tool may declare no inputSchema at all: ``_remote_tool`` says so, which is
        # the true reason whatever the schema's own shape.
        if schema is not None and info.data.get("kind") != MCP_TOOL_KIND:
            check_strict_input_schema(schema)
        return schema

    @model_validator(mode="after")
    def _remote_tool(self) -> Self:
        """``server``/``tool`` exactly on mcp.tool; ``inputSchema`` exactly on the others."""
        remote = self.kind == MCP_TOOL_KIND
        for key in ("server", "tool"):
            given = getattr(self, key) is not None
            if given != remote:
                problem = "needs" if remote else "may not declare"
                raise rule_error(
                    "schema_violation",
                    f"a {self.kind} tool {problem} `{key}`",
                    at=key if given else None,
                    key=given,
                    help="only mcp.tool tools name an MCP server and its tool",
                )
        if (self.input_schema is not None) == remote:
            problem = "takes its inputSchema from the server" if remote else "needs `inputSchema`"
            raise rule_error(
                "schema_violation",
                f"a {self.kind} tool {problem}",
                at="inputSchema" if remote else None,
                key=remote,
            )
        return self

    @model_validator(mode="after")
    def _kind_rules(self) -> Self:
        check_json_schema(self.input_schema, "inputSchema")
        check_json_schema(self.output_schema, "outputSchema")
        entry = registry.lookup(self.kind)
        capability, effect = entry.capability, str(entry.effect_class)
        idempotencies = tuple(str(value) for value in entry.idempotency_choices)
        risk, needed = str(entry.risk), entry.required_inputs
        expected = {"capability": capability, "effectClass": effect}
        for key, value in expected.items():
            written = self.capability if key == "capability" else self.effect_class
            if written is not None and written != value:
                raise _kind_mismatch(self.kind, key, written, repr(value))
        if self.idempotency is not None and self.idempotency not in idempotencies:
            raise _kind_mismatch(
                self.kind, "idempotency", self.idempotency, " or ".join(idempotencies)
            )
        self.capability = capability
        self.effect_class = effect  # type: ignore[assignment]  # checked against the table
        self.idempotency = self.idempotency or idempotencies[0]  # type: ignore[assignment]
        self.risk = self.risk or risk  # type: ignore[assignment]
        properties = (self.input_schema or {}).get("properties") or {}
        for name in needed:
            if name not in properties:
                raise rule_error(
                    "schema_violation",
                    f"a {self.kind} tool's inputSchema must declare property {name!r}",
                    at="inputSchema",
                )
        for key in ("secrets", "network"):
            if key in given_keys(self) and getattr(self, key):
                raise rule_error(
                    "schema_violation",
                    f"{self.kind} tools may not declare `{key}`",
                    at=key,
                    key=True,
                )
        return self


def _kind_mismatch(kind: str, key: str, written: str, expected: str) -> Any:
    return rule_error(
        "schema_violation",
        f"a {kind} tool must have {key} {expected}, not {written!r}",
        at=key,
        help=f"remove `{key}` or set it to {expected}",
    )


def check_strict_input_schema(schema: dict[str, Any]) -> None:
    """A tool input schema: an object, ``additionalProperties: false``, all properties required."""
    if schema.get("type") != "object":
        raise rule_error("schema_violation", "a tool inputSchema must have `type: object`")
    if schema.get("additionalProperties") is not False:
        raise rule_error(
            "schema_violation",
            "a tool inputSchema must set `additionalProperties: false`",
            help="models may only send the declared properties",
        )
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    if not isinstance(properties, dict) or not isinstance(required, list):
        raise rule_error(
            "schema_violation", "inputSchema `properties` must be an object and `required` a list"
        )
    missing = [name for name in properties if name not in required]
    if missing:
        raise rule_error(
            "schema_violation",
            f"every inputSchema property must be required; not required: {', '.join(missing)}",
            help="add them to `required`",
        )
