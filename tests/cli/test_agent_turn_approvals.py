"""Approvals inside an agent turn (issue 12 item 6), through the CLI as a black box.

An agent's tool call whose policy needs an approval pauses the run (exit 3) with a pending
approval naming the tool call; approve + ``resume`` runs the tool exactly once and the agent
continues with its result (the model call before it reused, not resent); reject ends the tool
call ``rejected`` and fails the task saying so. Both with the scripted ``fake`` provider and
with an OpenAI Responses fixture server on 127.0.0.1, which must see the tool's result.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.conftest import Cli
from tests.providers import fixtures as fx
from tests.providers.fixtures import FixtureServer, Reply

KEY = "sk-approval-fixture-77"
TOOL = "  tools:\n" + fx.SAVE_TOOL
FAKE = f"""apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: {{ name: approve-in-turn }}
spec:
  policy: {{ approval: mutations, writableRoots: ["."] }}
  providers:
    sim: {{ kind: fake }}
{TOOL}
  agents:
    writer:
      provider: sim
      model: m
      instructions: Write.
      tools: [save]
      providerOptions:
        toolInput: {{ path: out.txt, content: hello }}
        finalText: done
  tasks:
    - {{ id: w, uses: "agent:writer", with: {{ prompt: go }} }}
"""


def _openai_workflow(port: int) -> str:
    policy = '    approval: mutations\n    writableRoots: ["."]\n'
    return (
        fx.local_openai_spec(port, "approve-in-turn-openai", policy)
        + f"""{TOOL}
  agents:
    writer:
      provider: main
      model: gpt-fixture
      instructions: Write.
      tools: [save]
  tasks:
    - {{ id: w, uses: "agent:writer", with: {{ prompt: go }} }}
