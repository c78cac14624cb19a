"""Writes through a symlink that stays inside a writable root: allowed, and never a stuck run.

spec/dsl.md §7: only ``..`` and symlink *escapes* are rejected, so a link from one writable
file to another is written through (the executor acts on the canonical path). spec/cli.md §8:
the artifact store ingests regular files only, never symlinks — the path the effect reports
names a link, so nothing is stored for it, and the run still finishes.
"""

from __future__ import annotations

import os
from pathlib import Path

HEAD = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: linked }
spec:
  policy: { approval: never, writableRoots: [out] }
  actions: { save: { kind: builtin.write } }
  tasks: [ { id: save, uses: "action:save", with: { path: out/link.txt, content: hello } } ]
"""


def test_a_write_through_an_inside_symlink_succeeds_and_stores_no_link(  # type: ignore[no-untyped-def]
    cli, write_workflow, tmp_path: Path
) -> None:
    (tmp_path / "out" / "real").mkdir(parents=True)
    (tmp_path / "out" / "real" / "in.txt").write_text("before\n", encoding="utf-8")
    os.symlink("real/in.txt", tmp_path / "out" / "link.txt")
    wf = write_workflow(HEAD)
    db = str(tmp_path / "state" / "r.db")
    done = cli("--output", "json", "run", str(wf), "--db", db)
    assert done.rc == 0, done.stderr
    assert done.data["state"] == "succeeded"
    assert "Traceback" not in done.stderr
    assert os.path.islink(tmp_path / "out" / "link.txt")
    assert (tmp_path / "out" / "real" / "in.txt").read_text(encoding="utf-8") == "hello"
    shown = cli("--output", "json", "inspect", done.data["runId"], "--db", db)
    assert [e["status"] for e in shown.data["effects"]] == ["succeeded"]
    assert shown.data["artifacts"] == []
