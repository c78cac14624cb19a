"""Reading packs from disk for a workflow: sources, archives, the lock file, the modes.

Job: the I/O side of packs. ``core/packs`` decides (resolution, integrity, trust, lock
drift, merging); this module reads the bytes it decides about and writes the lock.

- ``source.path``: a manifest file, a directory holding ``agentctl.pack.yaml`` (or
  ``source.manifest``), or a ``.tar.gz``/``.tgz`` archive read in memory (never unpacked to
  disk) with ``manifest`` naming the manifest inside it. Relative paths resolve from the
  declaring document's directory, and every path must stay beneath the workflow's directory
  (symlinks resolved).
- ``source.archive`` / ``source.git`` are network sources. This version fetches none: with
  ``--offline`` they are refused as needing the network, otherwise as not yet supported.
  Neither is ever read as a local path.
- ``agentctl.pack.lock`` beside the workflow: when it exists, every check/plan/run verifies
  the resolved graph against it; ``--locked`` requires it and rejects any drift.

Invariants: everything here happens before compiling, so a refusal creates no state; every
refusal is a ``ValidationError`` (exit 2) or, for trust, a ``BlockedError`` (exit 3), located
at the workflow entry when there is one; bounds: manifest ≤ 1 MiB, declared files ≤ 1 MiB each
and 16 MiB in all, archives ≤ 16 MiB compressed, ≤ 64 MiB expanded, ≤ 1,024 entries.
"""

from __future__ import annotations

import dataclasses
import io
import tarfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar

from agentctl.clikit import read_cli_file
from agentctl.core.dsl.packs import DEFAULT_MANIFEST, PackSource
from agentctl.core.jsonvalue import JsonObject
from agentctl.core.packs.integrity import digest_of, normalize_integrity
from agentctl.core.packs.lock import LOCK_FILE, lock_drift, parse_lock
from agentctl.core.packs.manifest import check_asset_path, load_manifest
from agentctl.core.packs.merge import merge_packs
from agentctl.core.packs.resolve import Fetched, ResolvedPack, fail, resolve_graph, roots_of
from agentctl.core.packs.trust import apply_trust
from agentctl.errors import AgentctlError, Diagnostic, ValidationError

MIB = 1024 * 1024
MAX_ASSET_BYTES = MIB
MAX_ASSETS_TOTAL = 16 * MIB
MAX_ARCHIVE_BYTES = 16 * MIB
MAX_EXPANDED_BYTES = 64 * MIB
MAX_ARCHIVE_ENTRIES = 1024
ARCHIVE_SUFFIXES = (".tar.gz", ".tgz")


@dataclass
class PackMode:
    """The global ``--offline`` / ``--locked`` flags of this invocation."""

    offline: bool = False
    locked: bool = False


MODE = PackMode()


@dataclass(frozen=True)
class _Files:
    """A pack's bytes by relative path: a directory on disk or an archive read in memory."""

    root: Path | None
    members: dict[str, bytes] | None = None

    def read(self, rel: str) -> bytes | None:
        if self.members is not None:
            return self.members.get(rel)
        assert self.root is not None
        target = (self.root / rel).resolve()
        if not target.is_relative_to(self.root.resolve()) or not target.is_file():
            return None
        data = read_cli_file(target, "pack file")
        return data if len(data) <= MAX_ASSET_BYTES else None


