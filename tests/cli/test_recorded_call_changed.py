"""A resume whose credential differs from the one an agent's recorded model call used.

The call's recorded input keeps the key's source and SHA-256, so under another key the call
has another identity: its recorded answer cannot answer it, and a second effect at its place
would contradict the record. Before, the resume inserted one anyway and died on the database's
unique constraint (exit 5, a raw SQLite message, the run left ``running``). Now it refuses:
exit 3 naming the cause, nothing sent, the run paused; a resume with the recorded key goes on.

Two ways to get there: a tool call held for its approval (the run paused), and a crash
before a model call was sent, reconciled ``applied`` (its answer taken from the operator).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.cli.test_providers_run import KEY, NOTES_FIRST_LINE, OPENAI, server
from tests.conftest import Cli
from tests.providers.agent_server import AgentServer

__all__ = ["server"]  # the fixture, imported for pytest

OTHER_KEY = "sk-acceptance-OTHER-77aa01"
HELD_TOOL = {
    "      kind: builtin.workspace.read\n": "      kind: builtin.workspace.read\n      approval: always\n"
}


def _json(cli: Cli, db: Path, *args: str) -> Any:
    got = cli("--output", "json", *args, "--db", str(db))
    assert got.rc == 0, got.stderr
    return got.data


def _refused_under_another_key(cli: Cli, db: Path, run_id: str, server: AgentServer) -> None:
    """Resume under ``OTHER_KEY``: refused, nothing sent or recorded, the run paused."""
    sent, before = len(server.seen), _json(cli, db, "inspect", run_id)
    refused = cli(
        "--output", "json", "resume", run_id, "--db", str(db), env={OPENAI.key_env: OTHER_KEY}
    )
    assert refused.rc == 3, refused.stderr
    message = refused.error["error"]["message"]
    assert "UNIQUE" not in message
    assert "the credential or headers resolved now differ" in message
    assert "env:OPENAI_API_KEY resolves to another value" in message
    assert "nothing was sent" in message and "Resume with the same credential" in message
    assert KEY not in refused.stderr and OTHER_KEY not in refused.stderr
    assert len(server.seen) == sent
    after = _json(cli, db, "inspect", run_id)
    assert after["run"]["state"] == "paused"
    assert [e["effectId"] for e in after["effects"]] == [e["effectId"] for e in before["effects"]]


def test_a_changed_key_after_an_approval_pause_is_refused_and_the_same_key_goes_on(
    cli: Cli, tmp_path: Path, server: AgentServer
) -> None:
    wf, db = OPENAI.workflow(server, tmp_path / "ws", **HELD_TOOL), tmp_path / "state" / "r.db"
    paused = cli("--output", "json", "run", str(wf), "--db", str(db), env={OPENAI.key_env: KEY})
    assert paused.rc == 3, paused.stderr
    run_id = paused.data["runId"]
    [pending] = _json(cli, db, "approvals", "list", run_id)["approvals"]
    _json(cli, db, "approvals", "approve", pending["approvalId"], "--reason", "ok")
    _refused_under_another_key(cli, db, run_id, server)
    # Twice: a refusal leaves nothing behind that a second one would trip on.
    _refused_under_another_key(cli, db, run_id, server)
    done = cli("--output", "json", "resume", run_id, "--db", str(db), env={OPENAI.key_env: KEY})
    assert done.rc == 0, done.stderr
    assert done.data["output"]["describe"]["firstLine"] == NOTES_FIRST_LINE
    assert len(server.seen) == 2  # the first call reused, only the last one sent


def test_a_changed_key_after_a_crash_reconciled_applied_is_refused(
    cli: Cli, tmp_path: Path, server: AgentServer
) -> None:
    wf, db = OPENAI.workflow(server, tmp_path / "ws"), tmp_path / "state" / "r.db"
    # The third effect (the second model call) started, then the coordinator died: unsent.
    crash = {"AGENTCTL_CRASH_AT": "coordinator.after_started", "AGENTCTL_CRASH_HIT": "3"}
    killed = cli(
        "--output", "json", "run", str(wf), "--db", str(db), env={OPENAI.key_env: KEY, **crash}
    )
    assert killed.rc == -9, killed.stderr
    run_id = _json(cli, db, "runs", "list")["runs"][0]["runId"]
    [_, last] = [
        e for e in _json(cli, db, "inspect", run_id)["effects"] if e["operation"] == "openai"
    ]
    answer = {"path": "notes.txt", "bytes": 1, "firstLine": "from the operator"}
    result = {"finish": "complete", "text": json.dumps(answer), "toolCalls": [], "usage": {}}
    (tmp_path / "answer.json").write_text(json.dumps(result), encoding="utf-8")
    reconcile = (
        "effects",
        "reconcile",
        last["effectId"],
        "--status",
        "applied",
        "--reason",
        "seen",
    )
    _json(cli, db, *reconcile, "--result-file", str(tmp_path / "answer.json"))
    _refused_under_another_key(cli, db, run_id, server)  # the crashed run: now paused
    done = cli("--output", "json", "resume", run_id, "--db", str(db), env={OPENAI.key_env: KEY})
    assert done.rc == 0, done.stderr
    assert done.data["output"] == {"describe": answer}
    assert len(server.seen) == 1  # the reconciled call's answer reused, nothing resent
