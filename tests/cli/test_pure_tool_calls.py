"""A pure tool's calls (``builtin.echo``) under the run's budget and under approvals.

A pure tool call is answered in the coordinator without an effect, but it is still a tool
call: it counts one ``toolCalls`` unit against ``runtime.budgets.maxToolCalls``, reserved
before its answer reaches the model (spec/cli.md §7), and a resumed attempt answering it again
counts nothing again. A pure tool whose contract (or policy) needs an approval pauses the run
like any tool call (spec/cli.md §9): exit 3, a pending approval, approve + ``resume`` answers
it exactly once, reject fails the task.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.conftest import Cli

WORKFLOW = """apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: toolbudget }
spec:
  runtime: { budgets: { maxToolCalls: LIMIT } }
  providers: { sim: { kind: fake } }
  tools:
    echo:
      kind: builtin.echo
      capability: internal
      effectClass: pure
      idempotency: pure
      risk: low
      inputSchema: { type: object, additionalProperties: false, required: [msg],
        properties: { msg: { type: string } } }
  agents:
    a: { provider: sim, model: m, instructions: hi, tools: [echo],
      providerOptions: { toolInput: { msg: hello } } }
  tasks:
    - { id: t1, uses: "agent:a", with: { prompt: one } }
    - { id: t2, uses: "agent:a", needs: [t1], with: { prompt: two } }
    - { id: t3, uses: "agent:a", needs: [t2], with: { prompt: three } }
