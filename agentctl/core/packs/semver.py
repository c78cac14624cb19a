"""Semantic versions and version constraints for packs (``version``, ``agentctl``).

Job: parse ``MAJOR.MINOR.PATCH[-PRE][+BUILD]`` versions and the constraint forms a pack
reference or manifest writes, and answer whether a version satisfies a constraint.

Constraint forms (comma-separated comparators, all must hold): ``^1.2`` (same left-most
non-zero component), ``~1.2`` (same minor), ``=1.2.0`` / ``=1.2`` (exact / that prefix),
``>=``, ``>``, ``<=``, ``<``, ``*``; a bare version means ``^`` (the usual semver default).

Invariants:
- pure and total: a bad version or constraint raises ``ValueError`` with a message that
  says what is wrong, never anything else;
- a pre-release version satisfies a constraint only when some comparator names a
  pre-release of the same ``MAJOR.MINOR.PATCH`` (so ``^1.0`` never picks ``2.0.0-rc.1``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# A pre-release identifier is numeric without a leading zero, or has a letter or hyphen
# (semver.org §9: "1.0.0-01" is not a version).
PRE_RELEASE_ID = r"(?:0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*)"
_VERSION_RE = re.compile(
    r"^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)"
    rf"(?:-({PRE_RELEASE_ID}(?:\.{PRE_RELEASE_ID})*))?(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?\Z"
)
_PARTIAL_RE = re.compile(
    r"^(0|[1-9][0-9]*)(?:\.(0|[1-9][0-9]*))?(?:\.(0|[1-9][0-9]*))?"
    rf"(?:-({PRE_RELEASE_ID}(?:\.{PRE_RELEASE_ID})*))?\Z"
)
_OPS = (">=", "<=", ">", "<", "=", "^", "~")


@dataclass(frozen=True, order=False)
class Version:
    """One parsed version; ``pre`` is the pre-release identifiers (empty for a release)."""

    major: int
    minor: int
    patch: int
    pre: tuple[str, ...] = ()

    def key(self) -> tuple[int, int, int, int, tuple[tuple[int, int | str], ...]]:
        # A release sorts after every pre-release of the same triple.
        ids = tuple((0, int(p)) if p.isdigit() else (1, p) for p in self.pre)
        return (self.major, self.minor, self.patch, 0 if self.pre else 1, ids)

    def __str__(self) -> str:
        text = f"{self.major}.{self.minor}.{self.patch}"
        return text + ("-" + ".".join(self.pre) if self.pre else "")


def parse_version(text: str) -> Version:
    """A full semantic version (build metadata is accepted and ignored)."""
    match = _VERSION_RE.match(text)  # exact: no surrounding blanks, as a sub-workflow version
    if match is None:
        raise ValueError(f"{text!r} is not a semantic version (MAJOR.MINOR.PATCH)")
    major, minor, patch, pre = match.groups()
    return Version(int(major), int(minor), int(patch), tuple(pre.split(".")) if pre else ())


@dataclass(frozen=True)
class _Comparator:
    """One comparator of a version range (``>=1.2``), with how many parts were written."""

    op: str
    version: Version
    parts: int  # how many of MAJOR.MINOR.PATCH were written


def _comparator(text: str) -> _Comparator:
    op = next((o for o in _OPS if text.startswith(o)), "")
    rest = text[len(op) :].strip()
    match = _PARTIAL_RE.match(rest)
    if match is None:
        raise ValueError(f"{text!r} is not a version comparator")
    major, minor, patch, pre = match.groups()
    parts = 1 + (minor is not None) + (patch is not None)
    version = Version(
        int(major), int(minor or 0), int(patch or 0), tuple(pre.split(".")) if pre else ()
    )
    return _Comparator(op or "^", version, parts)


def _upper(c: _Comparator) -> Version:
    """The exclusive upper bound of a ``^``/``~``/partial ``=`` comparator."""
    v = c.version
    if c.op == "~" or (c.op == "=" and c.parts == 2):
        return Version(v.major + 1, 0, 0) if c.parts == 1 else Version(v.major, v.minor + 1, 0)
    if c.op == "=":
        return Version(v.major + 1, 0, 0)
    if v.major > 0 or c.parts == 1:
        return Version(v.major + 1, 0, 0)
    if v.minor > 0 or c.parts == 2:
        return Version(0, v.minor + 1, 0)
    return Version(0, 0, v.patch + 1)


def _holds(c: _Comparator, version: Version) -> bool:
    have, want = version.key(), c.version.key()
    if c.op == "=" and c.parts == 3:
        return have == want
    checks = {">=": have >= want, ">": have > want, "<=": have <= want, "<": have < want}
    if c.op in checks:
        return checks[c.op]
    return want <= have < _upper(c).key()


@dataclass(frozen=True)
class Constraint:
    """A parsed constraint; ``text`` is as written."""

    text: str
    comparators: tuple[_Comparator, ...]

    def allows(self, version: Version) -> bool:
        if not all(_holds(c, version) for c in self.comparators):
            return False
        if not version.pre:
            return True
        triple = (version.major, version.minor, version.patch)
        return any(
            c.version.pre and (c.version.major, c.version.minor, c.version.patch) == triple
            for c in self.comparators
        )


def parse_constraint(text: str) -> Constraint:
    """``^1.0``, ``>=0.2.0, <1.0.0``, ``=1.2.0``, ``*`` …; raises ``ValueError`` if malformed."""
    stripped = text.strip()
    if not stripped:
        raise ValueError("an empty version constraint")
    if stripped == "*":
        return Constraint(text, (_Comparator(">=", Version(0, 0, 0), 3),))
    parts = [p.strip() for p in stripped.split(",")]
    if any(not p for p in parts):
        raise ValueError(f"{text!r} has an empty comparator")
    return Constraint(text, tuple(_comparator(p) for p in parts))
