"""Faults in stored state (issue 18), black-box through the CLI in a fresh directory.

- cancelling a paused run records the request and changes nothing else (spec/cli.md §6): the
  next ``resume`` honours it before any work — the run ends ``cancelled`` (exit 130), its
  undecided approval closed (approving it afterwards is refused), and nothing runs, not even
  an effect approved after the request;
- a ledger whose pages are corrupt is noticed (``PRAGMA quick_check``) by the commands that
  would write into it or drive a run from it, and by ``db stats``: exit 5 naming the file,
  and the file is never written into further (byte comparison).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests.conftest import Cli

APPROVAL_WF = """apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: gated }
spec:
  policy: { writableRoots: [out] }
  actions:
    save: { kind: builtin.write }
  tasks:
    - { id: save, uses: action:save, with: { path: out/a.txt, content: hello } }
"""


def _paused_run(cli: Cli, root: Path) -> tuple[str, str]:
    (root / "wf.yaml").write_text(APPROVAL_WF, encoding="utf-8")
    ran = cli("--output", "json", "run", "wf.yaml", "--db", "s/r.db")
    assert ran.rc == 3, ran.stderr
    run_id = ran.data["runId"]
    listed = cli("--output", "json", "approvals", "list", run_id, "--db", "s/r.db")
    (approval,) = listed.data["approvals"]
    return run_id, approval["approvalId"]


def test_cancel_of_a_paused_run_is_honoured_by_the_next_resume(cli: Cli, tmp_path: Path) -> None:
    run_id, approval_id = _paused_run(cli, tmp_path)

    cancelled = cli("--output", "json", "cancel", run_id, "--db", "s/r.db")
    assert cancelled.rc == 0, cancelled.stderr
    assert cancelled.data == {"runId": run_id, "requested": True}
    human = cli("cancel", run_id, "--db", "s/r.db")  # a second request: still paused
    assert human.rc == 0 and "stays paused until `agentctl resume" in human.stdout

    # The request is recorded for another process to observe: nothing else changed yet.
    seen = cli("--output", "json", "inspect", run_id, "--db", "s/r.db").data
    assert (seen["run"]["state"], seen["run"]["cancellationRequested"]) == ("paused", True)
    assert [a["approvalId"] for a in seen["approvals"]] == [approval_id]
    assert [(t["taskId"], t["state"]) for t in seen["tasks"]] == [("save", "waiting_for_approval")]

    # Even approved, the effect never runs: the resume honours the flag before any work.
    approve = cli(
        "--output", "json", "approvals", "approve", approval_id, "--reason", "r", "--db", "s/r.db"
    )
    assert approve.rc == 0, approve.stderr
    resumed = cli("--output", "json", "resume", run_id, "--db", "s/r.db")
    assert resumed.rc == 130, resumed.stderr
    assert (resumed.data["runId"], resumed.data["state"]) == (run_id, "cancelled")

    seen = cli("--output", "json", "inspect", run_id, "--db", "s/r.db").data
    assert seen["run"]["state"] == "cancelled"
    assert [(t["taskId"], t["state"]) for t in seen["tasks"]] == [("save", "cancelled")]
    # Never started, and in a terminal run never will: cancelled, saying why.
    assert [(e["status"], e["error"]) for e in seen["effects"]] == [
        ("cancelled", "the run was cancelled")
    ]
    assert not (tmp_path / "out").exists()  # nothing ran
    again = cli("--output", "json", "resume", run_id, "--db", "s/r.db")
    assert again.rc == 4 and "is cancelled" in again.error["error"]["message"]


def test_a_paused_run_cancelled_undecided_closes_its_approval(cli: Cli, tmp_path: Path) -> None:
    run_id, approval_id = _paused_run(cli, tmp_path)
    assert cli("cancel", run_id, "--db", "s/r.db").rc == 0

    resumed = cli("resume", run_id, "--db", "s/r.db")
    assert resumed.rc == 130, resumed.stderr
    approve = cli(
        "--output", "json", "approvals", "approve", approval_id, "--reason", "r", "--db", "s/r.db"
    )
    assert approve.rc == 5
    assert f"approval {approval_id} is already cancelled" in approve.error["error"]["message"]
    seen = cli("--output", "json", "inspect", run_id, "--db", "s/r.db").data
    assert [e["status"] for e in seen["effects"]] == ["cancelled"]
    assert seen["approvals"] == []  # none pending any more
    assert not (tmp_path / "out").exists()


# ----------------------------------------------------------------- 10. corruption noticed

SIMPLE_WF = """apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: simple }
spec:
  actions:
    put: { kind: builtin.assign }
  tasks:
    - { id: a, uses: action:put, with: { x: 1 } }
"""


def _corrupt_a_table(db: Path) -> None:
    """Overwrite the middle of the ``runs`` table's root page: header and schema stay fine."""
    raw = sqlite3.connect(db)
    raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    (page,) = raw.execute(
        "SELECT rootpage FROM sqlite_schema WHERE name = 'task_states'"
    ).fetchone()
    (size,) = raw.execute("PRAGMA page_size").fetchone()
    raw.close()
    with db.open("r+b") as fh:
        fh.seek((page - 1) * size)
        fh.write(b"\x0d\x00\x00\xff\xff" + b"\xa5" * 64)


