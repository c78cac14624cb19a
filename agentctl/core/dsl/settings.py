"""Workflow-wide settings: policy (§7), runtime/budgets/pricing (§8), memory, output, remote peers.

Invariants:
- Every default of spec/dsl.md §2, §7 and §8 is filled in, so the normalized document can be
  read without fallbacks; budget limits with no spec default stay ``None`` (= unlimited).
- ``runtime.budgets.maxCostMicrousd`` requires ``runtime.pricing``; pricing rates default as the
  spec says (reasoning = output rate, cache read/write = input rate).
- ``output.showDiff`` [quirk]: true when the ``output`` block is absent (see ``workflow.py``),
  false when the block is present without the key.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable
from typing import Literal, Self

from pydantic import Field, field_validator, model_validator

from agentctl.core.dsl.base import (
    ENV_NAME_RE,
    U64,
    JsonObject,
    LocalDirectory,
    NonEmptyStr,
    PositiveU64,
    Seconds,
    StrictModel,
    check_http_url,
    empty_dict,
    empty_list,
    rule_error,
)
from agentctl.core.dsl.secrets import SecretRef
from agentctl.core.timeouts import A2A_TIMEOUT_SECONDS, MCP_TIMEOUT_SECONDS, TASK_TIMEOUT_SECONDS

_HOST_PATTERN_RE = re.compile(r"^(?:\*\.)?[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?\Z")
_MODEL_KEY_RE = re.compile(r"^[^/\s]+/[^\s]+\Z")


Scheme = Literal["https", "http"]


def _default_schemes() -> list[Scheme]:
    return ["https", "http"]


class NetworkPolicy(StrictModel):
    allowed_schemes: list[Scheme] = Field(
        default_factory=_default_schemes, alias="allowedSchemes", min_length=1
    )
    allowed_ports: list[int] = Field(default_factory=empty_list, alias="allowedPorts")
    allow_private: bool = Field(False, alias="allowPrivate")
    allow_proxy: bool = Field(False, alias="allowProxy")
    custom_ca: SecretRef | None = Field(None, alias="customCa")
    connect_timeout_seconds: int = Field(10, alias="connectTimeoutSeconds", ge=1, le=120)
    max_response_bytes: int = Field(8_388_608, alias="maxResponseBytes", ge=1, le=67_108_864)

    @field_validator("allowed_ports")
    @classmethod
    def _ports(cls, ports: list[int]) -> list[int]:
        for index, port in enumerate(ports):
            if not 1 <= port <= 65_535:
                message = f"port {port} is not in 1..65535"
                raise rule_error("schema_violation", message, at=str(index))
        return ports


class Policy(StrictModel):
    workspace_root: LocalDirectory = Field(".", alias="workspaceRoot")
    writable_roots: list[LocalDirectory] = Field(default_factory=empty_list, alias="writableRoots")
    environment_allowlist: list[str] = Field(
        default_factory=empty_list, alias="environmentAllowlist"
    )
    network_allowlist: list[str] = Field(default_factory=empty_list, alias="networkAllowlist")
    network: NetworkPolicy = Field(default_factory=NetworkPolicy.model_construct)
    process_allowlist: list[str] = Field(default_factory=empty_list, alias="processAllowlist")
    secret_file_roots: list[LocalDirectory] = Field(
        default_factory=empty_list, alias="secretFileRoots"
    )
    secret_process_allowlist: list[str] = Field(
        default_factory=empty_list, alias="secretProcessAllowlist"
    )
    providers: list[str] = Field(default_factory=empty_list)
    tools_allow: list[str] = Field(default_factory=empty_list, alias="toolsAllow")
    tools_deny: list[str] = Field(default_factory=empty_list, alias="toolsDeny")
    approval: Literal["never", "mutations", "high_risk", "always"] = "mutations"
    non_interactive: Literal["pause", "deny_approval", "fail"] = Field(
        "pause", alias="nonInteractive"
    )

    @model_validator(mode="after")
    def _shapes(self) -> Self:
        _check_entries(self)
        for key, names in (
            ("processAllowlist", self.process_allowlist),
            ("secretProcessAllowlist", self.secret_process_allowlist),
        ):
            for index, name in enumerate(names):
                if not name or "/" in name:
                    raise rule_error(
                        "schema_violation",
                        f"{key} entries are program basenames, not paths: {name!r}",
                        at=f"{key}.{index}",
                    )
        return self

    @field_validator("workspace_root")
    @classmethod
    def _workspace_root(cls, value: str) -> str:
        # The directory every path of the run is confined to (``core.policy.policy_workspace``):
        # relative to the workspace and inside it, or absolute; a `..` out of the workspace
        # would widen the confinement the operator chose with the workflow's place or
        # `--workspace`, so it is refused as `writableRoots` entries are; so is an empty one,
        # which names no directory (it was taken as the workspace, silently).
        if not value.strip():
            raise rule_error(
                "schema_violation",
                f"policy.workspaceRoot {value!r} is empty",
                help='write "." for the workspace itself, or name a directory',
            )
        if not value.startswith("/") and ".." in posixpath.normpath(value).split("/"):
            raise rule_error(
                "schema_violation",
                f"policy.workspaceRoot {value!r} leaves the workspace with `..`",
                help="name a directory inside the workspace, or an absolute path",
            )
        return value


# Per-entry rules of the policy's lists: (key, field, holds, message, help). An empty
# ``writableRoots`` entry names no directory (every write would be denied), nor does one with
# a `..` segment (``core.policy.check_relative_path`` refuses it, so every write is denied); an
# empty (or blank) ``secretFileRoots`` entry names no directory either, yet a run joined it to
# the workspace and took the whole workspace as a secret root (and it counted as the root a
# ``{file}`` secret needs); an ``environmentAllowlist`` entry that is not a variable name
# (``ENV_NAME_RE``, the rule of an ``{env: NAME}`` reference) could never be read.
_ENTRY_RULES: tuple[tuple[str, str, Callable[[str], bool], str, str | None], ...] = (
    (
        "networkAllowlist",
        "network_allowlist",
        lambda v: bool(_HOST_PATTERN_RE.match(v)),
        "network allowlist entry {!r} is not a host or *.suffix pattern",
        None,
    ),
    (
        "writableRoots",
        "writable_roots",
        lambda v: bool(v.strip()),
        "writableRoots entries name directories; {!r} is empty",
        'write "." for the whole workspace, or a directory under it',
    ),
    (
        "writableRoots",
        "writable_roots",
        lambda v: v.startswith("/") or ".." not in v.split("/"),
        "writableRoots entry {!r} contains `..`, which every write's path check refuses",
        "name a directory inside the workspace without `..`, or an absolute path",
    ),
    (
        "secretFileRoots",
        "secret_file_roots",
        lambda v: bool(v.strip()),
        "secretFileRoots entries name directories; {!r} is empty",
        "name the directory that holds the secret files, relative to the workspace or absolute",
    ),
    (
        "environmentAllowlist",
        "environment_allowlist",
        lambda v: bool(ENV_NAME_RE.match(v)),
        "environmentAllowlist entry {!r} is not an environment variable name",
        "use letters, digits and underscores, not starting with a digit",
    ),
)


def _check_entries(policy: Policy) -> None:
    for key, field, holds, message, help in _ENTRY_RULES:
        for index, value in enumerate(getattr(policy, field)):
            if not holds(value):
                raise rule_error(
                    "schema_violation", message.format(value), at=f"{key}.{index}", help=help
                )


class Budgets(StrictModel):
    max_provider_requests: PositiveU64 | None = Field(None, alias="maxProviderRequests")
    max_turns: PositiveU64 | None = Field(None, alias="maxTurns")
    max_tool_calls: PositiveU64 | None = Field(None, alias="maxToolCalls")
    max_input_tokens: PositiveU64 | None = Field(None, alias="maxInputTokens")
    max_output_tokens: PositiveU64 | None = Field(None, alias="maxOutputTokens")
    max_total_tokens: PositiveU64 | None = Field(None, alias="maxTotalTokens")
    max_wall_time_seconds: PositiveU64 | None = Field(None, alias="maxWallTimeSeconds")
    max_process_output_bytes: PositiveU64 | None = Field(None, alias="maxProcessOutputBytes")
    max_artifact_bytes: PositiveU64 | None = Field(None, alias="maxArtifactBytes")
    max_tasks: PositiveU64 | None = Field(None, alias="maxTasks")
    max_expansion_items: PositiveU64 | None = Field(None, alias="maxExpansionItems")
    max_loop_iterations: PositiveU64 | None = Field(None, alias="maxLoopIterations")
    max_cost_microusd: PositiveU64 | None = Field(None, alias="maxCostMicrousd")


class ModelPrice(StrictModel):
    input_rate: PositiveU64 = Field(alias="inputMicrousdPerMillionTokens")
    output_rate: PositiveU64 = Field(alias="outputMicrousdPerMillionTokens")
    reasoning_rate: U64 | None = Field(None, alias="reasoningMicrousdPerMillionTokens")
    cache_read_rate: U64 | None = Field(None, alias="cacheReadMicrousdPerMillionTokens")
    cache_write_rate: U64 | None = Field(None, alias="cacheWriteMicrousdPerMillionTokens")

    @model_validator(mode="after")
    def _defaults(self) -> Self:
        if self.reasoning_rate is None:
            self.reasoning_rate = self.output_rate
        if self.cache_read_rate is None:
            self.cache_read_rate = self.input_rate
        if self.cache_write_rate is None:
            self.cache_write_rate = self.input_rate
        return self


class Pricing(StrictModel):
    version: NonEmptyStr
    models: dict[str, ModelPrice] = Field(min_length=1)

    @field_validator("models")
    @classmethod
    def _keys(cls, models: dict[str, ModelPrice]) -> dict[str, ModelPrice]:
        for key in models:
            if not _MODEL_KEY_RE.match(key):
                raise rule_error(
                    "schema_violation",
                    f"pricing model key {key!r} must be written provider/model",
                    at=key,
                    key=True,
                )
        return models


class Runtime(StrictModel):
    max_concurrency: int = Field(1, alias="maxConcurrency", ge=1, le=64)
    default_timeout_seconds: Seconds = Field(TASK_TIMEOUT_SECONDS, alias="defaultTimeoutSeconds")
    budgets: Budgets = Field(default_factory=Budgets.model_construct)
    pricing: Pricing | None = None

    @model_validator(mode="after")
    def _cost_needs_pricing(self) -> Self:
        if self.budgets.max_cost_microusd is not None and self.pricing is None:
            raise rule_error(
                "schema_violation",
                "budgets.maxCostMicrousd needs runtime.pricing",
                at="budgets.maxCostMicrousd",
                help="add runtime.pricing with a rate for every provider/model you use",
            )
        return self


class Output(StrictModel):
    verbose: bool = False
    show_diff: bool = Field(False, alias="showDiff")


class CompensationSettings(StrictModel):
    on_failure: Literal["manual", "automatic"] = Field("manual", alias="onFailure")
    approval: Literal["policy", "never", "always"] = "policy"


class Embedding(StrictModel):
    provider: Literal["local_hash"] = "local_hash"
    model: str | None = None
    dimensions: int = Field(64, ge=8, le=4096)


class LongTermMemory(StrictModel):
    provider: Literal["sqlite"] = "sqlite"
    namespace: NonEmptyStr = "default"
    retention_days: int | None = Field(None, alias="retentionDays", ge=1, le=36_500)
    embedding: Embedding = Field(default_factory=Embedding.model_construct)


class Memory(StrictModel):
    working: JsonObject = Field(default_factory=empty_dict)
    long_term: LongTermMemory = Field(
        default_factory=LongTermMemory.model_construct, alias="longTerm"
    )


MCP_PROTOCOL_VERSION = "2025-11-25"
A2A_PROTOCOL_VERSION = "1.0"


def _only(protocol: str, spoken: str, value: str) -> str:
    if value != spoken:
        raise rule_error(
            "unsupported_capability",
            f"{protocol} protocol {value!r} is not spoken by this version of agentctl",
            help=f"use protocolVersion {spoken!r} (the default)",
        )
    return value


def _mcp_spoken(value: str) -> str:
    # The client offers this revision in `initialize`; another could never be agreed.
    return _only("MCP", MCP_PROTOCOL_VERSION, value)


# Any patch of the spoken minor version: the worker picks the card's interface by major.minor
# (``workers/a2a_client``), so "1.0.0" reaches the same peers as "1.0".
_A2A_SPOKEN = re.compile(re.escape(A2A_PROTOCOL_VERSION) + r"(\.[0-9]+)?")


def _a2a_spoken(value: str) -> str:
    # The card must offer an interface for this version; another could never be chosen.
    if _A2A_SPOKEN.fullmatch(value):
        return value
    return _only("A2A", A2A_PROTOCOL_VERSION, value)


def _mcp_url(value: str) -> str:
    # A path (a stdio server's script) is no endpoint: this client speaks Streamable HTTP only.
    check_http_url(value, "MCP server url", "https://mcp.example.com/mcp")
    return value


def _card_url(value: str) -> str:
    check_http_url(
        value, "A2A Agent Card URL", "https://agents.example.com/.well-known/agent-card.json"
    )
    return value


class McpServer(StrictModel):
    url: NonEmptyStr
    headers: dict[str, SecretRef] = Field(default_factory=dict)
    timeout_seconds: Seconds = Field(MCP_TIMEOUT_SECONDS, alias="timeoutSeconds")
    protocol_version: NonEmptyStr = Field(MCP_PROTOCOL_VERSION, alias="protocolVersion")

    _spoken = field_validator("protocol_version")(_mcp_spoken)
    _url = field_validator("url")(_mcp_url)


class A2aPeer(StrictModel):
    card_url: NonEmptyStr = Field(alias="cardUrl")
    headers: dict[str, SecretRef] = Field(default_factory=dict)
    timeout_seconds: Seconds = Field(A2A_TIMEOUT_SECONDS, alias="timeoutSeconds")
    max_polls: int = Field(100, alias="maxPolls", ge=1, le=1000)
    poll_interval_ms: int = Field(100, alias="pollIntervalMs", ge=1, le=60_000)
    protocol_version: NonEmptyStr = Field(A2A_PROTOCOL_VERSION, alias="protocolVersion")

    _spoken = field_validator("protocol_version")(_a2a_spoken)
    _url = field_validator("card_url")(_card_url)
