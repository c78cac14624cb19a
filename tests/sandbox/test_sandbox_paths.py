"""Path confinement: every escape attempt is denied, legitimate paths resolve canonically."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentctl.errors import PolicyDeniedError
from agentctl.sandbox.paths import resolve_read, resolve_write


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    """A workspace with a writable root `out`, and an outside dir holding a secret."""
    ws = tmp_path / "ws"
    outside = tmp_path / "outside"
    (ws / "out").mkdir(parents=True)
    (ws / "src").mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    (ws / "src" / "a.txt").write_text("a")
    (ws / "out" / "link_dir").symlink_to(outside, target_is_directory=True)
    (ws / "out" / "link_file").symlink_to(outside / "secret.txt")
    (ws / "out" / "dangling").symlink_to(outside / "new.txt")
    (ws / "src_link").symlink_to(outside, target_is_directory=True)
    (ws / "out_alias").symlink_to(ws / "out", target_is_directory=True)
    return ws, outside


READ_ESCAPES = [
    "../outside/secret.txt",
    "/etc/passwd",
    "src/../../outside/secret.txt",
    "src_link/secret.txt",
    "out/link_file",
    "src/a.txt\x00",
    "",
    ".",
]


@pytest.mark.parametrize("rel", READ_ESCAPES)
def test_read_escapes_are_denied(layout: tuple[Path, Path], rel: str) -> None:
    ws, _ = layout
    with pytest.raises(PolicyDeniedError):
        resolve_read(str(ws), rel)


WRITE_ESCAPES = [
    ("../x", ["out"]),
    ("/tmp/x", ["out"]),
    ("out/../../x", ["out"]),
    ("out/link_dir/new.txt", ["out"]),  # symlinked parent pointing outside
    ("out/link_dir/deep/new.txt", ["out"]),  # missing dirs below an escaping link
    ("out/link_file", ["out"]),  # symlink file pointing outside
    ("out/dangling", ["out"]),  # dangling link whose target is outside
    ("src/a.txt", ["out"]),  # inside workspace, outside every writable root
    ("out/a.txt", []),  # no writable roots at all
    ("out/a\x00.txt", ["out"]),
    ("", ["out"]),
    ("out", ["out"]),  # the root itself is not a file to replace
    ("out/x.txt", ["../outside"]),  # a writable root outside the workspace grants nothing
    ("src_link/x.txt", ["src_link"]),  # a root that is itself an escaping link
]


@pytest.mark.parametrize(("rel", "roots"), WRITE_ESCAPES)
def test_write_escapes_are_denied(layout: tuple[Path, Path], rel: str, roots: list[str]) -> None:
    ws, outside = layout
    before = sorted(p.name for p in outside.rglob("*"))
    with pytest.raises(PolicyDeniedError):
        resolve_write(str(ws), roots, rel)
    assert sorted(p.name for p in outside.rglob("*")) == before


def test_legitimate_paths_resolve_to_canonical_targets(layout: tuple[Path, Path]) -> None:
    ws, _ = layout
    real = os.path.realpath(ws)
    assert resolve_read(str(ws), "src/a.txt") == os.path.join(real, "src", "a.txt")
    assert resolve_read(str(ws), "./src//a.txt") == os.path.join(real, "src", "a.txt")
    assert resolve_write(str(ws), ["out"], "out/new/deep.txt") == os.path.join(
        real, "out", "new", "deep.txt"
    )
    # A symlink that stays inside the writable root is followed to its canonical target.
    assert resolve_write(str(ws), ["out"], "out_alias/b.txt") == os.path.join(real, "out", "b.txt")


def test_not_yet_existing_writable_root_allows_writes_below_it(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    target = resolve_write(str(ws), ["build"], "build/a/b.txt")
    assert target == os.path.join(os.path.realpath(ws), "build", "a", "b.txt")


# An absolute root (``/artifacts``, a mount) grants absolute paths: given as (path, root), each
# relative to tmp_path, where ``outside`` is the fixture's outside dir holding the links' targets.
ABSOLUTE_ESCAPES = [
    ("outside/new.txt", "mount"),  # outside every root
    ("mount/link_dir/new.txt", "mount"),  # a symlinked parent pointing out
    ("mount/link_file", "mount"),  # a symlink file pointing out
    ("mount/../outside/new.txt", "mount"),  # `..` is refused lexically
    ("mount", "mount"),  # the root itself
    ("gone/new.txt", "gone"),  # a root that does not exist is never created
    ("ws/out/new.txt", None),  # no absolute root: the relative `out` grants no absolute path
]


@pytest.mark.parametrize(("path", "root"), ABSOLUTE_ESCAPES)
def test_absolute_write_escapes_are_denied(
    layout: tuple[Path, Path], path: str, root: str | None
) -> None:
    ws, outside = layout
    base = ws.parent
    (base / "mount").mkdir()
    (base / "mount" / "link_dir").symlink_to(outside, target_is_directory=True)
    (base / "mount" / "link_file").symlink_to(outside / "secret.txt")
    roots = ["out"] + ([str(base / root)] if root else [])
    before = sorted(p.name for p in outside.rglob("*"))
    with pytest.raises(PolicyDeniedError):
        resolve_write(str(ws), roots, str(base / path))
    assert sorted(p.name for p in outside.rglob("*")) == before
    assert not (base / "gone").exists()


def test_absolute_paths_inside_an_absolute_root_resolve_canonically(tmp_path: Path) -> None:
    ws, mount = tmp_path / "ws", tmp_path / "mount"
    ws.mkdir()
    (mount / "sub").mkdir(parents=True)
    (tmp_path / "alias").symlink_to(mount, target_is_directory=True)
    real = os.path.realpath(mount)
    # The root named through a link resolves to its target; so does a path through one.
    assert resolve_write(str(ws), [str(tmp_path / "alias")], f"{mount}/sub/a.txt") == (
        os.path.join(real, "sub", "a.txt")
    )
    assert resolve_write(str(ws), [str(mount)], f"{tmp_path}/alias/new/b.txt") == (
        os.path.join(real, "new", "b.txt")
    )


def test_protected_paths_are_denied_however_they_are_named(tmp_path: Path) -> None:
    """The ledger's own state: the path itself, inside a protected directory, a symlink to
    it, a hard link to it, and an absolute path inside an absolute writable root."""
    ws = tmp_path / "ws"
    state = ws / ".agentctl"
    (state / "artifacts").mkdir(parents=True)
    database = state / "runtime.db"
    database.write_bytes(b"db")
    (ws / "sym.db").symlink_to(database)
    (ws / "hard.db").hardlink_to(database)
    protected = [os.path.realpath(database), os.path.realpath(state / "artifacts")]
    names = [".agentctl/runtime.db", "sym.db", "hard.db", ".agentctl/artifacts/blobs/x"]
    for rel in names:
        with pytest.raises(PolicyDeniedError, match="own ledger state"):
            resolve_write(str(ws), ["."], rel, protected)
        with pytest.raises(PolicyDeniedError, match="own ledger state"):
            resolve_read(str(ws), rel, protected)
    with pytest.raises(PolicyDeniedError, match="own ledger state"):
        resolve_write(str(ws), [str(state)], str(database), protected)
    assert resolve_write(str(ws), ["."], ".agentctl/notes.txt", protected).endswith("notes.txt")
