"""What `inspect` records of an agent's conversation, as a user of the original's first-agent
guide reads it (the CLI in a tmp dir, the fake provider):

- `providerSessions`: one per agent task attempt — provider, kind, model, status and finish,
  the number of model calls, the usage they reported (summed), the continuation (the latest
  model call, whose recorded input is the conversation) — in JSON and the human view;
- the agent's output `usage` is the attempt's total over its model calls, not the last one's;
- `toolCalls[].callId` is the id the model gave the call, and `output` is what the model
  received (the tool's shaped output), not the executor's raw result;
- a crash between two model calls, or with a model call started and not answered, neither
  duplicates nor loses the session: resume continues it, a reconciliation settles it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conftest import Cli

# A tool-using agent like the original's first-agent guide's (its own names and layout).
GUIDE = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: { name: first-agent }
spec:
  providers: { fake: { kind: fake } }
  policy: { workspaceRoot: ., approval: never }
  tools:
    read_fixture:
      kind: builtin.workspace.read
      description: read one workspace file
      capability: filesystem.read
      effectClass: observe
      risk: low
      idempotency: idempotent
      retrySafe: true
      timeoutSeconds: 5
      approval: never
      inputSchema: { type: object, required: [path], additionalProperties: false,
        properties: { path: { type: string } } }
      outputSchema: { type: object, required: [path, content, bytes, sha256],
        additionalProperties: false, properties: { path: { type: string },
        content: { type: string }, bytes: { type: integer }, sha256: { type: string } } }
  agents:
    inspector: { provider: fake, model: scripted, instructions: Report the marker.,
      tools: [read_fixture], maxTurns: 2, maxToolCalls: 1, timeoutSeconds: 5,
      providerOptions: { toolInput: { path: fixture/service.txt }, finalText: VERIFIED } }
  tasks:
    - { id: inspect, uses: "agent:inspector", with: { prompt: Use read_fixture. } }
"""
FIXTURE = "service=agentctl-acceptance\nmarker=READ_TOOL_CONFIRMED\n"


def _setup(tmp_path: Path, text: str = GUIDE) -> None:
    (tmp_path / "fixture").mkdir()
    (tmp_path / "fixture" / "service.txt").write_text(FIXTURE, encoding="utf-8")
    (tmp_path / "wf.yaml").write_text(text, encoding="utf-8")


def _inspect(cli: Cli, run_id: str) -> dict[str, Any]:
    seen = cli("--output", "json", "inspect", run_id, "--db", "r.db")
    assert seen.rc == 0, seen.stderr
    data: dict[str, Any] = seen.data
    return data


def _crashed_run(cli: Cli, tmp_path: Path, point: str) -> str:
    """The id of a run whose coordinator was killed the first time it reached ``point``."""
    _setup(tmp_path)
    crash = {"AGENTCTL_CRASH_AT": point, "AGENTCTL_CRASH_HIT": "1"}
    killed = cli("--output", "json", "run", "wf.yaml", "--db", "r.db", env=crash)
    assert killed.rc == -9, killed.stderr
    run_id: str = cli("--output", "json", "runs", "list", "--db", "r.db").data["runs"][0]["runId"]
    return run_id


def reconcile_applied(cli: Cli, tmp_path: Path, effect_id: str, answer: dict[str, Any]) -> None:
    """Settle an uncertain model call as applied, with ``answer`` as its result."""
    (tmp_path / "answer.json").write_text(json.dumps(answer), encoding="utf-8")
    settled = cli(
        "--output",
        "json",
        "effects",
        "reconcile",
        effect_id,
        "--db",
        "r.db",
        "--status",
        "applied",
        "--reason",
        "the provider's log shows the answer",
        "--result-file",
        "answer.json",
    )
    assert settled.rc == 0, settled.stderr


def _model_effects(seen: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in seen["effects"] if e["operation"] == "fake"]


