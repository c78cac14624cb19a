"""A full disk is an ordinary failure (issue 18), on a real 2 MiB tmpfs (root only).

The database, its WAL, the artifact store and the worker registry all live on the small
filesystem; a run whose effect needs more room than there is ends with exit 5, a clear
message and its run id, and is left ``running`` with no live coordinator and no stray
temporary files; once the filesystem grows, ``resume`` finishes it and
``PRAGMA integrity_check`` is ``ok``.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Cli

WF = """apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: big }
spec:
  inputs: { body: "" }
  policy: { approval: never, writableRoots: [out] }
  actions:
    save: { kind: builtin.write }
  tasks:
    - { id: save, uses: action:save, with: { path: out/big.txt, content: "${{ inputs.body }}" } }
"""


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a 2 MiB tmpfs (mount -t tmpfs -o size=2m)")
    where = tmp_path / "small"
    where.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(where)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def test_full_disk_fails_cleanly_and_resume_finishes(
    cli: Cli, tmp_path: Path, small_fs: Path
) -> None:
    (small_fs / "wf.yaml").write_text(WF, encoding="utf-8")
    inputs = tmp_path / "inputs.json"  # outside the small filesystem
    inputs.write_text(json.dumps({"body": "x" * 600 * 1024}), encoding="utf-8")

    args = ["run", "wf.yaml", "--db", "s/r.db", "--inputs-file", str(inputs)]
    ran = cli("--output", "json", *args, cwd=small_fs)
    assert ran.rc == 5, (ran.rc, ran.stdout, ran.stderr)
    error = ran.error["error"]
    assert "no space left on the device holding database s/r.db" in error["message"]
    assert "internal error" not in ran.stderr and "Traceback" not in ran.stderr
    run_id = error["runId"]
    assert run_id and run_id.startswith("run-")

    listed = cli("--output", "json", "runs", "list", "--db", "s/r.db", cwd=small_fs)
    assert [(r["runId"], r["state"]) for r in listed.data["runs"]] == [(run_id, "running")]
    leftovers = [p.name for p in small_fs.rglob("*") if p.name.endswith(".tmp")]
    leftovers += [p.name for p in (small_fs / "s" / "artifacts" / "tmp").iterdir()]
    leftovers += [p.name for p in (small_fs / "s" / "r.db.workers").iterdir()]
    assert leftovers == []

    subprocess.run(["mount", "-o", "remount,size=64m", str(small_fs)], check=True)
    resumed = cli("--output", "json", "resume", run_id, "--db", "s/r.db", cwd=small_fs)
    assert resumed.rc == 0, resumed.stderr
    assert resumed.data["state"] == "succeeded"
    assert (small_fs / "out" / "big.txt").stat().st_size == 600 * 1024
    raw = sqlite3.connect(small_fs / "s" / "r.db")
    assert raw.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    raw.close()
