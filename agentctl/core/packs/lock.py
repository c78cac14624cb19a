"""The pack lock file ``agentctl.pack.lock`` (``apiVersion: agentctl.dev/pack-lock/v1``).

The lock records the complete resolved graph beside the workflow: for each pack (sorted by
name) its concrete version, exact source, manifest digest (``integrity``), the agentctl
versions it declares it works with (``compatibility``), its dependency edges (name → the
concrete version chosen) and its trust result. Committed next to the workflow it makes a
checkout reproducible and any change to a pack visible in review.

Invariants:
- pure: a lock is built from a resolved graph, read from bytes, compared with a graph;
- ``lock_drift`` lists every difference, each as one sentence naming the pack; an empty list
  means the lock describes exactly the graph (``strict`` also counts entries the graph no
  longer reaches, which ``--locked`` rejects).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field

from agentctl.core.dsl.base import NonEmptyStr, StrictModel
from agentctl.core.dsl.diagnostics import Finding, Locator, findings_from_pydantic, to_diagnostic
from agentctl.core.dsl.packs import PackSource
from agentctl.core.dsl.scalars import validate_as_written
from agentctl.core.dsl.yamlload import parse_yaml
from agentctl.core.jsonvalue import JsonObject
from agentctl.core.packs.resolve import COMPAT_VERSION, ResolvedPack
from agentctl.core.packs.trust import UNSIGNED
from agentctl.errors import Diagnostic, ValidationError

LOCK_API_VERSION = "agentctl.dev/pack-lock/v1"
LOCK_FILE = "agentctl.pack.lock"


class LockTrust(StrictModel):
    status: Literal["unsigned", "verified"]


class LockEntry(StrictModel):
    name: NonEmptyStr
    version: NonEmptyStr
    source: PackSource
    integrity: NonEmptyStr
    compatibility: NonEmptyStr
    dependencies: dict[str, str] = Field(default_factory=dict)
    trust: LockTrust


class PackLock(StrictModel):
    api_version: Literal["agentctl.dev/pack-lock/v1"] = Field(alias="apiVersion")
    agentctl: NonEmptyStr
    packs: list[LockEntry] = Field(default_factory=list)


def _entry(pack: ResolvedPack) -> JsonObject:
    return {
        "name": pack.name,
        "version": pack.version,
        "source": dict(pack.location),
        "integrity": pack.integrity,
        "compatibility": pack.compatibility,
        "dependencies": dict(sorted(pack.dependencies.items())),
        "trust": {"status": UNSIGNED},
    }


def build_lock(graph: list[ResolvedPack]) -> JsonObject:
    """The lock document of ``graph`` (entries sorted by pack name)."""
    return _document([_entry(p) for p in sorted(graph, key=lambda p: p.name)])


def _document(entries: list[Any]) -> JsonObject:
    return {"apiVersion": LOCK_API_VERSION, "agentctl": COMPAT_VERSION, "packs": entries}


def scoped_lock(graph: list[ResolvedPack], kept: Mapping[str, JsonObject], pack: str) -> JsonObject:
    """The lock document of ``graph`` where only ``pack`` and the packs it depends on (however
    deep) are taken as resolved now; every other pack the old lock had keeps its old entry
    (``kept``, by name), so ``packs update --pack`` accepts no change nobody named. A pack
    the old lock lacks is added as resolved; one the graph lost is dropped."""
    by_name = {p.name: p for p in graph}
    scope, todo = set(), [pack]
    while todo:
        name = todo.pop()
        if name in by_name and name not in scope:
            scope.add(name)
            todo.extend(by_name[name].dependencies)
    return _document(
        [
            _entry(p) if p.name in scope or p.name not in kept else dict(kept[p.name])
            for p in sorted(graph, key=lambda p: p.name)
        ]
    )


def lock_entries(lock: PackLock) -> dict[str, JsonObject]:
    """A parsed lock's entries by pack name, as documents (``scoped_lock`` keeps them)."""
    return {e.name: e.model_dump(mode="json", by_alias=True, exclude_none=True) for e in lock.packs}


def parse_lock(data: bytes, file: str) -> PackLock:
    """A lock file's bytes → ``PackLock``; a malformed lock is a ``ValidationError``."""
    parsed = parse_yaml(data, file)
    locator = Locator.later(parsed.tables_later())
    if not isinstance(parsed.value, dict):
        finding = Finding("schema_violation", "", "a pack lock must be a mapping")
        raise _invalid([to_diagnostic(finding, locator, file)], file)
    found = validate_as_written(PackLock, parsed.value, parsed.plain_texts)
    if found.model is None:
        assert found.error is not None
        findings = findings_from_pydantic(found.error, found.raw, PackLock)
        raise _invalid([to_diagnostic(f, locator, file) for f in findings], file)
    return found.model


def _invalid(diagnostics: list[Diagnostic], file: str) -> ValidationError:
    """A located refusal, worded as the workflow's and the manifest's are."""
    first = diagnostics[0].message if diagnostics else "invalid"
    message = f"{file} is not a valid pack lock ({LOCK_API_VERSION}): {first}"
    return ValidationError(message, diagnostics=diagnostics)


def _normalized(entry: LockEntry) -> JsonObject:
    dumped = entry.model_dump(mode="json", by_alias=True, exclude_none=True)
    dumped["source"] = {k: v for k, v in dumped["source"].items() if v is not None}
    return dumped


def lock_drift(lock: PackLock, graph: list[ResolvedPack], *, strict: bool) -> list[str]:
    """Every difference between ``lock`` and ``graph``; empty when they agree."""
    locked = {e.name: _normalized(e) for e in lock.packs}
    drift: list[str] = []
    if strict and lock.agentctl != COMPAT_VERSION:
        drift.append(f"the lock was written for agentctl {lock.agentctl}, not {COMPAT_VERSION}")
    for pack in graph:
        want = locked.pop(pack.name, None)
        if want is None:
            drift.append(f"pack {pack.name} is not in the lock")
            continue
        have = _entry(pack)
        for key in ("version", "source", "integrity", "compatibility", "dependencies"):
            if want.get(key) != have[key]:
                drift.append(
                    f"pack {pack.name}: {key} is {have[key]} but the lock says {want.get(key)}"
                )
    if strict:
        drift.extend(f"pack {name} is locked but no longer required" for name in sorted(locked))
    return drift