def test_the_guide_run_shows_its_provider_session_usage_and_tool_call(
    cli: Cli, tmp_path: Path
) -> None:
    _setup(tmp_path)
    done = cli("--output", "json", "run", "wf.yaml", "--db", "r.db")
    assert done.rc == 0, done.stderr
    run_id = done.data["runId"]
    seen = _inspect(cli, run_id)
    [task] = seen["tasks"]
    # Two model calls of 1/1 each: the agent's output reports the attempt's 2/2.
    usage = task["output"]["usage"]
    assert (usage["inputTokens"], usage["outputTokens"]) == (2, 2)
    [session] = seen["providerSessions"]
    last = _model_effects(seen)[-1]
    assert {k: session[k] for k in ("runId", "taskId", "attempt", "provider", "model")} == {
        "runId": run_id,
        "taskId": "inspect",
        "attempt": 1,
        "provider": "fake",
        "model": "scripted",
    }
    assert (session["providerKind"], session["status"], session["finish"]) == (
        "fake",
        "completed",
        "complete",
    )
    assert session["calls"] == 2
    assert (session["usage"]["inputTokens"], session["usage"]["outputTokens"]) == (2, 2)
    assert session["continuation"] == {
        "kind": "conversation",
        "effectId": last["effectId"],
        "messages": 4,  # system, user, the model's tool call, the tool's result
    }
    assert session["createdAt"] <= session["updatedAt"]
    [call] = seen["toolCalls"]
    assert (call["callId"], call["taskId"], call["attempt"]) == ("fake-call-1", "inspect", 1)
    assert call["status"] == "succeeded"
    # The arguments the model sent (the executor's request stays on the call's effect).
    assert call["input"] == {"path": "fixture/service.txt"}
    # The output the model received (the tool's outputSchema shape), not {changed, status…}.
    assert sorted(call["output"]) == ["bytes", "content", "path", "sha256"]
    assert call["output"]["content"] == FIXTURE
    human = cli("inspect", run_id, "--db", "r.db", "--color", "never")
    assert human.rc == 0, human.stderr
    section = human.stdout.split("provider sessions", 1)[1].splitlines()
    assert section[2].split() == ["inspect", "1", "fake", "(scripted)", "completed", "2", "2/2"]


def test_each_attempt_has_its_own_session(cli: Cli, tmp_path: Path) -> None:
    retried = GUIDE.replace("finalText:", "failFirst: 1, finalText:").replace(
        "with: { prompt: Use read_fixture. } }",
        "with: { prompt: Use read_fixture. }, retry: { maxAttempts: 2 } }",
    )
    _setup(tmp_path, retried)
    done = cli("--output", "json", "run", "wf.yaml", "--db", "r.db")
    assert done.rc == 0, done.stderr
    sessions = _inspect(cli, done.data["runId"])["providerSessions"]
    shown = [(s["attempt"], s["status"], s["calls"], s["finish"]) for s in sessions]
    assert shown == [(1, "failed", 1, None), (2, "completed", 2, "complete")]
    assert sessions[0]["usage"] == {}  # the failed call reported nothing
    assert len({s["sessionId"] for s in sessions}) == 2


def test_a_crash_between_model_calls_neither_duplicates_nor_loses_the_session(
    cli: Cli, tmp_path: Path
) -> None:
    # The coordinator dies once the first model call's answer is durable.
    run_id = _crashed_run(cli, tmp_path, "coordinator.after_outcome")
    [before] = _inspect(cli, run_id)["providerSessions"]
    assert (before["status"], before["finish"], before["calls"]) == ("active", "tool_calls", 1)
    resumed = cli("--output", "json", "resume", run_id, "--db", "r.db")
    assert resumed.rc == 0, resumed.stderr
    seen = _inspect(cli, run_id)
    [after] = seen["providerSessions"]
    assert after["sessionId"] == before["sessionId"]
    assert (after["status"], after["calls"]) == ("completed", 2)  # the reused answer once
    assert (after["usage"]["inputTokens"], after["usage"]["outputTokens"]) == (2, 2)
    assert seen["tasks"][0]["output"]["usage"]["inputTokens"] == 2


