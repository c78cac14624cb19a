"""Action definitions (spec/dsl.md §3): kinds, process-only keys and container isolation.

Invariants:
- Which kinds exist, and which configuration keys each accepts (process keys, extension keys,
  ``idempotency``), comes from ``agentctl.core.registry``; a key the kind does not accept is a
  ``schema_violation`` naming the kinds that do.
- For process kinds the process defaults are filled in (args [], env {}, stdout/stderr 1 MiB,
  combined 2 MiB, isolation "process"); for other kinds those keys dump as ``None``.
- ``container`` and ``isolation: container`` appear together; images are digest-pinned; the
  container ``env`` never names a variable the container engine itself reads.
- ``timeoutSeconds`` on a pure kind (``Operation.is_pure``: assign, assert, memory.read — work
  evaluated in place, with nothing to time out) is a misplaced key too;
- a kind the registry marks ``accepted=False`` (a [late] kind not implemented yet; none
  today) is ``unsupported_capability``; the extension keys (protocolVersion, inputSchema,
  outputSchema, capabilities) on a kind that does not take them are misplaced keys
  (``schema_violation``), like the process keys.
- extension.process declares ``protocolVersion`` (the one this version speaks), valid
  ``inputSchema`` / ``outputSchema`` and a non-empty list of distinct ``capabilities``.
"""

from __future__ import annotations

import re
from typing import Literal, Self

from pydantic import Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from agentctl.core import registry
from agentctl.core.dsl.base import (
    ENV_NAME_RE,
    MIB,
    JsonObject,
    OutputLimit,
    Program,
    Seconds,
    StrictModel,
    WorkingDirectory,
    check_json_schema,
    given_keys,
    registered_kind,
    rule_error,
)
from agentctl.core.dsl.secrets import EnvValue
from agentctl.core.extension import PROTOCOL_VERSION
from agentctl.core.operations import EXTENSION_KEYS, IDEMPOTENCY_KEY, PROCESS_KEYS, TIMEOUT_KEY

Idempotency = Literal["pure", "idempotent", "keyed", "at_most_once", "unknown"]

_DIGEST_RE = re.compile(r"^(?:[^@\s]+@)?sha256:[0-9a-f]{64}\Z")
_ENGINE_ENV_EXACT = frozenset({"PATH", "HOME", "TEMP", "TMP", "TMPDIR", "REGISTRY_AUTH_FILE"})
_ENGINE_ENV_PREFIXES = (
    "DOCKER_",
    "CONTAINER_",
    "CONTAINERS_",
    "PODMAN_",
    "BUILDAH_",
    "TMP",
    "XDG_",
    "LD_",
)


class Container(StrictModel):
    image: str
    runtime: Literal["auto", "docker", "podman"] = "auto"
    memory_limit_bytes: int = Field(
        256 * MIB, alias="memoryLimitBytes", ge=16 * MIB, le=16 * 1024 * MIB
    )
    cpu_limit_millis: int = Field(1000, alias="cpuLimitMillis", ge=1, le=64_000)
    pids_limit: int = Field(64, alias="pidsLimit", ge=1, le=4096)

    @model_validator(mode="after")
    def _pinned(self) -> Self:
        if not _DIGEST_RE.match(self.image):
            raise rule_error(
                "schema_violation",
                f"container image {self.image!r} is not pinned by digest",
                at="image",
                help="use NAME@sha256:<64 hex> or sha256:<64 hex>; images are never pulled",
            )
        return self


def is_engine_variable(name: str) -> bool:
    """True for variables a container engine reads itself (never passed into a container)."""
    upper = name.upper()
    return upper in _ENGINE_ENV_EXACT or upper.startswith(_ENGINE_ENV_PREFIXES)


