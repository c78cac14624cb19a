"""Resolving a workflow's pack graph: every requirement to one concrete, verified pack.

Job: walk ``spec.packs`` and, transitively, each manifest's ``dependencies``; for each
requirement ask the injected ``Fetch`` (the only I/O, done outside core) for the manifest its
source holds, then check it: the name matches, the version satisfies the constraint, the
pack is compatible with this agentctl, the integrity (when written) matches, every declared
asset file matches its digest. The result is the graph sorted by pack name; each pack keeps
its verified asset bytes (``ResolvedPack.assets``), the only copy a compile reads.

Invariants:
- deterministic: every requirement names one immutable candidate; there is no search order,
  no registry and no "newest" — the same sources give the same graph;
- one pack name ⇒ one pack: two requirements of a name must reach the same source and bytes
  (else a conflict), and the dependency edges must be acyclic;
- every failure is a ``ValidationError`` (exit 2) whose diagnostic ``path`` names the
  workflow entry (``spec.packs.N…``) or the manifest that declared the requirement.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from agentctl.core.dsl.packs import PackRef, PackSource
from agentctl.core.jsonvalue import JsonObject
from agentctl.core.packs.integrity import digest_of, normalize_integrity
from agentctl.core.packs.manifest import LoadedManifest
from agentctl.core.packs.semver import parse_constraint, parse_version
from agentctl.errors import Diagnostic, ValidationError

# The agentctl contract version pack ``agentctl`` constraints are checked against: the
# original release whose workflow language and CLI this implementation follows.
COMPAT_VERSION = "0.3.0"
PROCESS_KINDS = frozenset({"builtin.shell.exec", "extension.process"})


@dataclass(frozen=True)
class Requirement:
    """One pack asked for: by the workflow (``origin`` = ``spec.packs.N``) or by a pack."""

    name: str
    constraint: str
    source: PackSource
    integrity: str | None
    origin: str
    base: str  # the declaring document's directory, opaque to core (the fetcher's key)
    file: str | None = None  # the declaring document, for diagnostics


@dataclass(frozen=True)
class Fetched:
    """What a source holds: the manifest, where it lives, and its declared asset bytes."""

    loaded: LoadedManifest
    location: JsonObject  # the exact source, as the lock records it
    base: str  # where the pack's own relative paths resolve
    assets: Mapping[str, bytes | None] = field(default_factory=dict)  # None: missing


Fetch = Callable[[PackSource, str, str], Fetched]  # (source, base, origin) -> Fetched


@dataclass(frozen=True)
class ResolvedPack:
    """A pack chosen for the lock: version, location, integrity and its loaded manifest."""

    name: str
    version: str
    location: JsonObject
    integrity: str
    compatibility: str
    dependencies: dict[str, str]
    loaded: LoadedManifest
    roots: tuple[str, ...]  # the workflow entries that name it directly (may be empty)
    # The declared asset files' bytes by manifest path, each checked against its digest:
    # what a pack agent's or task's instructionsFile/varsFiles read (never the disk again).
    assets: Mapping[str, bytes] = field(default_factory=dict, repr=False)

    @property
    def process_capable(self) -> bool:
        """It can start host processes or containers (trust treats it more strictly)."""
        return any(
            a.kind in PROCESS_KINDS or a.isolation == "container"
            for a in self.loaded.manifest.actions.values()
        )


def fail(
    message: str,
    origin: str | None,
    file: str | None = None,
    help: str | None = None,
    code: str = "schema_violation",
) -> ValidationError:
    diag = Diagnostic(code=code, message=message, file=file, path=origin, help=help)
    return ValidationError(message, diagnostics=[diag])


def roots_of(packs: list[PackRef], base: str, file: str | None) -> list[Requirement]:
    """The workflow's own requirements; a legacy ``path`` entry pins its exact version."""
    found = []
    for index, ref in enumerate(packs):
        constraint = ref.version if ref.source is not None else f"={ref.version}"
        found.append(
            Requirement(
                ref.name,
                constraint,
                ref.effective_source(),
                ref.integrity,
                f"spec.packs.{index}",
                base,
                file,
            )
        )
    return found