"""
    )


def _json(cli: Cli, *args: str, env: dict[str, str] | None = None) -> Any:
    return cli("--output", "json", *args, "--db", "r.db", env=env)


def _pause(cli: Cli, env: dict[str, str] | None = None) -> tuple[str, dict[str, Any]]:
    """Run the workflow to its pause; the run id and its one pending approval."""
    paused = _json(cli, "run", "wf.yaml", env=env)
    assert paused.rc == 3, paused.stderr
    assert paused.data["state"] == "paused"
    run_id = str(paused.data["runId"])
    [approval] = _json(cli, "approvals", "list", run_id).data["approvals"]
    return run_id, approval


def _effects(cli: Cli, run_id: str) -> list[dict[str, Any]]:
    return list(_json(cli, "effects", "list", run_id).data["effects"])


def test_fake_agent_pauses_at_the_tool_call_then_runs_it_once(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "wf.yaml").write_text(FAKE)
    run_id, approval = _pause(cli)
    assert approval["tool"] == "save" and approval["agent"] == "writer"
    assert approval["redactedInput"]["toolCallId"] == "w:1:fake-call-1"
    assert "w:1:fake-call-1" in approval["reason"]
    assert not (tmp_path / "out.txt").exists()
    held = _effects(cli, run_id)
    assert [(e["operation"], e["status"]) for e in held] == [
        ("fake", "succeeded"),
        ("builtin.write", "waiting_for_approval"),
    ]
    # Resuming before anyone decided stays paused and records nothing new.
    again = _json(cli, "resume", run_id)
    assert again.rc == 3 and again.data["state"] == "paused"
    assert _effects(cli, run_id) == held
    assert len(_json(cli, "approvals", "list", run_id).data["approvals"]) == 1

    ok = _json(cli, "approvals", "approve", approval["approvalId"], "--reason", "fine")
    assert ok.rc == 0, ok.stderr
    done = _json(cli, "resume", run_id)
    assert done.rc == 0, done.stderr
    assert done.data["output"]["w"]["text"] == "done"
    assert (tmp_path / "out.txt").read_text() == "hello"
    after = _effects(cli, run_id)
    assert [(e["operation"], e["status"]) for e in after] == [
        ("fake", "succeeded"),
        ("builtin.write", "succeeded"),
        ("fake", "succeeded"),
    ]
    assert after[0]["startedAt"] == held[0]["startedAt"]  # the first model call was reused
    [call] = _json(cli, "inspect", run_id).data["toolCalls"]
    assert call["status"] == "succeeded" and call["callId"] == "fake-call-1"
    # What the model received for the write (the tool's shaped output), not the raw result.
    assert sorted(call["output"]) == ["bytes", "path", "sha256"] and call["output"]["bytes"] == 5


def test_rejected_tool_call_fails_the_task_saying_so(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "wf.yaml").write_text(FAKE)
    run_id, approval = _pause(cli)
    no = _json(cli, "approvals", "reject", approval["approvalId"], "--reason", "not today")
    assert no.rc == 0, no.stderr
    failed = _json(cli, "resume", run_id)
    assert failed.rc == 4  # a rejection ends the run: its outcome is printed (spec/cli.md §5)
    assert failed.data["state"] == "failed"
    assert not (tmp_path / "out.txt").exists()
    inspection = _json(cli, "inspect", run_id).data
    [call] = inspection["toolCalls"]
    assert call["status"] == "rejected" and "not today" in call["error"]
    assert call["input"] == {"path": "out.txt", "content": "hello"}  # what the model sent
    [task] = inspection["tasks"]
    message = task["error"]
    assert task["state"] == "failed"
    assert "w:1:fake-call-1" in message and "rejected" in message and "not today" in message
    statuses = [(e["operation"], e["status"]) for e in _effects(cli, run_id)]
    assert statuses == [("fake", "succeeded"), ("builtin.write", "cancelled")]


def test_openai_server_sees_the_approved_tool_result(
    cli: Cli, tmp_path: Path, server: FixtureServer
) -> None:
    (tmp_path / "wf.yaml").write_text(_openai_workflow(server.port))
    server.script(
        Reply(body=fx.openai_tool_call("save", {"path": "out.txt", "content": "hi"}, "call_9")),
        Reply(body=fx.openai_text("saved")),
    )
    env = {"FIXTURE_KEY": KEY}
    run_id, approval = _pause(cli, env)
    assert approval["redactedInput"]["toolCallId"] == "w:1:call_9"
    assert len(server.seen) == 1
    _json(cli, "approvals", "approve", approval["approvalId"], "--reason", "fine")
    done = _json(cli, "resume", run_id, env=env)
    assert done.rc == 0, done.stderr
    assert done.data["output"]["w"]["text"] == "saved"
    assert (tmp_path / "out.txt").read_text() == "hi"
    assert len(server.seen) == 2  # the first call was reused from the ledger, not resent
    [answer] = [i for i in server.seen[1].body["input"] if i.get("type") == "function_call_output"]
    assert answer["call_id"] == "call_9" and '"path": "out.txt"' in answer["output"]
    assert server.seen[1].headers["authorization"] == f"Bearer {KEY}"
    writes = [e for e in _effects(cli, run_id) if e["operation"] == "builtin.write"]
    assert [e["status"] for e in writes] == ["succeeded"]


def test_a_hold_survives_a_crash_right_after_it_committed(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "wf.yaml").write_text(FAKE)
    crash = {"AGENTCTL_CRASH_AT": "coordinator.after_requested"}
    killed = cli("--output", "json", "run", "wf.yaml", "--db", "r.db", env=crash)
    assert killed.rc == -9, killed.stderr
    run_id = _json(cli, "runs", "list").data["runs"][0]["runId"]
    again = _json(cli, "resume", run_id)
    assert again.rc == 3 and again.data["state"] == "paused", again.stderr
    [approval] = _json(cli, "approvals", "list", run_id).data["approvals"]
    assert approval["redactedInput"]["toolCallId"] == "w:1:fake-call-1"
    _json(cli, "approvals", "approve", approval["approvalId"], "--reason", "fine")
    done = _json(cli, "resume", run_id)
    assert done.rc == 0, done.stderr
    writes = [e for e in _effects(cli, run_id) if e["operation"] == "builtin.write"]
    assert [e["status"] for e in writes] == ["succeeded"]
    assert (tmp_path / "out.txt").read_text() == "hello"


ECHO_TOOL = """    note:
      kind: builtin.echo
      description: echo its input
      capability: internal
      effectClass: pure
      risk: low
      idempotency: pure
      outputSchema: { type: object }
      inputSchema: { type: object, additionalProperties: false, required: [said],
        properties: { said: { type: string } } }
