"""What an operator is shown of a tool call hides sensitive keys (spec/cli.md §12).

An approval's ``redactedInput`` and a tool call's ``input``/``output`` (``inspect``'s
``toolCalls``) are records to show: a key named like a credential (``password``, ``token``,
``apiKey``, …) has its value replaced whole, in the output and in the database file. The
effect keeps the request it executes, so the call itself still receives the real value.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests.conftest import Cli

WORKFLOW = """apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: shown }
spec:
  policy: { approval: always }
  providers: { sim: { kind: fake } }
  tools:
    say:
      kind: builtin.echo
      capability: internal
      risk: low
      effectClass: pure
      idempotency: pure
      inputSchema: { type: object, additionalProperties: false, required: [password, note],
        properties: { password: { type: string }, note: { type: string } } }
  agents:
    w: { provider: sim, model: m, instructions: hi, tools: [say],
      providerOptions: { toolInput: { password: hunter2-PW, note: plain-NOTE } } }
  tasks:
    - { id: t, uses: "agent:w", with: { prompt: p } }
"""
SECRET = "hunter2-PW"


def _rows(db: Path, sql: str) -> str:
    with sqlite3.connect(db) as conn:
        return repr(conn.execute(sql).fetchall())


@pytest.mark.sqlite_only(reason="reads the SQLite file's rows; the CLI path is the same")
def test_approval_and_tool_call_records_hide_sensitive_keys(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "wf.yaml").write_text(WORKFLOW, encoding="utf-8")
    paused = cli("--output", "json", "run", "wf.yaml", "--db", "r.db")
    assert paused.rc == 3, paused.stderr
    run_id = paused.data["runId"]
    # Under `always` the model call, the tool call and the answering model call are each
    # held in turn; the tool call's approval shows its arguments.
    resumed, asked = paused, []
    while resumed.rc == 3:
        listed = cli("--output", "json", "approvals", "list", run_id, "--db", "r.db").data
        (approval,) = listed["approvals"]
        asked.append(approval["tool"] or "model")
        if approval["tool"] == "say":
            shown = approval["redactedInput"]["input"]
            assert shown["arguments"] == {"password": "[REDACTED]", "note": "plain-NOTE"}
        assert SECRET not in repr(approval)  # a model call's too: its messages carry it
        yes = ("approvals", "approve", approval["approvalId"], "--reason", "ok", "--db", "r.db")
        assert cli(*yes).rc == 0
        resumed = cli("--output", "json", "resume", run_id, "--db", "r.db")
    assert resumed.rc == 0, resumed.stderr
    assert asked == ["model", "say", "model"]

    seen = cli("--output", "json", "inspect", run_id, "--db", "r.db").data
    (call,) = seen["toolCalls"]
    assert call["status"] == "succeeded"
    assert call["input"] == call["output"] == {"password": "[REDACTED]", "note": "plain-NOTE"}
    db = tmp_path / "r.db"
    for table, columns in (("approvals", "redacted_input_json"), ("tool_calls", "*")):
        assert SECRET not in _rows(db, f"SELECT {columns} FROM {table}"), table
    # The call itself ran with the value the model gave: the model call's recorded answer
    # (which the attempt replays on resume) still carries it.
    assert SECRET in _rows(db, "SELECT result_json FROM effects")