class Action(StrictModel):
    kind: str  # an action kind of the registry (checked by ``_known_kind``)
    description: str | None = None
    with_: JsonObject = Field(default_factory=dict, alias="with")
    command: Program | None = None
    args: list[str] | None = None
    cwd: WorkingDirectory | None = None
    env: dict[str, EnvValue] | None = None
    timeout_seconds: Seconds | None = Field(None, alias="timeoutSeconds")
    stdout_limit_bytes: OutputLimit | None = Field(None, alias="stdoutLimitBytes")
    stderr_limit_bytes: OutputLimit | None = Field(None, alias="stderrLimitBytes")
    combined_output_limit_bytes: OutputLimit | None = Field(None, alias="combinedOutputLimitBytes")
    isolation: Literal["process", "container"] | None = None
    container: Container | None = None
    idempotency: Idempotency | None = None
    protocol_version: str | None = Field(None, alias="protocolVersion")
    input_schema: JsonObject | None = Field(None, alias="inputSchema")
    output_schema: JsonObject | None = Field(None, alias="outputSchema")
    capabilities: list[str] | None = None

    @field_validator("kind", mode="before")
    @classmethod
    def _known_kind(cls, value: object) -> str:
        return registered_kind(value, registry.names("action"))

    @model_validator(mode="after")
    def _kind_rules(self) -> Self:
        given = given_keys(self)
        entry = registry.lookup(self.kind)
        if not entry.accepted:
            raise rule_error(
                "unsupported_capability",
                f"action kind {self.kind!r} is not supported by this version of agentctl",
                at="kind",
                help="use one of the builtin.* kinds, mcp.call or a2a.delegate",
            )
        foreign = [k for k in EXTENSION_KEYS if k in given and k not in entry.config_keys]
        if foreign:  # misplaced, not unsupported: extension.process takes them (§3)
            raise _misplaced(foreign, self.kind, _owners(EXTENSION_KEYS[0]))
        misplaced = [k for k in PROCESS_KEYS if k in given and k not in entry.config_keys]
        if misplaced:
            raise _misplaced(misplaced, self.kind, f"process kinds ({_owners('command')})")
        if IDEMPOTENCY_KEY in given and IDEMPOTENCY_KEY not in entry.config_keys:
            raise _misplaced([IDEMPOTENCY_KEY], self.kind, _owners(IDEMPOTENCY_KEY))
        if TIMEOUT_KEY in given and entry.is_pure:
            raise rule_error(
                "schema_violation",
                f"`{TIMEOUT_KEY}` is not allowed on a {self.kind} action: a pure kind is "
                "evaluated in place, with nothing to time out",
                at=TIMEOUT_KEY,
                help=f"remove `{TIMEOUT_KEY}` from this action",
                key=True,
            )
        if entry.is_process:
            self._process_rules(given)
        if EXTENSION_KEYS[0] in entry.config_keys:
            self._extension_rules()
        return self

    def _extension_rules(self) -> None:
        """The process-extension protocol's declaration (spec/dsl.md §3, extension.process)."""
        if self.protocol_version != PROTOCOL_VERSION:
            raise rule_error(
                "schema_violation",
                f"action kind {self.kind!r} needs `protocolVersion: {PROTOCOL_VERSION}`",
                at="protocolVersion" if self.protocol_version is not None else None,
                help="the only process-extension protocol this version speaks",
            )
        for key, schema in (
            ("inputSchema", self.input_schema),
            ("outputSchema", self.output_schema),
        ):
            if schema is None:
                raise rule_error("schema_violation", f"action kind {self.kind!r} needs `{key}`")
            check_json_schema(schema, key)
        capabilities = self.capabilities or []
        if not capabilities or len(set(capabilities)) != len(capabilities) or "" in capabilities:
            raise rule_error(
                "schema_violation",
                "`capabilities` must be a non-empty list of distinct, non-empty names",
                at="capabilities" if self.capabilities is not None else None,
            )

    def _process_rules(self, given: set[str]) -> None:
        if self.command is None:
            raise rule_error(
                "schema_violation",
                f"action kind {self.kind!r} needs `command`",
                help="set `command` to the program to run; arguments go in `args`",
            )
        self.args = self.args if self.args is not None else []
        self.env = self.env if self.env is not None else {}
        self.stdout_limit_bytes = self.stdout_limit_bytes or MIB
        self.stderr_limit_bytes = self.stderr_limit_bytes or MIB
        self.combined_output_limit_bytes = self.combined_output_limit_bytes or 2 * MIB
        self.isolation = self.isolation or "process"
        for name in self.env:
            if not ENV_NAME_RE.match(name):
                raise rule_error(
                    "schema_violation", f"{name!r} is not an environment variable name", at="env"
                )
        if (self.isolation == "container") != (self.container is not None):
            raise rule_error(
                "schema_violation",
                "`container` and `isolation: container` must appear together",
                at="container" if "container" in given else "isolation",
            )
        if self.container is not None:
            for name in self.env:
                if is_engine_variable(name):
                    raise rule_error(
                        "schema_violation",
                        f"container env may not set {name!r}: the container engine reads it",
                        at=f"env.{name}",
                    )


def _owners(key: str) -> str:
    """The accepted kinds whose configuration takes ``key``."""
    found = [op.name for op in registry.entries("action") if key in op.config_keys and op.accepted]
    return ", ".join(found)


def _misplaced(keys: list[str], kind: str, allowed: str) -> PydanticCustomError:
    """Points at the first misplaced key and names them all (one error per action)."""
    shown = ", ".join(f"`{key}`" for key in keys)
    verb = "is" if len(keys) == 1 else "are"
    return rule_error(
        "schema_violation",
        f"{shown} {verb} not allowed on a {kind} action; only {allowed} accept it",
        at=keys[0],
        help=f"remove {shown} from this action",
        key=True,
    )