"""


def test_a_pure_tool_call_is_recorded_when_the_next_call_is_denied(
    cli: Cli, tmp_path: Path, server: FixtureServer
) -> None:
    # One answer asks for a pure echo, then a write. Nobody can be asked and the policy
    # fails what needs an approval: the write is denied before anything is recorded, and the
    # echo it would have carried is still recorded, with the task's failure.
    workflow = _openai_workflow(server.port).replace(
        "approval: mutations", "approval: mutations\n    nonInteractive: fail"
    )
    workflow = workflow.replace(TOOL, TOOL + ECHO_TOOL).replace("[save]", "[note, save]")
    (tmp_path / "wf.yaml").write_text(workflow)
    echo = {"type": "function_call", "id": "fc_1", "call_id": "call_echo", "name": "note"}
    save = {"type": "function_call", "id": "fc_2", "call_id": "call_save", "name": "save"}
    server.script(
        Reply(
            body=fx.openai_response(
                [
                    {**echo, "arguments": '{"said": "hi"}', "status": "completed"},
                    {
                        **save,
                        "arguments": '{"path": "o.txt", "content": "x"}',
                        "status": "completed",
                    },
                ]
            )
        )
    )
    failed = _json(cli, "run", "wf.yaml", env={"FIXTURE_KEY": KEY})
    assert failed.rc == 4, failed.stderr
    assert "nonInteractive is fail" in failed.stderr
    shown = _json(cli, "inspect", failed.error["error"]["runId"]).data
    assert [(c["callId"], c["status"]) for c in shown["toolCalls"]] == [("call_echo", "succeeded")]
    assert [e["operation"] for e in shown["effects"]] == ["openai"]
    assert shown["approvals"] == [] and not (tmp_path / "o.txt").exists()


def test_a_call_id_the_model_repeats_is_held_and_recorded_once_per_call(
    cli: Cli, tmp_path: Path, server: FixtureServer
) -> None:
    # Models may repeat a call id within an attempt (Gemini sends none, so each answer's
    # first call is ``call-1``). The second call used to hit the tool_calls primary key:
    # a "database error" (exit 5) that every resume repeated.
    (tmp_path / "wf.yaml").write_text(_openai_workflow(server.port))
    server.script(
        Reply(body=fx.openai_tool_call("save", {"path": "a.txt", "content": "1"}, "call_9")),
        Reply(body=fx.openai_tool_call("save", {"path": "b.txt", "content": "2"}, "call_9")),
        Reply(body=fx.openai_text("saved both")),
    )
    env = {"FIXTURE_KEY": KEY}
    run_id, first = _pause(cli, env)
    assert first["redactedInput"]["toolCallId"] == "w:1:call_9"
    _json(cli, "approvals", "approve", first["approvalId"], "--reason", "fine")
    again = _json(cli, "resume", run_id, env=env)
    assert again.rc == 3, again.stderr
    pending = _json(cli, "approvals", "list", run_id).data["approvals"]
    [second] = [a for a in pending if a["status"] == "pending"]
    assert second["redactedInput"]["toolCallId"] == "w:1:call_9#2"
    _json(cli, "approvals", "approve", second["approvalId"], "--reason", "fine")
    done = _json(cli, "resume", run_id, env=env)
    assert done.rc == 0, done.stderr
    assert done.data["output"]["w"]["text"] == "saved both"
    assert (tmp_path / "a.txt").read_text() == "1" and (tmp_path / "b.txt").read_text() == "2"
    assert len(server.seen) == 3  # each model call sent once
    calls = _json(cli, "inspect", run_id).data["toolCalls"]
    assert [(c["callId"], c["status"], c["input"]["path"]) for c in calls] == [
        ("call_9", "succeeded", "a.txt"),
        ("call_9", "succeeded", "b.txt"),
    ]
