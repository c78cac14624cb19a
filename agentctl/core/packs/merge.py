"""Merging resolved packs into a workflow document, before it is compiled.

Every definition a pack exports is added to the document under its qualified name
``<pack-name>.<item-name>``: ``actions`` and ``agents`` (a task uses ``action:P.N`` /
``agent:P.N``), ``tools`` (an agent lists ``P.N``) and ``workflows`` (added to
``spec.subworkflows``; a task uses ``workflow:P.N``). Inside a pack, references are
pack-qualified as they are loaded: a name the pack exports itself becomes ``P.name``, a name
already qualified by one of the pack's declared dependencies stays as written; anything else
is a ``missing_reference``. Agents keep their ``provider``: the invoking workflow supplies
providers and policy, and a pack's ``policyDefaults`` never widen it.

The ``instructionsFile`` and ``varsFiles`` of a pack's agents and of its sub-workflows' tasks
are paths relative to the pack manifest's directory, and must be declared in its ``files``
(else a ``schema_violation`` naming the pack, the item and the path). Each is renamed to its
``pack_file_key`` (``pack://P/path``) and its verified bytes (``ResolvedPack.assets``) come
with the merged document (``Merged.files``): the CLI captures them as it captures the
workflow's own files, with the same limits, and nothing is read relative to the workflow.

Invariants:
- pure: the input document is never mutated; the result is a new document, and a pack file's
  bytes are the ones resolution verified against the manifest's digests (which the manifest
  digest, and so the lock, pins);
- a qualified name that collides with one the workflow defines is a ``schema_violation``;
- the merged definitions are part of the compiled workflow, so the workflow digest, the plan
  digest and the definition fingerprints change whenever a pack's content changes.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agentctl.core.packs.resolve import ResolvedPack
from agentctl.errors import Diagnostic, ValidationError

_SECTIONS = (
    ("actions", "actions"),
    ("agents", "agents"),
    ("tools", "tools"),
    ("workflows", "subworkflows"),
)
_USES_KIND = {"action": "actions", "agent": "agents", "workflow": "workflows"}
PACK_FILE_SCHEME = "pack://"


def _missing(pack: str, kind: str, name: str) -> ValidationError:
    message = (
        f"pack {pack}: {kind[:-1]} {name!r} is neither exported by the pack nor by one of "
        "its declared dependencies"
    )
    diag = Diagnostic(code="missing_reference", message=message, path=f"pack {pack}")
    return ValidationError(message, diagnostics=[diag])


def pack_file_key(pack: str, path: str) -> str:
    """The name a pack's declared file ``path`` has in the merged document and in the captured
    sources (``CapturedVars.files``/``instructions``): unique per pack, and never a path a
    workflow can write (a workflow's source file may not be a URL), so two packs, or a pack
    and the workflow, naming the same relative file never share one."""
    return f"{PACK_FILE_SCHEME}{pack}/{path}"


def _undeclared(pack: ResolvedPack, where: str, path: str) -> ValidationError:
    message = (
        f"pack {pack.name}: {where} reads {path!r}, which the manifest's `files` does not declare"
    )
    diag = Diagnostic(
        code="schema_violation",
        message=message,
        file=pack.loaded.file,
        path=f"pack {pack.name}",
        help="a pack reads only its declared files: add the path, relative to the manifest's "
        "directory, to `files` with its sha256: digest",
    )
    return ValidationError(message, diagnostics=[diag])


class _Qualifier:
    """Qualifies the references inside one pack."""

    def __init__(self, pack: ResolvedPack, by_name: dict[str, ResolvedPack]) -> None:
        self.pack = pack
        self.deps = {d: by_name[d] for d in pack.loaded.manifest.dependencies}
        self.files: dict[str, bytes] = {}  # the declared files read, by ``pack_file_key``

    def file(self, where: str, path: str) -> str:
        """The key of a declared file the pack reads, its verified bytes kept in ``files``."""
        data = self.pack.assets.get(path)
        if data is None:
            raise _undeclared(self.pack, where, path)
        key = pack_file_key(self.pack.name, path)
        self.files[key] = data
        return key

    def sources(self, where: str, holder: dict[str, Any]) -> None:
        """``holder``'s ``instructionsFile`` and ``varsFiles`` renamed to their keys."""
        if isinstance(holder.get("instructionsFile"), str):
            holder["instructionsFile"] = self.file(where, holder["instructionsFile"])
        if holder.get("varsFiles"):
            holder["varsFiles"] = [self.file(where, str(p)) for p in holder["varsFiles"]]

    def name(self, kind: str, ref: str) -> str:
        if ref in self.pack.loaded.document[kind]:
            return f"{self.pack.name}.{ref}"
        for dep_name, dep in self.deps.items():
            prefix = dep_name + "."
            if ref.startswith(prefix) and ref[len(prefix) :] in dep.loaded.document[kind]:
                return ref
        raise _missing(self.pack.name, kind, ref)

    def uses(self, value: str) -> str:
        kind, sep, ref = value.partition(":")
        if not sep or kind not in _USES_KIND:
            return value  # router
        return f"{kind}:{self.name(_USES_KIND[kind], ref)}"

    def task(self, where: str, task: dict[str, Any]) -> dict[str, Any]:
        task["uses"] = self.uses(task["uses"])
        self.sources(f"{where}.tasks.{task.get('id')}", task)
        compensate = task.get("compensate")
        if isinstance(compensate, dict) and isinstance(compensate.get("uses"), str):
            compensate["uses"] = self.uses(compensate["uses"])
        return task

    def item(self, section: str, name: str, value: dict[str, Any]) -> dict[str, Any]:
        item = copy.deepcopy(value)
        where = f"{section}.{name}"
        if section == "agents":
            item["tools"] = [self.name("tools", t) for t in item.get("tools") or []]
            self.sources(where, item)
        elif section == "workflows":
            item["tasks"] = [self.task(where, t) for t in item.get("tasks") or []]
        return item


@dataclass(frozen=True)
class Merged:
    """The merged document and the bytes of the pack files it reads, by ``pack_file_key``."""

    document: dict[str, Any]
    files: Mapping[str, bytes]


def merge_packs(document: dict[str, Any], graph: list[ResolvedPack]) -> Merged:
    """``document`` with every exported definition of ``graph`` under its qualified name."""
    merged = copy.deepcopy(document)
    files: dict[str, bytes] = {}
    spec = merged["spec"]
    by_name = {p.name: p for p in graph}
    for pack in graph:
        qualify = _Qualifier(pack, by_name)
        for section, target in _SECTIONS:
            table = spec.setdefault(target, {})
            for name, value in sorted(pack.loaded.document[section].items()):
                qualified = f"{pack.name}.{name}"
                if qualified in table:
                    message = f"`{target}.{qualified}` is defined by the workflow and by a pack"
                    diag = Diagnostic(
                        code="schema_violation", message=message, path=f"spec.{target}"
                    )
                    raise ValidationError(message, diagnostics=[diag])
                table[qualified] = qualify.item(section, name, value)
        files.update(qualify.files)
    return Merged(merged, files)
