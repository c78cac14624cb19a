"""An absolute ``writableRoots`` entry is a root of its own (a mount such as ``/artifacts``).

A write whose path is absolute lands there when, symlinks followed, it lies inside an absolute
root; anything else is denied (exit 4) and writes nothing. A root that is not an existing
directory is refused before the run starts (exit 2), and ``doctor`` reports it ``missing``.
Relative paths keep their workspace-relative rules.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import Cli, CliResult

FLOW = """\
kind: Workflow
apiVersion: agentctl.dev/v1alpha1
spec:
  policy: {{ approval: never, writableRoots: [{root}] }}
  actions: {{ save: {{ kind: builtin.write }} }}
  tasks: [ {{ id: save, uses: "action:save", with: {{ path: "{path}", content: made }} }} ]
metadata: {{ name: mounted }}
"""


def _setup(tmp_path: Path, path: str, root: str | None = None) -> tuple[Path, Path, Path]:
    """The workspace (holding the workflow), the mount (an absolute root) and a dir outside."""
    ws, mount, outside = tmp_path / "ws", tmp_path / "mount", tmp_path / "outside"
    for place in (ws, mount, outside):
        place.mkdir()
    text = FLOW.format(root=root or str(mount), path=path.format(mount=mount, outside=outside))
    (ws / "wf.yaml").write_text(text, encoding="utf-8")
    return ws, mount, outside


def _run(cli: Cli, tmp_path: Path, *extra: str) -> CliResult:
    wf, db = tmp_path / "ws" / "wf.yaml", tmp_path / "r.db"
    return cli("--output", "json", "run", str(wf), "--db", str(db), *extra)


def test_a_write_into_an_absolute_root_lands_there_and_is_an_artifact(
    cli: Cli, tmp_path: Path
) -> None:
    _, mount, _ = _setup(tmp_path, "{mount}/sub/r.txt")
    done = _run(cli, tmp_path)
    assert done.rc == 0, done.stderr
    target = mount / "sub" / "r.txt"
    assert target.read_text() == "made"
    assert done.data["output"]["save"]["path"] == str(target)
    data = cli("--output", "json", "inspect", done.data["runId"], "--db", str(tmp_path / "r.db"))
    [effect] = data.data["effects"]
    assert (effect["operation"], effect["status"]) == ("builtin.write", "succeeded")
    [artifact] = data.data["artifacts"]
    assert artifact["path"] == str(target)  # the absolute path, as written
    assert artifact["sizeBytes"] == 4


# Each denied write: its path, and what the denial says. The mount holds a link out; the
# relative path is judged as before: an absolute root grants absolute paths only.
DENIALS = {
    "outside-every-root": ("{outside}/x.txt", "outside every writable root"),
    "symlink-out-of-the-root": ("{mount}/link/x.txt", "outside every writable root"),
    "dotdot": ("{mount}/../outside/x.txt", "'..'"),
    "relative-without-a-relative-root": ("out/x.txt", "outside every writable root"),
}


def _files(*places: Path) -> list[str]:
    return sorted(str(p) for place in places for p in place.rglob("*"))


@pytest.mark.parametrize("name", sorted(DENIALS))
def test_an_absolute_write_outside_its_roots_is_denied(name: str, cli: Cli, tmp_path: Path) -> None:
    path, says = DENIALS[name]
    ws, mount, outside = _setup(tmp_path, path)
    os.symlink(outside, mount / "link")
    before = _files(ws, mount, outside)
    done = _run(cli, tmp_path)
    assert done.rc == 4, done.stderr
    assert "path denied" in done.error["error"]["message"]
    assert says in done.error["error"]["message"]
    assert _files(ws, mount, outside) == before, "something was written"


def test_a_missing_absolute_root_is_refused_before_the_run(cli: Cli, tmp_path: Path) -> None:
    gone = tmp_path / "not-mounted"
    ws, _, _ = _setup(tmp_path, f"{gone}/x.txt", root=str(gone))
    db = tmp_path / "r.db"
    done = cli("--output", "json", "run", str(ws / "wf.yaml"), "--db", str(db))
    assert done.rc == 2, done.stderr
    assert "never created" in done.error["error"]["message"]
    assert not gone.exists() and not db.exists()
    doctor = cli("--output", "json", "doctor", str(ws / "wf.yaml"), "--db", str(db))
    assert doctor.rc == 6, doctor.stderr
    [check] = [c for c in doctor.data["checks"] if c["check"] == f"writable root {gone}"]
    assert (check["available"], check["status"]) == (False, "missing")


def test_check_mode_previews_an_absolute_write_without_making_it(cli: Cli, tmp_path: Path) -> None:
    _, mount, _ = _setup(tmp_path, "{mount}/r.txt")
    (mount / "r.txt").write_text("old\n")
    done = _run(cli, tmp_path, "--check")
    assert done.rc == 0, done.stderr
    save = done.data["output"]["save"]
    assert save["changed"] is True and save["before"] == "old\n"
    assert f"+++ b/{mount}/r.txt" in save["diff"]
    assert (mount / "r.txt").read_text() == "old\n"
