"""Merging resolved packs into a workflow document, before it is compiled.

Every definition a pack exports is added to the document under its qualified name
``<pack-name>.<item-name>``: ``actions`` and ``agents`` (a task uses ``action:P.N`` /
``agent:P.N``), ``tools`` (an agent lists ``P.N``) and ``workflows`` (added to
``spec.subworkflows``; a task uses ``workflow:P.N``). Inside a pack, references are
pack-qualified as they are loaded: a name the pack exports itself becomes ``P.name``, a name
already qualified by one of the pack's declared dependencies stays as written; anything else
is a ``missing_reference``. Agents keep their ``provider``: the invoking workflow supplies
providers and policy, and a pack's ``policyDefaults`` never widen it.

Invariants:
- pure: the input document is never mutated; the result is a new document;
- a qualified name that collides with one the workflow defines is a ``schema_violation``;
- the merged definitions are part of the compiled workflow, so the workflow digest, the plan
  digest and the definition fingerprints change whenever a pack's content changes.
"""

from __future__ import annotations

import copy
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


def _missing(pack: str, kind: str, name: str) -> ValidationError:
    message = (
        f"pack {pack}: {kind[:-1]} {name!r} is neither exported by the pack nor by one of "
        "its declared dependencies"
    )
    diag = Diagnostic(code="missing_reference", message=message, path=f"pack {pack}")
    return ValidationError(message, diagnostics=[diag])


def _file_refs(pack: str, where: str) -> ValidationError:
    # Declared asset files are verified by digest, but agents and tasks of a pack do not read
    # them yet: refusing beats reading them relative to the wrong directory.
    message = f"pack {pack}: {where} reads instructionsFile/varsFiles, not supported in packs"
    diag = Diagnostic(
        code="unsupported_capability",
        message=message,
        path=f"pack {pack}",
        help="inline the instructions or vars in the pack manifest",
    )
    return ValidationError(message, diagnostics=[diag])


class _Qualifier:
    """Qualifies the references inside one pack."""

    def __init__(self, pack: ResolvedPack, by_name: dict[str, ResolvedPack]) -> None:
        self.pack = pack
        self.deps = {d: by_name[d] for d in pack.loaded.manifest.dependencies}

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

    def task(self, task: dict[str, Any]) -> dict[str, Any]:
        task["uses"] = self.uses(task["uses"])
        compensate = task.get("compensate")
        if isinstance(compensate, dict) and isinstance(compensate.get("uses"), str):
            compensate["uses"] = self.uses(compensate["uses"])
        return task

    def item(self, section: str, name: str, value: dict[str, Any]) -> dict[str, Any]:
        item = copy.deepcopy(value)
        files = [item.get("instructionsFile"), *(item.get("varsFiles") or [])]
        for task in item.get("tasks") or []:
            files.extend(task.get("varsFiles") or [])
        if any(files):
            raise _file_refs(self.pack.name, f"{section}.{name}")
        if section == "agents":
            item["tools"] = [self.name("tools", t) for t in item.get("tools") or []]
        elif section == "workflows":
            item["tasks"] = [self.task(t) for t in item.get("tasks") or []]
        return item


def merge_packs(document: dict[str, Any], graph: list[ResolvedPack]) -> dict[str, Any]:
    """``document`` with every exported definition of ``graph`` under its qualified name."""
    merged = copy.deepcopy(document)
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
    return merged
