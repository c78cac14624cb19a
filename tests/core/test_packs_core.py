"""The pure pieces of packs: version constraints, integrity spellings, source shapes."""

from __future__ import annotations

import base64
import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentctl.core.dsl.packs import PackRef, PackSource
from agentctl.core.packs.integrity import digest_of, normalize_integrity
from agentctl.core.packs.semver import Version, parse_constraint, parse_version


@pytest.mark.parametrize(
    ("constraint", "version", "allowed"),
    [
        ("^1.0", "1.0.0", True),
        ("^1.0", "1.9.3", True),
        ("^1.0", "2.0.0", False),
        ("^1.0", "2.0.0-rc.1", False),
        ("^0.2", "0.2.9", True),
        ("^0.2", "0.3.0", False),
        ("^0.0.3", "0.0.4", False),
        ("~1.2", "1.2.7", True),
        ("~1.2", "1.3.0", False),
        ("=1.2.0", "1.2.0", True),
        ("=1.2.0", "1.2.1", False),
        ("=1.2", "1.2.5", True),
        (">=0.2.0, <1.0.0", "0.3.0", True),
        (">=0.2.0, <1.0.0", "1.0.0", False),
        ("1.4", "1.9.0", True),  # a bare version means ^
        ("*", "0.0.1", True),
        (">=1.0.0-beta", "1.0.0-rc.1", True),
        ("^1.0", "1.0.0-rc.1", False),
    ],
)
def test_constraints(constraint: str, version: str, allowed: bool) -> None:
    assert parse_constraint(constraint).allows(parse_version(version)) is allowed


@pytest.mark.parametrize("bad", ["", "1.x", ">=", "1.0.0.0", "^1.0,", "latest"])
def test_malformed_constraints_say_so(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_constraint(bad)


@pytest.mark.parametrize("bad", ["1.0.0-01", "1.0.0-rc.007", "1.0.0-"])
def test_a_numeric_pre_release_identifier_has_no_leading_zero(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_version(bad)
    with pytest.raises(ValueError):
        parse_constraint(f">={bad}")
    assert parse_version("1.0.0-0.rc-1.0a").pre == ("0", "rc-1", "0a")


@given(st.tuples(*[st.integers(0, 30)] * 3), st.tuples(*[st.integers(0, 30)] * 3))
def test_version_order_is_the_numeric_order(a: tuple[int, ...], b: tuple[int, ...]) -> None:
    va, vb = parse_version(".".join(map(str, a))), parse_version(".".join(map(str, b)))
    assert (va.key() < vb.key()) == (a < b)
    assert Version(*a) == va


def test_integrity_accepts_both_spellings_of_one_digest() -> None:
    data = b"apiVersion: agentctl.dev/pack/v1alpha1\n"
    raw = hashlib.sha256(data).digest()
    sri = "sha256-" + base64.b64encode(raw).decode()
    assert normalize_integrity(sri) == digest_of(data) == "sha256:" + raw.hex()
    for bad in ("sha256:ABC", "md5:" + "0" * 32, "sha256-short=", "0" * 64):
        with pytest.raises(ValueError):
            normalize_integrity(bad)


def test_sources_keep_urls_and_paths_apart() -> None:
    assert PackSource(path="packs/a").kind() == "path"
    pinned = "sha256:" + "a" * 64
    remote = PackSource(archive="https://example.com/a.tgz", integrity=pinned)
    assert remote.kind() == "archive"
    for bad in (
        {"path": "https://example.com/a.tgz"},
        {"path": "file:///tmp/a"},
        {"archive": "packs/a.tgz", "integrity": pinned},
        {"archive": "https://user:pw@example.com/a.tgz", "integrity": pinned},
        {"archive": "https://example.com/a.tgz?x=1", "integrity": pinned},
        {"archive": "https://example.com/a.tgz"},
        {"git": "https://example.com/a.git", "rev": "main"},
        {"path": "a", "git": "https://example.com/a.git"},
    ):
        with pytest.raises(ValueError):
            PackSource.model_validate(bad)


def test_a_reference_is_exactly_one_of_source_or_legacy_path() -> None:
    ok = PackRef.model_validate({"name": "ex.a", "version": "^1", "source": {"path": "a"}})
    assert ok.effective_source().path == "a"
    for bad in (
        {"name": "ex.a", "version": "^1"},
        {"name": "nodots", "version": "^1", "source": {"path": "a"}},
        {"name": "ex.a", "version": "1.0.0", "path": "a"},  # legacy needs integrity
        {"name": "ex.a", "version": "^1", "source": {"path": "a"}, "path": "a"},
    ):
        with pytest.raises(ValueError):
            PackRef.model_validate(bad)


def test_a_legacy_path_reference_pins_an_exact_version() -> None:
    """A range in the legacy form was read as `=RANGE` and failed as an internal error."""
    digest = "sha256:" + "0" * 64
    legacy = {"name": "ex.a", "path": "a", "integrity": digest}
    assert PackRef.model_validate({**legacy, "version": "1.2.3"}).version == "1.2.3"
    for version in ("*", "^1.0", "1.2", ">=1.0.0"):
        with pytest.raises(ValueError, match="takes an exact version"):
            PackRef.model_validate({**legacy, "version": version})


def test_a_version_is_exact_text() -> None:
    # Like a sub-workflow's version: a trailing newline (a YAML block scalar) is not a version.
    for bad in ("1.0.0\n", " 1.0.0", "1.0.0 "):
        with pytest.raises(ValueError):
            parse_version(bad)
