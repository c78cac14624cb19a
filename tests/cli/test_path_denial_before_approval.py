"""A path the policy denies is denied before anyone is asked to approve it (spec/dsl.md §7).

A read out of the workspace, a process ``cwd`` that leads out of it, or an agent tool's file
path outside its bounds fails the task at once — exit 4, no effect, no approval — whatever
``policy.approval`` says, as a write outside the writable roots and a ``toolsDeny`` name
already are. Before, such an effect was held for an approval (the run paused, exit 3) that
could only end in the same denial after ``approve`` and ``resume``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

HEAD = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: confined }
spec:
"""

_READ_TOOL = """\
  tools:
    peek: { kind: builtin.workspace.read, description: read, capability: filesystem.read,
      risk: high, effectClass: observe, idempotency: idempotent, retrySafe: true,
      timeoutSeconds: 5, outputSchema: { type: object },
      inputSchema: { type: object, properties: { path: { type: string } }, required: [path],
        additionalProperties: false } }
"""

_WRITE_TOOL = """\
  tools:
    put: { kind: builtin.workspace.write, description: write, capability: filesystem.write,
      risk: medium, effectClass: workspace_mutate, idempotency: idempotent, retrySafe: true,
      timeoutSeconds: 5, outputSchema: { type: object },
      inputSchema: { type: object, properties: { path: { type: string }, content: { type: string } },
        required: [path, content], additionalProperties: false } }
"""


def _agent(tool: str, tool_input: str) -> str:
    return f"""\
  providers: {{ sim: {{ kind: fake }} }}
  agents:
    a: {{ provider: sim, model: m, instructions: go, tools: [{tool}],
      providerOptions: {{ toolInput: {tool_input}, finalText: done }} }}
  tasks: [ {{ id: t, uses: "agent:a", with: {{ prompt: go }} }} ]
"""


CASES = {
    "read-parent": (
        "{ approval: always }",
        """\
  actions: { r: { kind: builtin.read } }
  tasks: [ { id: t, uses: "action:r", with: { path: ../secret.txt } } ]
""",
    ),
    "read-symlink-out": (
        "{ approval: always }",
        """\
  actions: { r: { kind: builtin.read } }
  tasks: [ { id: t, uses: "action:r", with: { path: ws/out-link } } ]
""",
    ),
    "process-cwd-symlink-out": (
        "{ approval: mutations, processAllowlist: [true] }",
        """\
  actions: { p: { kind: builtin.shell.exec, command: /bin/true, cwd: ws/dir-link } }
  tasks: [ { id: t, uses: "action:p" } ]
""",
    ),
    "tool-read-parent": (
        "{ approval: high_risk }",
        _READ_TOOL + _agent("peek", "{ path: ../secret.txt }"),
    ),
    "tool-write-outside-roots": (
        "{ approval: mutations, writableRoots: [out] }",
        _WRITE_TOOL + _agent("put", "{ path: elsewhere.txt, content: x }"),
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_denied_path_fails_at_once_and_asks_no_approval(  # type: ignore[no-untyped-def]
    name: str, cli, write_workflow, tmp_path: Path
) -> None:
    policy, body = CASES[name]
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    (tmp_path / "secret.txt").write_text("secret")  # ``..`` of the workspace below
    ws = tmp_path / "wsroot"
    (ws / "ws").mkdir(parents=True)
    os.symlink(outside / "secret.txt", ws / "ws" / "out-link")
    os.symlink(outside, ws / "ws" / "dir-link")
    wf = ws / "wf.yaml"
    wf.write_text(HEAD + f"  policy: {policy}\n" + body, encoding="utf-8")
    db = tmp_path / "state" / "r.db"
    done = cli("--output", "json", "run", str(wf), "--db", str(db))
    assert done.rc == 4, (name, done.rc, done.stdout, done.stderr)
    error = done.error["error"]
    assert "path denied" in error["message"], error
    seen = cli("--output", "json", "inspect", error["runId"], "--db", str(db)).data
    assert seen["run"]["state"] == "failed"
    assert [(t["taskId"], t["state"]) for t in seen["tasks"]] == [("t", "failed")]
    assert "path denied" in seen["tasks"][0]["error"]
    assert seen["approvals"] == []
    held = [e for e in seen["audit"] if e["eventType"].startswith("approval.")]
    assert held == []
    # Only the agent's model call (which asked for the tool) is an effect; the denied
    # request never became one.
    assert [e["operation"] for e in seen["effects"] if e["effectClass"] != "model"] == []
    assert not (ws / "elsewhere.txt").exists()
