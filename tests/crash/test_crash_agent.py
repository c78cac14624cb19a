"""An agent task killed between its calls resumes without resending a confirmed call.

The E2-style agent makes a model call, a tool call and a second model call, each its own
effect. Killing the coordinator after the first call's outcome and resuming must reuse that
call (same effect identity, not re-executed) and make each later call exactly once; killing it
after a call started but before its outcome leaves that call uncertain for the operator.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES


@pytest.mark.parametrize(
    ("point", "hit"), [("coordinator.after_outcome", 1), ("coordinator.after_outcome", 2)]
)
def test_agent_resumes_reusing_confirmed_calls(point: str, hit: int, cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    shutil.copy(EXAMPLES / "e2-agent-router.yaml", tmp_path / "e2.yaml")
    shutil.copy(EXAMPLES / "notes.txt", tmp_path / "notes.txt")
    db = tmp_path / "r.db"
    crash = {"AGENTCTL_CRASH_AT": point, "AGENTCTL_CRASH_HIT": str(hit)}
    killed = cli("--output", "json", "run", "e2.yaml", "--db", str(db), env=crash)
    assert killed.rc == -9, killed.stderr
    run_id = cli("--output", "json", "runs", "list", "--db", str(db)).data["runs"][0]["runId"]
    before = cli("--output", "json", "effects", "list", run_id, "--db", str(db)).data["effects"]
    assert len(before) == hit and all(e["status"] == "succeeded" for e in before)
    resumed = cli("--output", "json", "resume", run_id, "--db", str(db))
    assert resumed.rc == 0, resumed.stderr
    after = cli("--output", "json", "effects", "list", run_id, "--db", str(db)).data["effects"]
    assert [(e["ordinal"], e["operation"]) for e in after] == [
        (0, "fake"),
        (1, "builtin.read"),
        (2, "fake"),
    ]
    assert [e["effectId"] for e in after[:hit]] == [e["effectId"] for e in before]
    assert [e["startedAt"] for e in after[:hit]] == [e["startedAt"] for e in before]


def test_agent_call_lost_mid_flight_is_uncertain(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    shutil.copy(EXAMPLES / "e2-agent-router.yaml", tmp_path / "e2.yaml")
    shutil.copy(EXAMPLES / "notes.txt", tmp_path / "notes.txt")
    db = tmp_path / "r.db"
    crash = {"AGENTCTL_CRASH_AT": "coordinator.after_started"}
    killed = cli("--output", "json", "run", "e2.yaml", "--db", str(db), env=crash)
    assert killed.rc == -9
    run_id = cli("--output", "json", "runs", "list", "--db", str(db)).data["runs"][0]["runId"]
    resumed = cli("--output", "json", "resume", run_id, "--db", str(db))
    assert resumed.rc == 3
    [effect] = cli("--output", "json", "effects", "list", run_id, "--db", str(db)).data["effects"]
    assert effect["operation"] == "fake" and effect["status"] == "uncertain"
    assert effect["effectId"] in resumed.error["error"]["message"]
