"""Pack references in a workflow (``spec.packs``), pack sources and ``spec.packTrust``.

A reference names a pack (fully qualified dotted name), a version constraint and where the
pack comes from. Sources:

- ``{path: P}``: a local manifest file, a directory holding ``agentctl.pack.yaml``, or a
  local ``.tar.gz``/``.tgz`` archive (with ``manifest``, default ``agentctl.pack.yaml``);
- ``{archive: URL, integrity, manifest}``: a remote tar-gzip archive pinned by digest;
- ``{git: URL, rev: <40 hex>, manifest}``: an exact Git commit.

The legacy form ``{name, version, path, integrity}`` (an exact version and a mandatory
manifest digest) stays readable; the loader warns ``migration_required`` about it.

Invariants:
- a URL is never taken for a path nor a path for a URL: ``path`` refuses anything with a
  URL scheme, ``archive``/``git`` refuse anything without one;
- URLs carry no credentials, query or fragment; a Git ``rev`` is a full commit id (branches
  and tags are refused);
- ``signature`` (Sigstore publisher signatures) is refused with ``unsupported_capability``:
  this version cannot verify one, and never pretends to.
"""

from __future__ import annotations

import re
from typing import Any, Literal, Self
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator

from agentctl.core.dsl.base import NonEmptyStr, StrictModel, rule_error, unsupported
from agentctl.core.packs.integrity import FORMS, normalize_integrity
from agentctl.core.packs.semver import parse_constraint, parse_version

PACK_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*(?:\.[A-Za-z][A-Za-z0-9_-]*)+\Z")
_SCHEME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_REV_RE = re.compile(r"^[0-9a-f]{40}\Z")
DEFAULT_MANIFEST = "agentctl.pack.yaml"


def check_pack_name(value: str) -> str:
    if not PACK_NAME_RE.match(value):
        raise rule_error(
            "schema_violation",
            f"pack name {value!r} is not a fully qualified dotted name",
            help="write a dotted name such as example.utility",
        )
    return value


def check_constraint(value: str) -> str:
    try:
        parse_constraint(value)
    except ValueError as exc:
        raise rule_error(
            "schema_violation", str(exc), help="write a constraint such as ^1.0 or =1.2.0"
        ) from None
    return value


def _check_exact(version: str) -> None:
    """The legacy ``path`` form pins one version (docs/packs.md): a range there would be
    taken as ``=RANGE`` and fail to parse while the packs are read."""
    try:
        parse_version(version)
    except ValueError:
        raise rule_error(
            "schema_violation",
            f"a legacy `path` pack reference takes an exact version, not {version!r}",
            at="version",
            help="write the pack's version, such as 1.2.0, or use source: { path: … } "
            "with a constraint",
        ) from None


def check_integrity(value: str | None) -> str | None:
    if value is None:
        return None
    try:
        normalize_integrity(value)
    except ValueError as exc:
        raise rule_error("schema_violation", str(exc), help=f"write {FORMS}") from None
    return value


def _check_local(path: str, instead: str) -> None:
    """A ``path`` key names a local file; a URL there is refused, ``instead`` saying what to
    write for a pack behind a URL."""
    if _SCHEME_RE.match(path):
        raise rule_error(
            "schema_violation",
            f"`path` takes a filesystem path, and {path!r} is a URL",
            at="path",
            help=f"{instead} for a pack behind a URL",
        )


def _check_url(value: str, key: str) -> None:
    if not _SCHEME_RE.match(value):
        raise rule_error(
            "schema_violation",
            f"`{key}` takes a URL, and {value!r} is a path",
            at=key,
            help="use source.path for a local file, directory or archive",
        )
    parts = urlsplit(value)
    if parts.username or parts.password or parts.query or parts.fragment or "#" in value:
        raise rule_error(
            "schema_violation",
            f"`{key}` URL {value!r} may not carry credentials, a query or a fragment",
            at=key,
        )


class PackSource(StrictModel):
    """Where a pack comes from: exactly one of ``path``, ``archive``, ``git``."""

    path: NonEmptyStr | None = None
    archive: NonEmptyStr | None = None
    git: NonEmptyStr | None = None
    rev: str | None = None
    manifest: NonEmptyStr | None = None
    integrity: str | None = None

    _integrity = field_validator("integrity")(check_integrity)

    @model_validator(mode="after")
    def _one_kind(self) -> Self:
        given = [k for k in ("path", "archive", "git") if getattr(self, k) is not None]
        if len(given) != 1:
            raise rule_error(
                "schema_violation",
                "a pack source needs exactly one of `path`, `archive` or `git`",
                help="local packs: source: { path: packs/name.pack.yaml }",
            )
        if self.path is not None:
            _check_local(self.path, "use source.archive (with integrity) or source.git (with rev)")
        if self.archive is not None:
            _check_url(self.archive, "archive")
            if self.integrity is None:
                raise rule_error(
                    "schema_violation", "an archive source needs `integrity`", at="archive"
                )
        self._check_git()
        return self

    def _check_git(self) -> None:
        if self.git is None:
            if self.rev is not None:
                raise rule_error("schema_violation", "`rev` belongs to a git source", at="rev")
            return
        _check_url(self.git, "git")
        if self.rev is None or not _REV_RE.match(self.rev):
            raise rule_error(
                "schema_violation",
                "a git source needs `rev`: a full 40-character commit id (no branch or tag)",
                at="rev",
            )

    def kind(self) -> Literal["path", "archive", "git"]:
        if self.path is not None:
            return "path"
        return "archive" if self.archive is not None else "git"


class PackRef(StrictModel):
    """One ``spec.packs`` entry (also a manifest's dependency, with ``name`` from its key)."""

    name: NonEmptyStr
    version: NonEmptyStr
    source: PackSource | None = None
    path: NonEmptyStr | None = None
    integrity: str | None = None
    signature: Any = None

    _name = field_validator("name")(check_pack_name)
    _version = field_validator("version")(check_constraint)
    _integrity = field_validator("integrity")(check_integrity)

    @model_validator(mode="after")
    def _shape(self) -> Self:
        if self.signature is not None:
            raise unsupported("signature", "Sigstore publisher signatures")
        if (self.source is None) == (self.path is None):
            raise rule_error(
                "schema_violation",
                "a pack reference needs exactly one of `source` or (legacy) `path`",
                help="write source: { path: packs/name.pack.yaml }",
            )
        if self.path is not None:
            # Refused here, not when ``effective_source`` builds the source while the packs
            # are read (a validation error there would escape as an internal error).
            _check_local(self.path, "write source: { archive: URL, integrity: … }")
        if self.path is not None:
            _check_exact(self.version)
        if self.path is not None and self.integrity is None:
            raise rule_error(
                "schema_violation",
                "a legacy `path` pack reference needs `integrity`",
                at="path",
                help="or write source: { path: … } and lock it with `agentctl packs lock`",
            )
        return self

    def effective_source(self) -> PackSource:
        return self.source if self.source is not None else PackSource(path=self.path)


class TrustIdentity(StrictModel):
    identity: NonEmptyStr
    issuer: NonEmptyStr


class PackTrust(StrictModel):
    """``spec.packTrust``: what to do with packs that carry no verified publisher signature."""

    unsigned: Literal["deny", "warn", "allow"] = "warn"
    identities: list[TrustIdentity] = Field(default_factory=list)
    allow_unsigned_process: bool = Field(False, alias="allowUnsignedProcess")
