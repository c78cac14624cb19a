"""A resumed, approved effect that can no longer be prepared fails with the reason it cannot
(a secret no longer set, a path now outside the workspace), not with "its input has changed",
which points the operator at a retry that would fail the same way."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import Cli

WORKFLOW = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: { name: gone }
spec:
  policy: { approval: always, processAllowlist: [true], environmentAllowlist: [TOK] }
  actions: { go: { kind: builtin.shell.exec, command: /bin/true, env: { TOK: { env: TOK } } } }
  tasks: [ { id: t, uses: "action:go" } ]
"""


def test_an_approved_effect_whose_secret_is_gone_says_so(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "wf.yaml").write_text(WORKFLOW, encoding="utf-8")
    paused = cli("--output", "json", "run", "wf.yaml", "--db", "r.db", env={"TOK": "abc"})
    assert paused.rc == 3, paused.stderr
    run_id = paused.data["runId"]
    listed = cli("--output", "json", "approvals", "list", run_id, "--db", "r.db")
    [approval] = listed.data["approvals"]
    approved = cli("approvals", "approve", approval["approvalId"], "--reason", "ok", "--db", "r.db")
    assert approved.rc == 0, approved.stderr
    resumed = cli("--output", "json", "resume", run_id, "--db", "r.db")  # TOK is not set now
    assert resumed.rc == 4, resumed.stderr
    message = resumed.error["error"]["message"]
    assert "environment variable TOK is not set" in message
    assert "input has changed" not in message