class Fetcher:
    """The ``Fetch`` of ``resolve_graph`` for one workflow directory (``root``)."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()

    def __call__(self, source: PackSource, base: str, origin: str) -> Fetched:
        if source.path is None:
            raise _remote(source, origin)
        target = (Path(base) / source.path).resolve()
        if not target.is_relative_to(self.root):
            raise fail(
                f"pack source {source.path} is outside the workflow's directory {self.root}",
                origin,
                help="keep packs beneath the workflow directory (vendor them there)",
            )
        if not target.exists():
            raise fail(f"pack source {source.path} does not exist", origin)
        if target.is_file() and target.name.endswith(ARCHIVE_SUFFIXES):
            return self._archive(source, target, origin)
        return self._local(source, target, origin)

    def _location(self, source: PackSource, target: Path) -> dict[str, Any]:
        where: dict[str, Any] = {"path": target.relative_to(self.root).as_posix()}
        if source.manifest is not None:
            where["manifest"] = source.manifest
        if source.integrity is not None:  # an archive's own digest, when the workflow pins it
            where["integrity"] = normalize_integrity(source.integrity)
        return where

    def _local(self, source: PackSource, target: Path, origin: str) -> Fetched:
        if target.is_dir():
            manifest = target / (source.manifest or DEFAULT_MANIFEST)
            files = _Files(target)
        elif source.manifest is not None:
            raise fail("`manifest` applies to a pack directory or archive", origin)
        else:
            manifest, files = target, _Files(target.parent)
        if not manifest.resolve().is_relative_to(self.root) or not manifest.is_file():
            raise fail(f"pack manifest {manifest} is missing or outside the workflow", origin)
        loaded = load_manifest(read_cli_file(manifest, "pack manifest"), str(manifest))
        return Fetched(
            loaded, self._location(source, target), str(manifest.parent), _assets(loaded, files)
        )

    def _archive(self, source: PackSource, target: Path, origin: str) -> Fetched:
        data = target.read_bytes() if target.stat().st_size <= MAX_ARCHIVE_BYTES else None
        if data is None:
            raise fail(f"pack archive {target} is larger than {MAX_ARCHIVE_BYTES} bytes", origin)
        if source.integrity is not None and digest_of(data) != normalize_integrity(
            source.integrity
        ):
            raise fail(
                f"pack archive {target}: integrity mismatch: the archive is {digest_of(data)}",
                origin,
            )
        members = read_archive(data, str(target), origin)
        name = source.manifest or DEFAULT_MANIFEST
        manifest = members.get(name)
        if manifest is None:
            raise fail(f"pack archive {target} holds no {name}", origin)
        loaded = load_manifest(manifest, f"{target}!{name}")
        where = self._location(source, target)
        return Fetched(loaded, where, str(target.parent), _assets(loaded, _Files(None, members)))


def _remote(source: PackSource, origin: str) -> ValidationError:
    url = source.archive or source.git
    if MODE.offline:
        return fail(
            f"pack source {url} needs the network, and --offline forbids it "
            "(there is no cached copy)",
            origin,
            help="vendor the pack beneath the workflow and reference it with source.path",
        )
    message = f"fetching remote pack sources ({url}) is not supported by this version"
    diag = Diagnostic(
        code="unsupported_capability",
        message=message,
        path=origin,
        help="download the pack, verify its digest and reference it with source.path",
    )
    return ValidationError(message, diagnostics=[diag])


def _assets(loaded: Any, files: _Files) -> dict[str, bytes | None]:
    found: dict[str, bytes | None] = {}
    total = 0
    for rel in sorted(loaded.manifest.files):
        data = files.read(rel)
        total += len(data or b"")
        if total > MAX_ASSETS_TOTAL:
            raise ValidationError(f"pack {loaded.manifest.name}: declared files exceed 16 MiB")
        found[rel] = data
    return found


def read_archive(data: bytes, label: str, origin: str) -> dict[str, bytes]:
    """A tar-gzip archive's regular files by normalized path; links and escapes refused."""
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
            return _members(archive, label, origin)
    except (tarfile.TarError, EOFError, zlib.error) as exc:
        raise fail(f"pack archive {label} is not a readable tar-gzip file: {exc}", origin) from None


def _members(archive: tarfile.TarFile, label: str, origin: str) -> dict[str, bytes]:
    members = archive.getmembers()
    if len(members) > MAX_ARCHIVE_ENTRIES:
        raise fail(f"pack archive {label} has more than {MAX_ARCHIVE_ENTRIES} entries", origin)
    found: dict[str, bytes] = {}
    total = 0
    for member in members:
        if member.isdir():
            continue
        name = str(PurePosixPath(member.name.removeprefix("./")))
        try:
            check_asset_path(name)
        except ValueError:
            raise fail(f"pack archive {label}: unsafe entry {member.name!r}", origin) from None
        if not member.isfile():
            raise fail(f"pack archive {label}: {name} is a link or special file", origin)
        total += member.size
        if total > MAX_EXPANDED_BYTES:
            raise fail(f"pack archive {label} expands beyond {MAX_EXPANDED_BYTES} bytes", origin)
        extracted = archive.extractfile(member)
        found[name] = extracted.read() if extracted is not None else b""
    return found


# --------------------------------------------------------------------------- workflows