def test_an_unanswered_model_call_leaves_the_session_uncertain_until_reconciled(
    cli: Cli, tmp_path: Path
) -> None:
    # The coordinator dies with the first model call started and never sent.
    run_id = _crashed_run(cli, tmp_path, "coordinator.after_started")
    parked = cli("--output", "json", "resume", run_id, "--db", "r.db")
    assert parked.rc in (3, 4), parked.stderr
    seen = _inspect(cli, run_id)
    [session] = seen["providerSessions"]
    assert (session["status"], session["calls"], session["usage"]) == ("uncertain", 1, {})
    [first] = _model_effects(seen)
    assert first["status"] == "uncertain"
    answer = {
        "finish": "tool_calls",
        "text": "",
        "toolCalls": [
            {
                "id": "fake-call-1",
                "name": "read_fixture",
                "arguments": {"path": "fixture/service.txt"},
            }
        ],
        "usage": {"inputTokens": 5, "outputTokens": 7},
    }
    reconcile_applied(cli, tmp_path, first["effectId"], answer)
    [reconciled] = _inspect(cli, run_id)["providerSessions"]
    assert (reconciled["status"], reconciled["finish"]) == ("active", "tool_calls")
    done = cli("--output", "json", "resume", run_id, "--db", "r.db")
    assert done.rc == 0, done.stderr
    seen = _inspect(cli, run_id)
    [final] = seen["providerSessions"]
    assert (final["sessionId"], final["status"], final["calls"]) == (
        session["sessionId"],
        "completed",
        2,
    )
    # The reconciled answer's 5/7 once, plus the second call's 1/1.
    assert (final["usage"]["inputTokens"], final["usage"]["outputTokens"]) == (6, 8)
    output_usage = seen["tasks"][0]["output"]["usage"]
    assert (output_usage["inputTokens"], output_usage["outputTokens"]) == (6, 8)


def test_a_repeated_applied_reconciliation_counts_the_call_once(cli: Cli, tmp_path: Path) -> None:
    # spec/cli.md §4 allows the same status again: the later record supersedes the earlier
    # one, so the session counts the call's usage once, as the task's output does.
    run_id = _crashed_run(cli, tmp_path, "coordinator.after_started")
    assert cli("--output", "json", "resume", run_id, "--db", "r.db").rc in (3, 4)
    [first] = _model_effects(_inspect(cli, run_id))
    call = {
        "id": "fake-call-1",
        "name": "read_fixture",
        "arguments": {"path": "fixture/service.txt"},
    }
    answer = {"finish": "tool_calls", "text": "", "toolCalls": [call]}
    reconcile_applied(cli, tmp_path, first["effectId"], {**answer, "usage": {"inputTokens": 5}})
    final_answer = {
        "finish": "complete",
        "text": "done",
        "toolCalls": [],
        "usage": {"inputTokens": 3},
    }
    reconcile_applied(cli, tmp_path, first["effectId"], final_answer)
    [settled] = _inspect(cli, run_id)["providerSessions"]
    # Every counter, the ones the answer left out as 0 (the documented shape).
    assert settled["usage"] == {
        "inputTokens": 3,
        "outputTokens": 0,
        "reasoningTokens": 0,
        "cacheReadTokens": 0,
        "cacheWriteTokens": 0,
    }
    # The later answer's finish and the status it means, together (not the earlier status).
    assert (settled["finish"], settled["status"]) == ("complete", "completed")
    reconcile_applied(cli, tmp_path, first["effectId"], {**answer, "usage": {"inputTokens": 3}})
    done = cli("--output", "json", "resume", run_id, "--db", "r.db")
    assert done.rc == 0, done.stderr
    seen = _inspect(cli, run_id)
    [final] = seen["providerSessions"]
    # The latest record's 3, plus the second call's 1: the same as the task's output says.
    assert final["usage"]["inputTokens"] == 4
    assert seen["tasks"][0]["output"]["usage"]["inputTokens"] == 4


ECHO = (
    GUIDE.replace("kind: builtin.workspace.read", "kind: builtin.echo")
    .replace("capability: filesystem.read", "capability: internal")
    .replace("effectClass: observe", "effectClass: pure")
    .replace("idempotency: idempotent", "idempotency: pure")
    .replace(
        "outputSchema: { type: object, required: [path, content, bytes, sha256],\n"
        "        additionalProperties: false, properties: { path: { type: string },\n"
        "        content: { type: string }, bytes: { type: integer }, sha256: { type: string } } }",
        "outputSchema: { type: object }",
    )
)


