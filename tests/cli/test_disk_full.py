"""A full disk is an ordinary failure (issue 18), on real small tmpfs mounts (root only).

Three places can fill up. The ledger (database and WAL) and the artifact store beside it are
state: a run that meets a full one ends with exit 5, a clear message and its run id. A task's
own write is the task's business: exit 4 with the run id. Either way the run is left
``running`` with no live coordinator and no stray temporary files, and once there is room
again ``resume`` finishes it and ``PRAGMA integrity_check`` is ``ok``.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import Cli, CliResult

pytestmark = pytest.mark.sqlite_only(
    reason="fills a small tmpfs under the SQLite file and checks the file's integrity"
)

WF = """apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: big }
spec:
  inputs: { body: "", bulk: [] }
  policy: { approval: never, writableRoots: [out] }
  actions:
    save: { kind: builtin.write }
  tasks:
    - { id: once, uses: action:save, with: { path: out/once.txt, content: "${{ inputs.body }}" } }
    - id: twice
      uses: action:save
      needs: [once]
      with: { path: out/twice.txt, content: "${{ inputs.body }}${{ inputs.body }}" }
"""

Mount = Callable[[Path, str], Path]


@pytest.fixture
def mount_small() -> Iterator[Mount]:
    """``mount(where, size)``: a fresh tmpfs of ``size`` at ``where``; unmounted afterwards."""
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a small tmpfs (mount -t tmpfs -o size=2m)")
    mounted: list[Path] = []

    def mount(where: Path, size: str) -> Path:
        where.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
            capture_output=True,
        )
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
        mounted.append(where)
        return where

    try:
        yield mount
    finally:
        for where in reversed(mounted):
            subprocess.run(["umount", "-l", str(where)], check=False)


def _grow(where: Path) -> None:
    subprocess.run(["mount", "-o", "remount,size=64m", str(where)], check=True)


def _inputs(tmp_path: Path, body: str, bulk: list[str] | None = None) -> str:
    path = tmp_path / "inputs.json"  # outside every small filesystem
    path.write_text(json.dumps({"body": body, "bulk": bulk or []}), encoding="utf-8")
    return str(path)


def _leftovers(*folders: Path) -> list[str]:
    """Temporary files anywhere below ``folders``, and anything in the store's ``tmp/``."""
    found = []
    for folder in folders:
        for path in folder.rglob("*"):
            if path.name.endswith((".tmp", ".part")) or path.parent.name == "tmp":
                found.append(str(path))
    return found


def _state_after_failure(cli: Cli, small: Path, run_id: str) -> None:
    listed = cli("--output", "json", "runs", "list", "--db", "s/r.db", cwd=small)
    assert [(r["runId"], r["state"]) for r in listed.data["runs"]] == [(run_id, "running")]
    assert _leftovers(small) == []
    assert list((small / "s" / "r.db.workers").iterdir()) == []


def _integrity_ok(db: Path) -> None:
    raw = sqlite3.connect(db)
    assert raw.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    raw.close()


def _failed_with(ran: CliResult, rc: int, message: str) -> str:
    """The run id of a clean failure with ``rc`` and ``message``."""
    assert ran.rc == rc, ran
    error = ran.error["error"]
    assert message in error["message"], error
    assert "internal error" not in ran.stderr and "Traceback" not in ran.stderr
    run_id: str = error["runId"]
    assert run_id and run_id.startswith("run-")
    return run_id


def test_full_database_fails_cleanly_and_resume_finishes(
    cli: Cli, tmp_path: Path, mount_small: Mount
) -> None:
    small = mount_small(tmp_path / "small", "2m")
    (small / "wf.yaml").write_text(WF, encoding="utf-8")
    # Many strings each too short for the artifact store: 600 KiB that stays in the rows.
    inputs = _inputs(tmp_path, "hello", ["x" * 60_000] * 10)

    args = ["run", "wf.yaml", "--db", "s/r.db", "--inputs-file", inputs]
    ran = cli("--output", "json", *args, cwd=small)
    run_id = _failed_with(ran, 5, "no space left on the device holding database s/r.db")
    _state_after_failure(cli, small, run_id)

    _grow(small)
    resumed = cli("--output", "json", "resume", run_id, "--db", "s/r.db", cwd=small)
    assert resumed.rc == 0, resumed.stderr
    assert resumed.data["state"] == "succeeded"
    assert (small / "out" / "twice.txt").read_text(encoding="utf-8") == "hellohello"
    _integrity_ok(small / "s" / "r.db")


