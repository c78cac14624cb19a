"""The pack manifest (``apiVersion: agentctl.dev/pack/v1alpha1``): model and strict loader.

A pack is reviewed, reusable workflow content — never executable plugin code of ours. Its
manifest declares a fully qualified dotted ``name``, a semantic ``version``, the ``agentctl``
versions it works with, optional ``dependencies`` (each with a version constraint and an
exact source), the declared asset ``files`` (relative path → ``sha256:`` digest) and the
definitions it exports: ``actions``, ``agents``, ``tools`` and ``workflows`` (reusable
sub-workflows). ``capabilities``, ``providers`` and ``policyDefaults`` are inspectable
metadata: they never widen the invoking workflow's policy.

Invariants:
- strict like the workflow language: unknown keys, wrong types and bad names fail with a
  located ``Diagnostic`` (``ValidationError``, exit 2), through the same YAML loader;
- exported definitions are validated by the very models the workflow uses (``Action``,
  ``Agent``, ``Tool``, ``Subworkflow``), so a pack cannot carry what a workflow could not;
- pure: bytes in, model out; ``LoadedManifest.digest`` is the pack's integrity.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from pydantic import Field, field_validator

from agentctl.core.dsl.actions import Action
from agentctl.core.dsl.agents import Agent, Tool
from agentctl.core.dsl.base import NonEmptyStr, StrictModel, rule_error
from agentctl.core.dsl.diagnostics import Finding, Locator, findings_from_pydantic, to_diagnostic
from agentctl.core.dsl.packs import PackSource, check_constraint, check_pack_name
from agentctl.core.dsl.scalars import validate_as_written
from agentctl.core.dsl.settings import Policy
from agentctl.core.dsl.tasks import Subworkflow
from agentctl.core.dsl.yamlload import parse_yaml
from agentctl.core.packs.integrity import digest_of, normalize_integrity
from agentctl.core.packs.semver import parse_version
from agentctl.errors import Diagnostic, ValidationError

PACK_API_VERSION = "agentctl.dev/pack/v1alpha1"
MAX_FILES = 256
_ITEM_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*\Z")
_SEGMENT_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*\Z")


def _item_names(values: dict[str, Any]) -> dict[str, Any]:
    for name in values:
        if not _ITEM_RE.match(name):
            raise rule_error(
                "schema_violation",
                f"exported name {name!r} is not an identifier (it is qualified as PACK.NAME)",
                at=name,
                key=True,
            )
    return values


def check_asset_path(path: str) -> str:
    """A normalized, portable relative path: no ``..``, ``.``, empty segment, ``\\`` or root."""
    segments = path.split("/")
    if path.startswith("/") or "\\" in path or "\0" in path:
        raise ValueError(f"{path!r} is not a relative portable path")
    for segment in segments:
        if segment in ("", ".", "..") or not _SEGMENT_RE.match(segment):
            raise ValueError(f"{path!r} is not a normalized relative path")
    return path


class PackDependency(StrictModel):
    version: NonEmptyStr
    source: PackSource

    _version = field_validator("version")(check_constraint)


class PackManifest(StrictModel):
    api_version: str = Field(alias="apiVersion")
    name: NonEmptyStr
    version: NonEmptyStr
    agentctl: NonEmptyStr
    files: dict[str, str] = Field(default_factory=dict)
    dependencies: dict[str, PackDependency] = Field(default_factory=dict)
    actions: dict[str, Action] = Field(default_factory=dict)
    agents: dict[str, Agent] = Field(default_factory=dict)
    tools: dict[str, Tool] = Field(default_factory=dict)
    workflows: dict[str, Subworkflow] = Field(default_factory=dict)
    capabilities: list[NonEmptyStr] = Field(default_factory=list)
    providers: list[NonEmptyStr] = Field(default_factory=list)
    policy_defaults: Policy | None = Field(None, alias="policyDefaults")

    _name = field_validator("name")(check_pack_name)
    _agentctl = field_validator("agentctl")(check_constraint)
    _items = field_validator("actions", "agents", "tools", "workflows")(_item_names)

    @field_validator("api_version")
    @classmethod
    def _api(cls, value: str) -> str:
        if value != PACK_API_VERSION:
            raise rule_error(
                "unsupported_version",
                f"pack apiVersion {value!r} is not supported",
                help=f"use apiVersion: {PACK_API_VERSION}",
            )
        return value

    @field_validator("version")
    @classmethod
    def _semver(cls, value: str) -> str:
        try:
            parse_version(value)
        except ValueError as exc:
            raise rule_error("schema_violation", str(exc)) from None
        return value

    @field_validator("dependencies")
    @classmethod
    def _dependency_names(cls, values: dict[str, PackDependency]) -> dict[str, PackDependency]:
        for name in values:
            check_pack_name(name)
        return values

    @field_validator("files")
    @classmethod
    def _files(cls, values: dict[str, str]) -> dict[str, str]:
        if len(values) > MAX_FILES:
            raise rule_error("schema_violation", f"more than {MAX_FILES} declared files")
        for path, digest in values.items():
            try:
                check_asset_path(path)
                normalize_integrity(digest)
            except ValueError as exc:
                raise rule_error("schema_violation", str(exc), at=path) from None
        return values


@dataclass(frozen=True)
class LoadedManifest:
    """A validated manifest, its normalized JSON form and its integrity digest."""

    manifest: PackManifest
    document: dict[str, Any]
    digest: str
    file: str


def load_manifest(data: bytes, file: str) -> LoadedManifest:
    """Parse and validate manifest bytes; ``ValidationError`` with located diagnostics."""
    parsed = parse_yaml(data, file)
    locator = Locator.later(parsed.tables_later())
    raw = parsed.value
    if not isinstance(raw, dict):
        finding = Finding("schema_violation", "", "a pack manifest must be a mapping")
        raise _invalid([to_diagnostic(finding, locator, file)], file)
    found = validate_as_written(PackManifest, raw, parsed.plain_texts)
    if found.model is None:
        assert found.error is not None
        findings = findings_from_pydantic(found.error, found.raw, PackManifest)
        raise _invalid([to_diagnostic(f, locator, file) for f in findings], file)
    document = found.model.model_dump(mode="json", by_alias=True)
    return LoadedManifest(found.model, document, digest_of(data), file)


def _invalid(diagnostics: list[Diagnostic], file: str) -> ValidationError:
    first = diagnostics[0].message if diagnostics else "invalid manifest"
    return ValidationError(f"invalid pack manifest {file}: {first}", diagnostics=diagnostics)
