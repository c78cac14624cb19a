"""``agentctl packs inspect|verify|lock|update|verify-lock`` (issue 14 item 3).

- ``inspect PACK``: the manifest of a pack (file, directory or ``.tar.gz``), strictly parsed,
  with its integrity, its compatibility with this agentctl and what it exports;
- ``verify PACK --integrity D``: the manifest digest equals ``D`` and every declared file
  matches its digest;
- ``lock WORKFLOW``: resolve the workflow's complete pack graph and write
  ``agentctl.pack.lock`` beside it;
- ``update WORKFLOW [--pack NAME]``: resolve again and rewrite the lock, reporting what
  changed (``--pack`` names a root the workflow lists; the whole graph stays consistent);
- ``verify-lock WORKFLOW``: the lock exists and describes the resolved graph exactly.

Invariants: no command here creates run state or touches the database; a refusal is exit 2
(or 3 for trust), and only ``lock`` / ``update`` write, and only the lock file (atomically).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from agentctl.cli_docs import _write as write_atomically
from agentctl.clikit import deliver, path_parser, read_cli_file
from agentctl.core.jsonvalue import JsonObject, JsonValue, as_list
from agentctl.errors import ValidationError
from agentctl.render import Outcome

packs_app = typer.Typer(
    help="Inspect and verify reusable packs; lock a workflow's pack graph.",
    no_args_is_help=True,
)

PackArg = Annotated[
    Path,
    typer.Argument(
        parser=path_parser("pack", file=False),
        help="Pack manifest file, directory or .tar.gz archive.",
    ),
]
WorkflowArg = Annotated[
    Path, typer.Argument(parser=path_parser("workflow file"), help="Workflow YAML file.")
]


def _standalone(path: Path) -> Any:
    """Fetch the pack at ``path`` on its own (its directory is the containment root)."""
    from agentctl.core.dsl.packs import PackSource
    from agentctl.packsource import Fetcher

    if not path.exists():
        raise ValidationError(f"pack {path} does not exist")
    target = path.resolve()
    root = target if target.is_dir() else target.parent
    return Fetcher(root)(PackSource(path=str(target)), str(root), "pack")


def _exports(pack: str, manifest: Any) -> dict[str, list[str]]:
    return {
        key: [f"{pack}.{name}" for name in sorted(getattr(manifest, key))]
        for key in ("actions", "agents", "tools", "workflows")
    }


@packs_app.command("inspect")
def inspect_cmd(pack: PackArg) -> None:
    """Strictly parse a pack manifest; show its identity, integrity and exports."""
    from agentctl.core.packs.resolve import COMPAT_VERSION
    from agentctl.core.packs.semver import parse_constraint, parse_version

    got = _standalone(pack)
    manifest, document = got.loaded.manifest, got.loaded.document
    compatible = parse_constraint(manifest.agentctl).allows(parse_version(COMPAT_VERSION))
    if not compatible:
        raise ValidationError(
            f"pack {manifest.name} {manifest.version} requires agentctl {manifest.agentctl!r}; "
            f"this agentctl implements the {COMPAT_VERSION} contract"
        )
    data = {
        "name": manifest.name,
        "version": manifest.version,
        "agentctl": manifest.agentctl,
        "compatible": compatible,
        "integrity": got.loaded.digest,
        "exports": _exports(manifest.name, manifest),
        "dependencies": document["dependencies"],
        "files": document["files"],
        "capabilities": document["capabilities"],
        "providers": document["providers"],
        "policyDefaults": document["policyDefaults"],
    }

    deliver(Outcome("PackInspection", data, human=lambda _s: _inspection_text(data)))


def _inspection_text(data: dict[str, Any]) -> str:
    """The human ``packs inspect``: identity, integrity, exports, what it depends on (each
    with its constraint and source) and the files its digest binds."""
    lines = [f"pack {data['name']} {data['version']} (agentctl {data['agentctl']})"]
    lines.append(f"integrity {data['integrity']}")
    lines += [f"{k}: {', '.join(v)}" for k, v in data["exports"].items() if v]
    for name, dep in sorted(data["dependencies"].items()):
        source = ", ".join(f"{k} {v}" for k, v in dep["source"].items() if v is not None)
        lines.append(f"depends on {name} {dep['version']} ({source})")
    if data["files"]:
        lines.append(f"files: {', '.join(sorted(data['files']))}")
    return "\n".join(lines)


@packs_app.command("verify")
def verify_cmd(
    pack: PackArg,
    integrity: Annotated[
        str, typer.Option("--integrity", help="Expected manifest digest (sha256:<hex>).")
    ],
) -> None:
    """Check a pack's manifest digest and every file it declares."""
    from agentctl.core.dsl.packs import PackSource
    from agentctl.core.packs.integrity import normalize_integrity
    from agentctl.core.packs.resolve import Requirement, check_fetched

    try:
        expected = normalize_integrity(integrity)
    except ValueError as exc:
        raise ValidationError(f"--integrity: {exc}") from None
    got = _standalone(pack)
    name = got.loaded.manifest.name
    check_fetched(
        Requirement(name, "*", PackSource(path=str(pack)), expected, "pack", "", str(pack)), got
    )
    data = {
        "valid": True,
        "name": name,
        "version": got.loaded.manifest.version,
        "integrity": got.loaded.digest,
        "files": sorted(got.loaded.manifest.files),
    }
    deliver(Outcome("PackVerification", data, human=lambda _s: f"ok: {name} {expected}"))


