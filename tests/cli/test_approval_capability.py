"""An action's approval names the capability the policy judged (`filesystem.write`,
`process.exec`, `memory.write`: spec/dsl.md §3's policy names, the ones `toolsAllow` and
`toolsDeny` match), as an agent's tool approval does — not the action's kind."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import Cli

WORKFLOW = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: { name: asks }
spec:
  policy: { approval: always, writableRoots: [out], processAllowlist: [true] }
  actions:
    save: { kind: builtin.write }
    exec: { kind: builtin.shell.exec, command: /bin/true }
    remember: { kind: builtin.memory.write }
  tasks:
    - { id: t, uses: "action:ACTION", with: WITH }
"""

CASES = [
    ("save", "{ path: out/a.txt, content: hi }", "filesystem.write"),
    ("exec", "{}", "process.exec"),
    ("remember", "{ key: k, value: 1 }", "memory.write"),
]


@pytest.mark.parametrize(("action", "given", "capability"), CASES)
def test_an_action_approval_names_its_policy_capability(
    cli: Cli, tmp_path: Path, action: str, given: str, capability: str
) -> None:
    text = WORKFLOW.replace("ACTION", action).replace("WITH", given)
    (tmp_path / "wf.yaml").write_text(text, encoding="utf-8")
    paused = cli("--output", "json", "run", "wf.yaml", "--db", "r.db")
    assert paused.rc == 3, paused.stderr
    listed = cli("--output", "json", "approvals", "list", paused.data["runId"], "--db", "r.db")
    assert [a["capability"] for a in listed.data["approvals"]] == [capability]
