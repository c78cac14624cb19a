"""The workflow document root: envelope (apiVersion, kind, metadata) and ``spec`` (§1, §2).

Invariants:
- ``apiVersion`` is one of ``API_VERSIONS`` (else ``unsupported_version``), ``kind`` is
  ``Workflow``, ``metadata.name`` is non-empty and ``spec.tasks`` is non-empty.
- Every spec key has its default; absent optional blocks without a spec default dump as None.
- ``packs`` and ``packTrust`` are validated here (``packs.py``); the packs themselves are
  read, verified and merged into the document outside core (``agentctl/packsource.py``,
  ``core/packs/merge.py``) before the compiler sees it.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from agentctl.core.dsl.actions import Action
from agentctl.core.dsl.agents import TOOL_NAME_RE, Agent, Provider, Tool
from agentctl.core.dsl.base import (
    JsonObject,
    NonEmptyStr,
    StrictModel,
    VarsFiles,
    rule_error,
)
from agentctl.core.dsl.packs import PackRef, PackTrust
from agentctl.core.dsl.settings import (
    A2aPeer,
    CompensationSettings,
    McpServer,
    Memory,
    Output,
    Policy,
    Runtime,
)
from agentctl.core.dsl.tasks import RESERVED_VARS, Subworkflow, Task

API_VERSIONS = ("agentctl.dev/v1alpha1", "agentctl.dev/v1")


class Metadata(StrictModel):
    name: NonEmptyStr
    description: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)


def _default_output() -> Output:
    # A named function, not a lambda: the core schema refers to it and is stored by
    # reference (``core/dsl/prebuilt.py``), which a lambda cannot be. Constructed, not
    # validated, like every default block (``base.StrictModel``).
    return Output.model_construct(verbose=False, show_diff=True)


class Spec(StrictModel):
    inputs: JsonObject = Field(default_factory=dict)
    vars: JsonObject = Field(default_factory=dict)
    vars_files: VarsFiles = Field(default_factory=list, alias="varsFiles")
    outputs: JsonObject = Field(default_factory=dict)
    providers: dict[str, Provider] = Field(default_factory=dict)
    agents: dict[str, Agent] = Field(default_factory=dict)
    actions: dict[str, Action] = Field(default_factory=dict)
    tools: dict[str, Tool] = Field(default_factory=dict)
    subworkflows: dict[str, Subworkflow] = Field(default_factory=dict)
    compensation: CompensationSettings = Field(default_factory=CompensationSettings.model_construct)
    tasks: Annotated[list[Task], Field(min_length=1)]
    policy: Policy = Field(default_factory=Policy.model_construct)
    memory: Memory = Field(default_factory=Memory.model_construct)
    mcp_servers: dict[str, McpServer] = Field(default_factory=dict, alias="mcpServers")
    a2a_peers: dict[str, A2aPeer] = Field(default_factory=dict, alias="a2aPeers")
    packs: list[PackRef] = Field(default_factory=list)
    # None when absent (not the defaults), so documents without packs keep their digests.
    pack_trust: PackTrust | None = Field(None, alias="packTrust")
    runtime: Runtime = Field(default_factory=Runtime.model_construct)
    # [quirk] an absent block means showDiff true; see the module docstring of settings.py.
    output: Output = Field(default_factory=_default_output)

    @field_validator("tools")
    @classmethod
    def _tool_names(cls, tools: dict[str, Tool]) -> dict[str, Tool]:
        for name in tools:
            if not TOOL_NAME_RE.match(name):
                raise rule_error(
                    "schema_violation",
                    f"tool name {name!r} is not an identifier",
                    at=name,
                    key=True,
                    help="use letters, digits, '_' and '-', starting with a letter or '_'",
                )
        return tools

    @field_validator("vars")
    @classmethod
    def _reserved(cls, values: dict[str, Any]) -> dict[str, Any]:
        for name in values:
            if name in RESERVED_VARS:
                raise rule_error(
                    "schema_violation", f"variable name {name!r} is reserved", at=name, key=True
                )
        return values

    @field_validator("packs")
    @classmethod
    def _unique_packs(cls, packs: list[PackRef]) -> list[PackRef]:
        names = [p.name for p in packs]
        for i, name in enumerate(names):
            if name in names[:i]:
                raise rule_error(
                    "schema_violation", f"pack {name!r} is listed twice", at=f"{i}.name"
                )
        return packs


class Workflow(StrictModel):
    """The root of a validated workflow document."""

    api_version: str = Field(alias="apiVersion")
    kind: Literal["Workflow"]
    metadata: Metadata
    spec: Spec

    @field_validator("api_version")
    @classmethod
    def _version(cls, value: str) -> str:
        if value not in API_VERSIONS:
            raise rule_error(
                "unsupported_version",
                f"apiVersion {value!r} is not supported",
                help=f"use apiVersion: {API_VERSIONS[0]} (or {API_VERSIONS[1]})",
            )
        return value
