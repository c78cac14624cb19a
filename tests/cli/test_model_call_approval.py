"""``policy.approval: always`` holds an agent's model calls too (spec/dsl.md §7: "always ⇒
all", judged per effect; spec/cli.md §9: non-interactive + needed ⇒ ``nonInteractive``). With
``pause`` each model call waits for its approval as a tool call does: the run pauses (exit 3)
before the provider is called, runs the call once approved on ``resume``, and fails the task
when it is rejected, the provider never called. The CLI in a tmp dir, the fake provider."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.clibackend import LedgerTarget
from tests.conftest import Cli
from tests.providers import fixtures as fx
from tests.providers.fixtures import FixtureServer, Reply

WORKFLOW = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: ask-the-model }
spec:
  policy: { approval: always, toolsAllow: [echo] }
  providers:
    sim: { kind: fake }
  tools:
    echo:
      kind: builtin.echo
      description: echo
      capability: internal
      risk: low
      effectClass: pure
      idempotency: pure
      retrySafe: true
      timeoutSeconds: 5
      inputSchema:
        type: object
        properties: { text: { type: string } }
        required: [text]
        additionalProperties: false
  agents:
    helper:
      provider: sim
      model: m
      instructions: Help.
      tools: TOOLS
      providerOptions: { toolInput: { text: hi }, finalText: done }
  tasks:
    - { id: ask, uses: "agent:helper", with: { prompt: go } }
"""

DB = ("--db", "r.db")


def _write(tmp_path: Path, tools: str) -> None:
    (tmp_path / "wf.yaml").write_text(WORKFLOW.replace("TOOLS", tools), encoding="utf-8")


def _inspect(cli: Cli, run_id: str) -> dict[str, Any]:
    shown: dict[str, Any] = cli("--output", "json", "inspect", run_id, *DB).data
    return shown


def _pending(cli: Cli, run_id: str) -> dict[str, Any]:
    [approval] = cli("--output", "json", "approvals", "list", run_id, *DB).data["approvals"]
    assert approval["status"] == "pending"
    pending: dict[str, Any] = approval
    return pending


def _decide(cli: Cli, verb: str, approval: dict[str, Any]) -> None:
    done = cli("approvals", verb, str(approval["approvalId"]), "--reason", "checked", *DB)
    assert done.rc == 0, done.stderr


def _model_effects(shown: dict[str, Any]) -> list[str]:
    return [e["status"] for e in shown["effects"] if e["operation"] == "fake"]


def test_a_model_call_waits_for_its_approval_and_runs_once_approved(
    cli: Cli, tmp_path: Path
) -> None:
    _write(tmp_path, "[]")
    paused = cli("--output", "json", "run", "wf.yaml", *DB)
    assert paused.rc == 3, paused.stderr
    assert paused.data["state"] == "paused"
    run_id = str(paused.data["runId"])
    shown = _inspect(cli, run_id)
    assert _model_effects(shown) == ["waiting_for_approval"]
    assert [t["state"] for t in shown["tasks"]] == ["waiting_for_approval"]
    assert shown["providerSessions"] == [] and shown["toolCalls"] == []
    approval = _pending(cli, run_id)
    assert approval["taskId"] == "ask" and "model call sim" in approval["reason"]
    assert (approval["agent"], approval["tool"]) == ("helper", None)
    listed = cli("approvals", "list", run_id, *DB)  # the human table: no "None"
    assert "None" not in listed.stdout and "model call sim" in listed.stdout
    _decide(cli, "approve", approval)
    done = cli("--output", "json", "resume", run_id, *DB)
    assert done.rc == 0, done.stderr
    assert done.data["output"]["ask"]["text"] == "done"
    shown = _inspect(cli, run_id)
    assert _model_effects(shown) == ["succeeded"]
    [session] = shown["providerSessions"]
    assert session["calls"] == 1