"""


def _workflow(tmp_path: Path, limit: int, *, approval: bool = False, tasks: int = 3) -> None:
    text = WORKFLOW.replace("LIMIT", str(limit))
    if approval:
        text = text.replace("      risk: low\n", "      risk: low\n      approval: always\n")
    kept = text.splitlines(keepends=True)[: len(text.splitlines()) - (3 - tasks)]
    (tmp_path / "wf.yaml").write_text("".join(kept))


def _json(cli: Cli, *args: str, env: dict[str, str] | None = None) -> Any:
    return cli("--output", "json", *args, "--db", "r.db", env=env)


def _inspect(cli: Cli, run_id: str) -> dict[str, Any]:
    return dict(_json(cli, "inspect", run_id).data)


def _effects(shown: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(e["taskId"], e["operation"], e["status"]) for e in shown["effects"]]


def test_a_pure_tool_call_over_max_tool_calls_is_refused(cli: Cli, tmp_path: Path) -> None:
    # It used to count nothing: all three echoes ran and the run succeeded with usage 0.
    _workflow(tmp_path, 1)
    failed = _json(cli, "run", "wf.yaml")
    assert failed.rc == 4, failed.stderr
    message = failed.error["error"]["message"]
    assert (
        "budget toolCalls exceeded before call t2:1:fake-call-1 of tool echo"
        " (limit 1, would reach 2); nothing was dispatched"
    ) in message
    shown = _inspect(cli, failed.error["error"]["runId"])
    budget = shown["budget"]
    assert budget["usage"]["toolCalls"] == 1 and budget["reserved"]["toolCalls"] == 0
    assert budget["exceeded"] == {"dimension": "toolCalls", "limit": 1, "attempted": 2}
    # The refused call has no row, and the model call that would have carried its answer
    # was not dispatched.
    assert [(c["taskId"], c["status"]) for c in shown["toolCalls"]] == [("t1", "succeeded")]
    assert _effects(shown) == [
        ("t1", "fake", "succeeded"),
        ("t1", "fake", "succeeded"),
        ("t2", "fake", "succeeded"),
    ]
    states = [(t["taskId"], t["state"]) for t in shown["tasks"]]
    assert states == [("t1", "succeeded"), ("t2", "failed"), ("t3", "cancelled")]


def test_pure_tool_calls_within_the_limit_count_once_across_a_crash(
    cli: Cli, tmp_path: Path
) -> None:
    # Killed once t1's second model call (the one carrying the echo's row and unit) is
    # durable: the resumed attempt answers the echo again, which is no fresh call, so three
    # echoes fit a limit of three.
    _workflow(tmp_path, 3)
    crash = {"AGENTCTL_CRASH_AT": "coordinator.after_outcome", "AGENTCTL_CRASH_HIT": "2"}
    killed = _json(cli, "run", "wf.yaml", env=crash)
    assert killed.rc == -9, killed.stderr
    run_id = _json(cli, "runs", "list").data["runs"][0]["runId"]
    assert _inspect(cli, run_id)["budget"]["usage"]["toolCalls"] == 1
    done = _json(cli, "resume", run_id)
    assert done.rc == 0, done.stderr
    shown = _inspect(cli, run_id)
    assert shown["budget"]["usage"]["toolCalls"] == 3
    assert shown["budget"]["exceeded"] is None
    assert [c["taskId"] for c in shown["toolCalls"]] == ["t1", "t2", "t3"]


def _pause(cli: Cli) -> tuple[str, dict[str, Any]]:
    paused = _json(cli, "run", "wf.yaml")
    assert paused.rc == 3, paused.stderr
    assert paused.data["state"] == "paused"
    run_id = str(paused.data["runId"])
    [approval] = _json(cli, "approvals", "list", run_id).data["approvals"]
    return run_id, approval


def test_a_pure_tool_that_needs_approval_pauses_then_runs_once(cli: Cli, tmp_path: Path) -> None:
    # It used to fail the run (exit 4, "needs approval ... but is pure") with no approval.
    _workflow(tmp_path, 1, approval=True, tasks=1)
    assert cli("--output", "json", "check", "wf.yaml").rc == 0
    run_id, approval = _pause(cli)
    assert (approval["tool"], approval["agent"]) == ("echo", "a")
    assert approval["redactedInput"]["toolCallId"] == "t1:1:fake-call-1"
    assert approval["redactedInput"]["input"] == {"tool": "echo", "arguments": {"msg": "hello"}}
    held = _inspect(cli, run_id)
    assert _effects(held) == [
        ("t1", "fake", "succeeded"),
        ("t1", "builtin.echo", "waiting_for_approval"),
    ]
    assert [c["status"] for c in held["toolCalls"]] == ["waiting_for_approval"]
    assert held["budget"]["reserved"]["toolCalls"] == 1  # held with its reservation

    ok = _json(cli, "approvals", "approve", approval["approvalId"], "--reason", "fine")
    assert ok.rc == 0, ok.stderr
    done = _json(cli, "resume", run_id)
    assert done.rc == 0, done.stderr
    assert done.data["output"]["t1"]["text"] == "fake: one"
    shown = _inspect(cli, run_id)
    assert _effects(shown) == [
        ("t1", "fake", "succeeded"),
        ("t1", "builtin.echo", "succeeded"),
        ("t1", "fake", "succeeded"),
    ]
    [call] = shown["toolCalls"]
    assert call["status"] == "succeeded" and call["output"] == {"msg": "hello"}
    assert call["effectId"] is not None
    # Held, approved and answered: one tool call, within a limit of one.
    assert shown["budget"]["usage"]["toolCalls"] == 1
    assert shown["budget"]["reserved"]["toolCalls"] == 0
    replayed = _json(cli, "replay", run_id)
    assert replayed.rc == 0, replayed.stderr
    again = _inspect(cli, replayed.data["runId"])
    assert again["budget"]["usage"].get("toolCalls", 0) == 0  # a replay consumes nothing


def test_a_rejected_pure_tool_call_fails_the_task(cli: Cli, tmp_path: Path) -> None:
    _workflow(tmp_path, 5, approval=True, tasks=1)
    run_id, approval = _pause(cli)
    no = _json(cli, "approvals", "reject", approval["approvalId"], "--reason", "not today")
    assert no.rc == 0, no.stderr
    failed = _json(cli, "resume", run_id)
    assert failed.rc == 4
    shown = _inspect(cli, run_id)
    [call] = shown["toolCalls"]
    assert call["status"] == "rejected" and "not today" in call["error"]
    [task] = shown["tasks"]
    assert task["state"] == "failed" and "t1:1:fake-call-1" in task["error"]
    assert shown["budget"]["usage"].get("toolCalls", 0) == 0  # it never ran