def test_a_pure_tool_call_is_recorded_without_an_effect(cli: Cli, tmp_path: Path) -> None:
    # The original stores call ids, input/output digests and status of every built-in
    # model-callable tool's call, echo included; echo has no effect to correlate.
    _setup(tmp_path, ECHO)
    done = cli("--output", "json", "run", "wf.yaml", "--db", "r.db")
    assert done.rc == 0, done.stderr
    seen = _inspect(cli, done.data["runId"])
    assert [e["operation"] for e in seen["effects"]] == ["fake", "fake"]
    [call] = seen["toolCalls"]
    assert (call["callId"], call["attempt"], call["effectId"], call["status"]) == (
        "fake-call-1",
        1,
        None,
        "succeeded",
    )
    assert call["input"] == call["output"] == {"path": "fixture/service.txt"}


def test_a_pure_tool_call_before_the_task_fails_is_recorded_with_the_failure(
    cli: Cli, tmp_path: Path
) -> None:
    # maxTurns 1: the answer's echo call is the attempt's last call; no model call follows.
    _setup(tmp_path, ECHO.replace("maxTurns: 2", "maxTurns: 1"))
    failed = cli("--output", "json", "run", "wf.yaml", "--db", "r.db")
    assert failed.rc == 4
    run_id = cli("--output", "json", "runs", "list", "--db", "r.db").data["runs"][0]["runId"]
    seen = _inspect(cli, run_id)
    assert seen["tasks"][0]["state"] == "failed"
    [call] = seen["toolCalls"]
    assert (call["callId"], call["status"], call["effectId"]) == ("fake-call-1", "succeeded", None)


def test_a_pure_tool_call_is_recorded_once_across_a_crash_and_resume(
    cli: Cli, tmp_path: Path
) -> None:
    # The coordinator dies once the second model call's answer (after the echo) is durable.
    _setup(tmp_path, ECHO)
    crash = {"AGENTCTL_CRASH_AT": "coordinator.after_outcome", "AGENTCTL_CRASH_HIT": "2"}
    killed = cli("--output", "json", "run", "wf.yaml", "--db", "r.db", env=crash)
    assert killed.rc == -9, killed.stderr
    run_id = cli("--output", "json", "runs", "list", "--db", "r.db").data["runs"][0]["runId"]
    [before] = _inspect(cli, run_id)["toolCalls"]
    resumed = cli("--output", "json", "resume", run_id, "--db", "r.db")
    assert resumed.rc == 0, resumed.stderr
    [after] = _inspect(cli, run_id)["toolCalls"]
    assert after == before


def test_an_applied_model_result_must_be_a_model_answer(cli: Cli, tmp_path: Path) -> None:
    # spec/cli.md §4: an applied result is checked against the provider-response shape for
    # model effects. Before, {"hello": 1} was recorded and the resumed agent "succeeded"
    # with an empty text and a usage without counters.
    run_id = _crashed_run(cli, tmp_path, "coordinator.after_started")
    cli("--output", "json", "resume", run_id, "--db", "r.db")  # parks on the uncertain call
    [first] = _model_effects(_inspect(cli, run_id))
    assert first["status"] == "uncertain"
    bad_answers = [
        {"hello": 1},
        {"finish": "done", "text": "", "toolCalls": [], "usage": {}},
        {"finish": "complete", "text": "x", "toolCalls": [], "usage": {"inputTokens": -1}},
    ]
    for answer in bad_answers:
        (tmp_path / "answer.json").write_text(json.dumps(answer), encoding="utf-8")
        refused = cli(
            "--output",
            "json",
            "effects",
            "reconcile",
            first["effectId"],
            "--db",
            "r.db",
            "--status",
            "applied",
            "--reason",
            "guessing",
            "--result-file",
            "answer.json",
        )
        assert refused.rc == 4, (answer, refused.stderr)
        assert "not a model answer" in refused.stderr
    seen = _inspect(cli, run_id)
    assert seen["effectReconciliations"] == []
    assert _model_effects(seen)[0]["status"] == "uncertain"