def _graph(workflow: Path, *, trust: bool = True) -> tuple[Any, list[Any]]:
    from agentctl.core.dsl import load_workflow
    from agentctl.core.packs.trust import apply_trust
    from agentctl.packsource import resolve_for

    loaded = load_workflow(
        read_cli_file(workflow, "workflow file", diagnosed=True), file=str(workflow)
    )
    graph = resolve_for(loaded, workflow)
    if trust:
        apply_trust(graph, loaded.workflow.spec.pack_trust, loaded.file)
    return loaded, graph


def _write_lock(workflow: Path, document: JsonObject) -> tuple[Path, list[JsonValue]]:
    """Write the lock ``document`` beside ``workflow``: its path and entries."""
    from agentctl.packsource import lock_path, lock_text

    path = lock_path(workflow)
    write_atomically(path, lock_text(document))
    return path, list(as_list(document["packs"]))


@packs_app.command("lock")
def lock_cmd(workflow: WorkflowArg) -> None:
    """Resolve the complete pack graph and write agentctl.pack.lock beside the workflow."""
    from agentctl.core.packs.lock import build_lock
    from agentctl.packsource import MODE, check_lock

    _loaded, graph = _graph(workflow)
    if MODE.locked:  # --locked: the existing lock must already say exactly this
        # Under --locked, `packs lock` only checks: the remedy for a missing lock is to write
        # one, i.e. this very command without --locked.
        write = f"`agentctl packs lock {workflow}` without --locked writes it"
        check_lock(workflow, graph, strict=True, remedy=write)
    path, entries = _write_lock(workflow, build_lock(graph))
    data = {"lockfile": str(path), "packs": entries}
    deliver(Outcome("PackLock", data, human=lambda _s: f"wrote {path} ({len(graph)} packs)"))


def _changes(old: dict[str, Any], new: list[Any]) -> dict[str, list[Any]]:
    current = {e["name"]: e for e in new}
    changed = [
        {
            "name": n,
            "from": {"version": old[n]["version"], "integrity": old[n]["integrity"]},
            "to": {"version": e["version"], "integrity": e["integrity"]},
        }
        for n, e in current.items()
        if n in old and (old[n]["version"], old[n]["integrity"]) != (e["version"], e["integrity"])
    ]
    return {
        "added": sorted(n for n in current if n not in old),
        "removed": sorted(n for n in old if n not in current),
        "changed": changed,
    }


@packs_app.command("update")
def update_cmd(
    workflow: WorkflowArg,
    pack: Annotated[
        str | None, typer.Option("--pack", help="A pack the workflow lists (a root).")
    ] = None,
) -> None:
    """Resolve the pack graph again and rewrite agentctl.pack.lock; reports what changed.
    With ``--pack``, only that pack and what it depends on are taken as resolved now."""
    from agentctl.core.packs.lock import build_lock, lock_entries, parse_lock, scoped_lock
    from agentctl.packsource import MODE, lock_path

    if MODE.locked:
        raise ValidationError("--locked forbids changing agentctl.pack.lock; drop --locked")
    loaded, graph = _graph(workflow)
    roots = [ref.name for ref in loaded.workflow.spec.packs]
    if pack is not None and pack not in roots:
        raise ValidationError(f"--pack {pack}: the workflow lists no such pack ({roots})")
    path = lock_path(workflow)
    kept: dict[str, JsonObject] = {}
    if path.exists():
        kept = lock_entries(parse_lock(read_cli_file(path, "pack lock"), str(path)))
    document = build_lock(graph) if pack is None else scoped_lock(graph, kept, pack)
    _, entries = _write_lock(workflow, document)
    data = {"lockfile": str(path), "pack": pack, "packs": entries, **_changes(kept, entries)}
    deliver(Outcome("PackUpdate", data, human=lambda _s: _update_text(data)))


def _update_text(data: dict[str, Any]) -> str:
    """The human ``packs update``: the lock it rewrote and what changed in it."""
    lines = [f"updated {data['lockfile']}"]
    for c in data["changed"]:
        old, new = c["from"], c["to"]
        lines.append(f"  changed  {c['name']} {old['version']} -> {new['version']}")
        if old["version"] == new["version"]:  # same version, other content: say so
            lines[-1] += f" (integrity {old['integrity']} -> {new['integrity']})"
    lines += [f"  added    {name}" for name in data["added"]]
    lines += [f"  removed  {name}" for name in data["removed"]]
    if len(lines) == 1:
        lines.append("  no change")
    return "\n".join(lines)


@packs_app.command("verify-lock")
def verify_lock_cmd(workflow: WorkflowArg) -> None:
    """The lock beside the workflow exists and matches its resolved pack graph exactly."""
    from agentctl.packsource import check_lock, lock_path

    _loaded, graph = _graph(workflow)
    check_lock(workflow, graph, strict=True, asker="packs verify-lock")  # always strict
    data = {
        "valid": True,
        "lockfile": str(lock_path(workflow)),
        "packs": [{"name": p.name, "version": p.version, "integrity": p.integrity} for p in graph],
    }
    deliver(Outcome("PackLockVerification", data, human=lambda _s: "ok: the lock matches"))


def register(main_app: typer.Typer) -> None:
    main_app.add_typer(packs_app, name="packs")