def check_fetched(req: Requirement, got: Fetched) -> None:
    """One fetched pack against its requirement (name, version, compatibility, digests)."""
    manifest = got.loaded.manifest
    where = got.loaded.file
    if manifest.name != req.name:
        raise fail(f"{where} holds pack {manifest.name!r}, not {req.name!r}", req.origin, req.file)
    if not parse_constraint(req.constraint).allows(parse_version(manifest.version)):
        raise fail(
            f"pack {req.name} is version {manifest.version}, which does not satisfy "
            f"{req.constraint!r}",
            req.origin,
            req.file,
        )
    if not parse_constraint(manifest.agentctl).allows(parse_version(COMPAT_VERSION)):
        raise fail(
            f"pack {req.name} {manifest.version} requires agentctl {manifest.agentctl!r}; "
            f"this agentctl implements the {COMPAT_VERSION} contract",
            req.origin,
            req.file,
        )
    if req.integrity is not None and normalize_integrity(req.integrity) != got.loaded.digest:
        raise fail(
            f"pack {req.name}: integrity mismatch: expected {normalize_integrity(req.integrity)}, "
            f"the manifest {where} is {got.loaded.digest}",
            f"{req.origin}.integrity" if req.origin.startswith("spec.") else req.origin,
            req.file,
            help="the pack changed since it was pinned; review it, then update the digest",
        )
    _check_assets(req, got)


def _check_assets(req: Requirement, got: Fetched) -> None:
    for path, digest in sorted(got.loaded.manifest.files.items()):
        data = got.assets.get(path)
        if data is None:
            raise fail(f"pack {req.name}: declared file {path} is missing", req.origin, req.file)
        if digest_of(data) != normalize_integrity(digest):
            raise fail(
                f"pack {req.name}: declared file {path} does not match its digest "
                f"(expected {normalize_integrity(digest)}, found {digest_of(data)})",
                req.origin,
                req.file,
            )


def _dependencies(name: str, got: Fetched) -> list[Requirement]:
    return [
        Requirement(
            dep,
            spec.version,
            spec.source,
            None,
            f"pack {name} dependency {dep}",
            got.base,
            got.loaded.file,
        )
        for dep, spec in sorted(got.loaded.manifest.dependencies.items())
    ]


def resolve_graph(roots: list[Requirement], fetch: Fetch) -> list[ResolvedPack]:
    """The complete graph, sorted by pack name; raises ``ValidationError`` on any problem."""
    found: dict[str, ResolvedPack] = {}
    queue = list(roots)
    while queue:
        req = queue.pop(0)
        got = fetch(req.source, req.base, req.origin)
        check_fetched(req, got)
        root = (req.origin,) if req.origin.startswith("spec.") else ()
        known = found.get(req.name)
        if known is not None:
            if known.location != got.location or known.integrity != got.loaded.digest:
                raise fail(
                    f"pack {req.name} is required from two different sources or contents "
                    f"({known.location} and {got.location})",
                    req.origin,
                    req.file,
                )
            found[req.name] = _with_roots(known, root)
            continue
        found[req.name] = _resolved(req.name, got, root)
        queue.extend(_dependencies(req.name, got))
    graph = [
        replace(p, dependencies={d: found[d].version for d in p.loaded.manifest.dependencies})
        for p in (found[name] for name in sorted(found))
    ]
    _check_acyclic(graph)
    return graph


def _resolved(name: str, got: Fetched, roots: tuple[str, ...]) -> ResolvedPack:
    manifest = got.loaded.manifest
    return ResolvedPack(
        name=name,
        version=manifest.version,
        location=got.location,
        integrity=got.loaded.digest,
        compatibility=manifest.agentctl,
        dependencies={},  # set once every dependency's concrete version is known
        loaded=got.loaded,
        roots=roots,
        assets={path: data for path, data in got.assets.items() if data is not None},
    )


def _with_roots(pack: ResolvedPack, roots: tuple[str, ...]) -> ResolvedPack:
    return replace(pack, roots=pack.roots + roots)


def _check_acyclic(graph: list[ResolvedPack]) -> None:
    by_name = {p.name: p for p in graph}
    state: dict[str, int] = {}

    def visit(name: str, trail: list[str]) -> None:
        if state.get(name) == 2:
            return
        if state.get(name) == 1:
            cycle = " -> ".join([*trail[trail.index(name) :], name])
            raise fail(f"pack dependency cycle: {cycle}", f"pack {name}", code="dependency_cycle")
        state[name] = 1
        for dep in sorted(by_name[name].dependencies):
            visit(dep, [*trail, name])
        state[name] = 2

    for pack in graph:
        visit(pack.name, [])