def test_each_model_call_and_tool_call_of_a_turn_loop_is_asked_for(
    cli: Cli, tmp_path: Path
) -> None:
    # The loop: model call (held), the echo tool call (held), the second model call (held).
    _write(tmp_path, "[echo]")
    run_id = str(cli("--output", "json", "run", "wf.yaml", *DB).data["runId"])
    asked = []
    for _ in range(3):
        approval = _pending(cli, run_id)
        asked.append(approval["tool"] or "model")
        _decide(cli, "approve", approval)
        done = cli("--output", "json", "resume", run_id, *DB)
    assert asked == ["model", "echo", "model"]
    assert done.rc == 0, done.stderr
    assert done.data["output"]["ask"]["text"] == "done"
    assert _model_effects(_inspect(cli, run_id)) == ["succeeded", "succeeded"]


def test_a_rejected_model_call_fails_the_task_without_calling_the_provider(
    cli: Cli, tmp_path: Path
) -> None:
    _write(tmp_path, "[]")
    run_id = str(cli("--output", "json", "run", "wf.yaml", *DB).data["runId"])
    _decide(cli, "reject", _pending(cli, run_id))
    failed = cli("--output", "json", "resume", run_id, *DB)
    assert (failed.rc, failed.data["state"]) == (4, "failed"), failed.stderr
    shown = _inspect(cli, run_id)
    [task] = shown["tasks"]
    assert "model call fake was rejected" in task["error"]
    assert "the model was not called" in task["error"]
    assert _model_effects(shown) == ["cancelled"]
    assert shown["providerSessions"] == []


def test_nobody_to_ask_denies_the_model_call_and_records_nothing(cli: Cli, tmp_path: Path) -> None:
    _write(tmp_path, "[]")
    text = (tmp_path / "wf.yaml").read_text(encoding="utf-8")
    denying = text.replace("approval: always,", "approval: always, nonInteractive: fail,")
    (tmp_path / "wf.yaml").write_text(denying, encoding="utf-8")
    denied = cli("--output", "json", "run", "wf.yaml", *DB)
    assert denied.rc == 4, denied.stderr
    assert "model call denied" in denied.stderr
    [run] = cli("--output", "json", "runs", "list", *DB).data["runs"]
    shown = _inspect(cli, str(run["runId"]))
    assert shown["effects"] == [] and shown["approvals"] == []


KEY = "sk-held-model-call-fixture-4242"

OPENAI_AGENT = """  agents:
    talker:
      provider: main
      model: gpt-fixture
      instructions: Talk.
  tasks:
    - { id: t, uses: "agent:talker", with: { prompt: go } }
"""


def test_a_held_model_call_whose_key_changed_is_not_sent_and_is_told_as_held(
    cli: Cli, ledger_target: LedgerTarget, tmp_path: Path, server: FixtureServer
) -> None:
    # The approval shows the credential as its reference, never the value; a key rotated
    # before the approved call is sent refuses the resume (nothing sent), and the message
    # says what the same key does for a call that was held: no recorded result exists.
    spec = fx.local_openai_spec(server.port, "held-key", "    approval: always\n")
    (tmp_path / "wf.yaml").write_text(spec + OPENAI_AGENT, encoding="utf-8")
    server.script(Reply(body=fx.openai_text("hello")))
    paused = cli("--output", "json", "run", "wf.yaml", *DB, env={"FIXTURE_KEY": KEY})
    assert paused.rc == 3, paused.stderr
    run_id = str(paused.data["runId"])
    approval = _pending(cli, run_id)
    credential = approval["redactedInput"]["input"]["credential"]
    assert credential["source"] == "env:FIXTURE_KEY" and len(credential["sha256"]) == 64
    assert KEY not in ledger_target.contents(tmp_path / "r.db")
    _decide(cli, "approve", approval)
    rotated = cli("--output", "json", "resume", run_id, *DB, env={"FIXTURE_KEY": KEY + "-new"})
    assert rotated.rc == 3, rotated.stderr
    message = rotated.error["error"]["message"]
    assert "env:FIXTURE_KEY resolves to another value" in message
    assert "recorded result" not in message and "approved" in message
    assert server.seen == []
    done = cli("--output", "json", "resume", run_id, *DB, env={"FIXTURE_KEY": KEY})
    assert done.rc == 0, done.stderr
    assert len(server.seen) == 1 and KEY not in ledger_target.contents(tmp_path / "r.db")