def test_full_artifact_store_fails_cleanly_and_resume_finishes(
    cli: Cli, tmp_path: Path, mount_small: Mount
) -> None:
    small = mount_small(tmp_path / "small", "2m")
    (small / "wf.yaml").write_text(WF, encoding="utf-8")
    body = "x" * 600 * 1024  # stored once as a blob; the second task's 1.2 MiB does not fit

    args = ["run", "wf.yaml", "--db", "s/r.db", "--inputs-file", _inputs(tmp_path, body)]
    ran = cli("--output", "json", *args, cwd=small)
    run_id = _failed_with(ran, 5, "no space left on the device holding artifact store")
    _state_after_failure(cli, small, run_id)
    assert not (small / "out" / "twice.txt").exists()  # recorded first, so never executed

    _grow(small)
    resumed = cli("--output", "json", "resume", run_id, "--db", "s/r.db", cwd=small)
    assert resumed.rc == 0, resumed.stderr
    assert resumed.data["output"]["twice"]["after"] == body + body
    assert (small / "out" / "twice.txt").stat().st_size == 2 * len(body)
    verified = cli("--output", "json", "artifacts", "verify", "--all", "--db", "s/r.db", cwd=small)
    assert verified.rc == 0 and verified.data["valid"] is True
    _integrity_ok(small / "s" / "r.db")


def test_a_task_write_on_a_full_disk_stops_the_run_resumable(
    cli: Cli, tmp_path: Path, mount_small: Mount
) -> None:
    """The ledger has room; only the workspace directory the task writes into is full."""
    (tmp_path / "wf.yaml").write_text(WF, encoding="utf-8")
    out = mount_small(tmp_path / "out", "1m")
    (out / "filler").write_bytes(b"\0" * 700 * 1024)
    body = "y" * 200 * 1024  # `once` still fits, `twice` (400 KiB) does not

    args = ["run", "wf.yaml", "--db", "s/r.db", "--inputs-file", _inputs(tmp_path, body)]
    ran = cli("--output", "json", *args)
    run_id = _failed_with(ran, 4, "task twice: cannot write 'out/twice.txt': no space left")
    assert run_id in ran.error["error"]["details"]["hint"]
    listed = cli("--output", "json", "runs", "list", "--db", "s/r.db")
    assert [(r["runId"], r["state"]) for r in listed.data["runs"]] == [(run_id, "running")]
    assert sorted(p.name for p in out.iterdir()) == ["filler", "once.txt"]  # no .tmp left
    effects = cli("--output", "json", "effects", "list", run_id, "--db", "s/r.db")
    assert [(e["taskId"], e["attempt"], e["status"]) for e in effects.data["effects"]] == [
        ("once", 1, "succeeded"),
        ("twice", 1, "failed"),  # it did not happen: nothing is uncertain
    ]

    (out / "filler").unlink()
    resumed = cli("--output", "json", "resume", run_id, "--db", "s/r.db")
    assert resumed.rc == 0, resumed.stderr
    assert resumed.data["state"] == "succeeded"
    assert (out / "twice.txt").read_text(encoding="utf-8") == body + body
    effects = cli("--output", "json", "effects", "list", run_id, "--db", "s/r.db")
    assert [(e["taskId"], e["attempt"], e["status"]) for e in effects.data["effects"]] == [
        ("once", 1, "succeeded"),
        ("twice", 1, "failed"),
        ("twice", 2, "succeeded"),
    ]
    _integrity_ok(tmp_path / "s" / "r.db")