@pytest.mark.sqlite_only(reason="overwrites a page of the SQLite file")
@pytest.mark.parametrize(
    "command",
    [
        ["resume", "RUN"],
        ["retry", "wf.yaml", "RUN", "--failed"],
        ["repair", "wf.yaml", "RUN", "--from", "a"],
        ["run", "wf.yaml"],
        ["cancel", "RUN"],
        ["db", "stats"],
    ],
)
def test_corrupt_ledger_is_noticed_and_never_written(
    cli: Cli, tmp_path: Path, command: list[str]
) -> None:
    (tmp_path / "wf.yaml").write_text(SIMPLE_WF, encoding="utf-8")
    ran = cli("--output", "json", "run", "wf.yaml", "--db", "s/r.db")
    assert ran.rc == 0, ran.stderr
    db = tmp_path / "s" / "r.db"
    _corrupt_a_table(db)
    before = db.read_bytes()
    args = [ran.data["runId"] if a == "RUN" else a for a in command]
    result = cli("--output", "json", *args, "--db", "s/r.db")
    assert result.rc == 5, (result.rc, result.stdout, result.stderr)
    message = result.error["error"]["message"]
    assert "s/r.db" in message and "corrupt" in message, message
    assert db.read_bytes() == before


# A damaged JSON column -> the read commands that decode it (RUN / EFFECT filled in).
DAMAGED_JSON = {
    "runs.output_json": [["inspect", "RUN"], ["runs", "list"], ["effects", "list", "RUN"]],
    "effects.request_json": [["inspect", "RUN"], ["effects", "inspect", "EFFECT"]],
    "task_states.output_json": [["inspect", "RUN"]],
    "audit_events.payload_json": [["inspect", "RUN"]],
}


@pytest.mark.sqlite_only(reason="edits the SQLite file with raw SQL")
@pytest.mark.parametrize("column", sorted(DAMAGED_JSON))
def test_damaged_json_column_is_corrupt_state_not_an_internal_error(
    cli: Cli, tmp_path: Path, column: str
) -> None:
    """spec/cli.md §2: corrupt state is exit 5 (a JSONDecodeError escaped as exit 4)."""
    run_id, _ = _paused_run(cli, tmp_path)  # a run with an effect, its approval pending
    (effect,) = cli("--output", "json", "effects", "list", run_id, "--db", "s/r.db").data["effects"]
    _overwrite(tmp_path, column, run_id, "{damaged")
    ids = {"RUN": run_id, "EFFECT": effect["effectId"]}
    for message in _refusals(cli, DAMAGED_JSON[column], ids):
        assert "corrupt" in message and "internal error" not in message, message


def _overwrite(root: Path, column: str, run_id: str, value: str) -> None:
    """Set ``table.column`` of the run's rows to ``value``, as a hand edit would."""
    table, name = column.split(".")
    raw = sqlite3.connect(root / "s" / "r.db")
    with raw:
        raw.execute(f"UPDATE {table} SET {name} = ? WHERE run_id = ?", (value, run_id))
    raw.close()


def _refusals(cli: Cli, commands: list[list[str]], ids: dict[str, str]) -> list[str]:
    """Each command's error message, each having exited 5 (placeholders in ``ids`` filled)."""
    messages = []
    for command in commands:
        result = cli("--output", "json", *[ids.get(a, a) for a in command], "--db", "s/r.db")
        assert result.rc == 5, (command, result.rc, result.stdout, result.stderr)
        messages.append(str(result.error["error"]["message"]))
    return messages


# A stored state or mode that is none of ours -> the commands that would act on it.
UNKNOWN_NAMES = {
    "runs.state": [["inspect", "RUN"], ["runs", "list"], ["resume", "RUN"], ["cancel", "RUN"]],
    "runs.mode": [["inspect", "RUN"], ["runs", "list"], ["resume", "RUN"]],
    "task_states.state": [["inspect", "RUN"], ["resume", "RUN"]],
}


@pytest.mark.sqlite_only(reason="edits the SQLite file with raw SQL")
@pytest.mark.parametrize("column", sorted(UNKNOWN_NAMES))
def test_an_unknown_stored_state_is_corrupt_state(cli: Cli, tmp_path: Path, column: str) -> None:
    """spec/cli.md §3: rows are checked on read. A hand-edited ``weird`` state was shown as a
    state by ``runs list`` and ``inspect``, and made ``resume`` an internal error (exit 4)."""
    run_id, _ = _paused_run(cli, tmp_path)
    _overwrite(tmp_path, column, run_id, "weird")
    for message in _refusals(cli, UNKNOWN_NAMES[column], {"RUN": run_id}):
        assert "corrupt state" in message and "'weird'" in message, message
    assert not (tmp_path / "out").exists()