def lock_path(workflow: Path) -> Path:
    return workflow.resolve().parent / LOCK_FILE


def resolve_for(loaded: Any, workflow: Path) -> list[ResolvedPack]:
    """The verified pack graph of a loaded workflow (no lock or trust checks)."""
    root = workflow.resolve().parent
    roots = roots_of(loaded.workflow.spec.packs, str(root), str(workflow))
    return _located(lambda: resolve_graph(roots, Fetcher(root)), loaded)


T = TypeVar("T")


def _located(call: Callable[[], T], loaded: Any) -> T:
    """Run ``call``; its diagnostics that name a workflow path get a line and column."""
    try:
        return call()
    except AgentctlError as exc:
        exc.diagnostics = [_locate(d, loaded) for d in exc.diagnostics]
        raise


def _locate(diag: Diagnostic, loaded: Any) -> Diagnostic:
    if diag.line is not None or not (diag.path or "").startswith("spec."):
        return diag
    line, column = loaded.locate(diag.path) or (None, None)
    return dataclasses.replace(diag, file=loaded.file, line=line, column=column)


def check_lock(
    workflow: Path,
    graph: list[ResolvedPack],
    *,
    strict: bool,
    asker: str = "--locked",
    remedy: str = "",
) -> None:
    """Verify ``graph`` against the lock beside ``workflow``; ``strict`` (``--locked``): the
    lock must exist and may hold no entry the graph no longer reaches. ``asker`` names what
    needs the lock in the refusal (``--locked``, or the command that verifies it), ``remedy``
    what makes one (default: ``packs lock``, then commit it)."""
    path = lock_path(workflow)
    if not path.exists():
        if strict:
            how = remedy or f"run `agentctl packs lock {workflow}` and commit it"
            raise ValidationError(f"{asker} needs {LOCK_FILE} beside {workflow}; {how}")
        return
    lock = parse_lock(read_cli_file(path, "pack lock"), str(path))
    drift = lock_drift(lock, graph, strict=strict)
    if drift:
        raise ValidationError(
            f"{path} does not match the workflow's packs: {drift[0]}"
            + (f" (and {len(drift) - 1} more)" if len(drift) > 1 else ""),
            data={"drift": drift},
            diagnostics=[
                Diagnostic(
                    code="schema_violation",
                    message=d,
                    file=str(path),
                    help=f"review the change, then run `agentctl packs update {workflow}`",
                )
                for d in drift
            ],
        )


def _legacy_warnings(loaded: Any) -> list[Diagnostic]:
    found = []
    for index, ref in enumerate(loaded.workflow.spec.packs):
        if ref.path is not None:
            where = f"spec.packs.{index}.path"
            line, column = loaded.locate(where) or (None, None)
            found.append(
                Diagnostic(
                    code="migration_required",
                    severity="warning",
                    message=f"pack {ref.name}: legacy `path` + `integrity` reference",
                    file=loaded.file,
                    line=line,
                    column=column,
                    path=where,
                    help="write source: { path: … } and run `agentctl packs lock`",
                )
            )
    return found


def with_packs(loaded: Any, workflow: Path) -> Any:
    """``loaded`` with its packs resolved, verified, trusted and merged into the document;
    ``pack_files``: the verified bytes of the pack files the merged document reads."""
    spec = loaded.workflow.spec
    if not spec.packs:
        if MODE.locked and lock_path(workflow).exists():
            check_lock(workflow, [], strict=True)
        return loaded
    graph = resolve_for(loaded, workflow)
    check_lock(workflow, graph, strict=MODE.locked)
    trusted = _located(lambda: apply_trust(graph, spec.pack_trust, loaded.file), loaded)
    trusted = [_locate(d, loaded) for d in trusted]
    merged = _located(lambda: merge_packs(loaded.document, graph), loaded)
    warnings = [*loaded.warnings, *_legacy_warnings(loaded), *trusted]
    return dataclasses.replace(
        loaded, document=merged.document, warnings=warnings, pack_files=merged.files
    )


def lock_text(document: JsonObject) -> str:
    """The YAML text of ``agentctl.pack.lock`` holding a lock ``document`` (``build_lock``,
    ``scoped_lock``)."""
    import yaml

    return str(yaml.safe_dump(document, sort_keys=False, allow_unicode=True))
