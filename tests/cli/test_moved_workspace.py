"""A run whose stored workspace is gone (the checkout moved or was deleted).

``resume``, ``fork`` and ``compensate`` reuse the workspace the run stored. When it no longer
exists they refuse before any state changes (exit 2, as a missing ``--workspace`` is): a
paused run stays paused, no fork is created, and ``--workspace`` names where the files went.
Driving on would have failed the run's tasks for good.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.conftest import EXAMPLES, Cli


def _paused_and_approved(cli: Cli, ws: Path) -> str:
    ws.mkdir()
    shutil.copy(EXAMPLES / "e6-approval.yaml", ws / "wf.yaml")  # a write that needs approval
    paused = cli("--output", "json", "run", "ws/wf.yaml", "--db", "r.db")
    assert paused.rc == 3, paused.stderr
    run_id = str(paused.data["runId"])
    listed = cli("--output", "json", "approvals", "list", run_id, "--db", "r.db")
    [approval] = listed.data["approvals"]
    decided = ("approvals", "approve", approval["approvalId"], "--reason", "ok", "--db", "r.db")
    assert cli(*decided).rc == 0
    return run_id


def _runs(cli: Cli) -> list[tuple[str, str]]:
    listed = cli("--output", "json", "runs", "list", "--db", "r.db").data["runs"]
    return [(r["mode"], r["state"]) for r in listed]


def test_resume_and_fork_refuse_a_workspace_that_is_gone(cli: Cli, tmp_path: Path) -> None:
    run_id = _paused_and_approved(cli, tmp_path / "ws")
    (tmp_path / "ws").rename(tmp_path / "moved")
    for command in ("resume", "fork"):
        refused = cli("--output", "json", command, run_id, "--db", "r.db")
        assert refused.rc == 2, refused.stderr
        message = refused.error["error"]["message"]
        assert str(tmp_path / "ws") in message and "--workspace" in message
    assert _runs(cli) == [("execute", "paused")]  # unchanged, and no fork
    resumed = cli("--output", "json", "resume", run_id, "--db", "r.db", "--workspace", "moved")
    assert resumed.rc == 0, resumed.stderr
    assert (tmp_path / "moved" / "out" / "a.txt").read_text(encoding="utf-8") == "hello"


def test_a_finished_run_is_still_refused_for_what_it_is(cli: Cli, tmp_path: Path) -> None:
    run_id = _paused_and_approved(cli, tmp_path / "ws")
    assert cli("--output", "json", "resume", run_id, "--db", "r.db").rc == 0
    (tmp_path / "ws").rename(tmp_path / "moved")
    again = cli("--output", "json", "resume", run_id, "--db", "r.db")
    assert again.rc == 4, again.stderr  # a finished run, whatever became of its files
    assert cli("--output", "json", "replay", run_id, "--db", "r.db").rc == 0  # needs no files