def test_a_tool_call_reconciled_applied_is_recorded_with_what_the_model_got(
    cli: Cli, tmp_path: Path
) -> None:
    # The coordinator dies with the tool call started (the attempt's second effect). Before,
    # its toolCalls row stayed "started" with no output after the operator's applied
    # reconciliation and a resume that finished the run on that result.
    _setup(tmp_path)
    crash = {"AGENTCTL_CRASH_AT": "coordinator.after_started", "AGENTCTL_CRASH_HIT": "2"}
    killed = cli("--output", "json", "run", "wf.yaml", "--db", "r.db", env=crash)
    assert killed.rc == -9, killed.stderr
    run_id = cli("--output", "json", "runs", "list", "--db", "r.db").data["runs"][0]["runId"]
    cli("--output", "json", "resume", run_id, "--db", "r.db")  # parks on the uncertain read
    seen = _inspect(cli, run_id)
    [read] = [e for e in seen["effects"] if e["operation"] == "builtin.read"]
    assert read["status"] == "uncertain"
    result = {"status": "unchanged", "changed": False, "content": FIXTURE}
    reconcile_applied(cli, tmp_path, read["effectId"], result)
    done = cli("--output", "json", "resume", run_id, "--db", "r.db")
    assert done.rc == 0, done.stderr
    [call] = _inspect(cli, run_id)["toolCalls"]
    assert (call["callId"], call["status"], call["error"]) == ("fake-call-1", "succeeded", None)
    assert call["output"]["path"] == "fixture/service.txt"
    assert call["output"]["content"] == FIXTURE and call["output"]["bytes"] == len(FIXTURE)


def test_an_applied_tool_result_must_meet_the_tools_output_schema_once_shaped(
    cli: Cli, tmp_path: Path
) -> None:
    # cli.md §4: an applied result of `tool.<id>` is checked against the tool's outputSchema.
    # The agent shapes the executor's raw result ({status, changed, content} of a read) into
    # {path, bytes, sha256, content} before checking it, so that is what is judged here.
    # Before, a result without content was recorded (rc 0), and the resumed task then failed
    # with "tool read_fixture output is invalid".
    strict = GUIDE.replace("content: { type: string }", "content: { type: string, minLength: 1 }")
    assert strict != GUIDE
    _setup(tmp_path, strict)
    crash = {"AGENTCTL_CRASH_AT": "coordinator.after_started", "AGENTCTL_CRASH_HIT": "2"}
    killed = cli("--output", "json", "run", "wf.yaml", "--db", "r.db", env=crash)
    assert killed.rc == -9, killed.stderr
    run_id = cli("--output", "json", "runs", "list", "--db", "r.db").data["runs"][0]["runId"]
    cli("--output", "json", "resume", run_id, "--db", "r.db")  # parks on the uncertain read
    [read] = [e for e in _inspect(cli, run_id)["effects"] if e["operation"] == "builtin.read"]
    assert read["status"] == "uncertain"
    args = ["effects", "reconcile", read["effectId"], "--db", "r.db", "--status", "applied"]
    args += ["--reason", "the file was read", "--result-file", "result.json"]
    for bad in ({"status": "unchanged", "changed": False}, "read it"):
        (tmp_path / "result.json").write_text(json.dumps(bad), encoding="utf-8")
        refused = cli("--output", "json", *args)
        assert refused.rc == 4, (bad, refused.stdout, refused.stderr)
        message = refused.error["error"]["message"]
        assert "outputSchema of tool read_fixture" in message and "nothing was recorded" in message
        assert "Traceback" not in refused.stderr
        seen = _inspect(cli, run_id)
        assert seen["effectReconciliations"] == [], bad
        assert [e["status"] for e in seen["effects"] if e["effectId"] == read["effectId"]] == [
            "uncertain"
        ]
    # The raw result the executor would have given (not the shaped output) is accepted.
    good = {"status": "unchanged", "changed": False, "content": FIXTURE}
    (tmp_path / "result.json").write_text(json.dumps(good), encoding="utf-8")
    assert cli("--output", "json", *args).rc == 0
    done = cli("--output", "json", "resume", run_id, "--db", "r.db")
    assert done.rc == 0, done.stderr
