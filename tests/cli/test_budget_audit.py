"""A budget reservation and a refusal are audited under the task whose dispatch they are
(spec/cli.md §3: audit events carry a task id), so a script reading the audit can tell
which task a budget refused."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import Cli

WORKFLOW = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: { name: metered }
spec:
  runtime: { maxConcurrency: 2, budgets: { maxProcessOutputBytes: 1000 } }
  policy: { approval: never, processAllowlist: [echo] }
  actions:
    say: { kind: builtin.shell.exec, command: /bin/echo, args: [hi], combinedOutputLimitBytes: 600 }
  tasks:
    - { id: first, uses: "action:say" }
    - { id: second, uses: "action:say" }
"""


def test_budget_events_name_their_task(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "wf.yaml").write_text(WORKFLOW, encoding="utf-8")
    refused = cli("--output", "json", "run", "wf.yaml", "--db", "r.db")
    assert refused.rc == 4, refused.stderr  # both reserve 600 of 1,000 bytes: one is refused
    run_id = refused.error["error"]["runId"]
    audit = cli("--output", "json", "inspect", run_id, "--db", "r.db").data["audit"]
    budget = [(a["eventType"], a["taskId"]) for a in audit if a["eventType"].startswith("budget")]
    assert budget == [("budget.reserved", "first"), ("budget.exceeded", "second")]


WRITES = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: { name: metered-files }
spec:
  runtime: { budgets: { maxArtifactBytes: 8 } }
  policy: { approval: never, writableRoots: [out] }
  actions:
    put: { kind: builtin.write }
  tasks:
    - { id: small, uses: "action:put", with: { path: out/a.txt, content: "12345" } }
    - { id: large, uses: "action:put", needs: [small], with: { path: out/b.txt, content: "6789" } }
"""


def test_artifact_budget_events_name_the_task_whose_file_it_is(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "wf.yaml").write_text(WRITES, encoding="utf-8")
    refused = cli("--output", "json", "run", "wf.yaml", "--db", "r.db")
    assert refused.rc == 4, refused.stderr  # 5 of 8 bytes stored, then 4 more refused
    run_id = refused.error["error"]["runId"]
    audit = cli("--output", "json", "inspect", run_id, "--db", "r.db").data["audit"]
    budget = [(a["eventType"], a["taskId"]) for a in audit if a["eventType"].startswith("budget")]
    assert budget == [("budget.reserved", "small"), ("budget.exceeded", "large")]
