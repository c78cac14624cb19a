"""The live event stream (issue 16 item 1), through the CLI as a black box.

A run with a retried failure and an approval, driven with ``--output jsonl``: every line
parses and validates against the published schema, the audit sequence only increases (and a
``resume`` continues it), every task transition of the durable record is printed exactly once
across the two invocations, and the last line is the ``RunOutcome``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema

from tests.conftest import Cli, CliResult
from tests.providers import fixtures as fx
from tests.providers.fixtures import FixtureServer, Reply

DOCS = Path(__file__).resolve().parents[2] / "docs" / "events.md"

WORKFLOW = """apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: events }
spec:
  runtime:
    budgets: { maxProviderRequests: 5 }
  policy: { writableRoots: [out] }
  providers:
    sim: { kind: fake }
  agents:
    w:
      provider: sim
      model: m
      instructions: echo
      maxTurns: 1
      providerOptions: { failFirst: 1 }
  actions:
    save: { kind: builtin.write }
  tasks:
    - id: first
      uses: "agent:w"
      with: { prompt: one }
      retry: { maxAttempts: 2, backoffMs: 10 }
    - { id: save, uses: "action:save", needs: [first], with: { path: out/a.txt, content: hi } }
"""


def _schema() -> dict[str, Any]:
    text = DOCS.read_text()
    block = text.split("<!-- event-line-schema -->\n```json\n", 1)[1].split("```", 1)[0]
    return dict(json.loads(block))


def _lines(done: CliResult) -> list[dict[str, Any]]:
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


def _events(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ``RunEvent`` data of an invocation's output, after checking its frame."""
    validator = jsonschema.Draft202012Validator(_schema())
    *events, last = lines
    assert last["kind"] == "RunOutcome"
    for line in events:
        validator.validate(line)
    found = [line["data"] for line in events if line["kind"] == "RunEvent"]
    sequences = [event["sequence"] for event in found]
    assert sequences == sorted(set(sequences)), sequences  # strictly increasing
    assert all(event["runId"] == last["data"]["runId"] for event in found)
    return found


def _transitions(events: list[dict[str, Any]]) -> list[tuple[int, str, str, Any]]:
    return [
        (e["sequence"], e["taskId"], e["type"], e["payload"].get("attempt"))
        for e in events
        if e["type"].startswith("task.")
    ]


def _audit(cli: Cli, run_id: str) -> list[dict[str, Any]]:
    shown = cli("--output", "json", "inspect", run_id, "--db", "r.db")
    return list(shown.data["audit"])


def test_a_run_with_a_retry_and_an_approval_streams_its_durable_events(
    cli: Cli, tmp_path: Path
) -> None:
    (tmp_path / "wf.yaml").write_text(WORKFLOW)
    paused = cli("--output", "jsonl", "run", "wf.yaml", "--db", "r.db")
    assert paused.rc == 3, paused.stderr
    first_lines = _lines(paused)
    first = _events(first_lines)
    run_id = first_lines[-1]["data"]["runId"]
    assert first_lines[-1]["data"]["state"] == "paused"
    assert [e["sequence"] for e in first] == list(range(1, len(first) + 1))  # from run.created
    assert first[0]["type"] == "run.created" and first[-1]["type"] == "run.paused"
    types = [(e["taskId"], e["type"]) for e in first]
    assert ("first", "effect.failed") in types and ("first", "task.retry_scheduled") in types
    assert types.index(("first", "task.retry_scheduled")) < types.index(("first", "task.succeeded"))
    [approval] = cli("--output", "json", "approvals", "list", run_id, "--db", "r.db").data[
        "approvals"
    ]
    [asked] = [e for e in first if e["type"] == "approval.requested"]
    assert asked["payload"]["approvalId"] == approval["approvalId"]
    assert asked["effectId"] == approval["effectId"]

    approve = ("approvals", "approve", approval["approvalId"], "--reason", "ok")
    approved = cli("--output", "json", *approve, "--db", "r.db")
    assert approved.rc == 0, approved.stderr
    [decided] = [e for e in _audit(cli, run_id) if e["eventType"] == "approval.approved"]
    assert decided["payload"]["effectId"] == approval["effectId"]  # as `requested` names it
    resumed = cli("--output", "jsonl", "resume", run_id, "--db", "r.db")
    assert resumed.rc == 0, resumed.stderr
    second_lines = _lines(resumed)
    second = _events(second_lines)
    assert second[0]["sequence"] > first[-1]["sequence"]  # the sequence continues
    assert second[-1]["type"] == "run.succeeded"
    assert {e["traceId"] for e in second if e["type"].startswith("task.")} == {
        second_lines[-1]["data"]["traceId"]
    }
    assert ("save", "effect.succeeded") in [(e["taskId"], e["type"]) for e in second]

    # Every task transition of the durable record was printed once, by one of the two.
    printed = _transitions(first) + _transitions(second)
    assert printed == _transitions(_durable(_audit(cli, run_id)))
    assert len(set(printed)) == len(printed)
    # Each names its attempt (docs/events.md), the resumed task's `task.running` included.
    assert all(isinstance(attempt, int) and attempt >= 1 for *_, attempt in printed), printed


def _durable(audit: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**e, "type": e["eventType"]} for e in audit]


def test_every_effect_transition_is_audited_and_shown(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "wf.yaml").write_text(WORKFLOW.replace("policy: {", "policy: { approval: never,"))
    done = cli("--output", "jsonl", "run", "wf.yaml", "--db", "r.db")
    assert done.rc == 0, done.stderr
    shown = _events(_lines(done))
    effects = cli("--output", "json", "inspect", shown[0]["runId"], "--db", "r.db").data["effects"]
    for effect in effects:
        steps = [e["type"] for e in shown if e["effectId"] == effect["effectId"]]
        steps = [s for s in steps if s.startswith("effect.")]
        assert steps == ["effect.requested", "effect.started", f"effect.{effect['status']}"]
    assert {e["status"] for e in effects} == {"failed", "succeeded"}


def test_the_documented_schema_is_the_one_the_cli_prints(cli: Cli) -> None:
    printed = cli("--output", "json", "schema", "--events")
    assert printed.rc == 0, printed.stderr
    assert printed.data["schema"] == _schema()
    jsonschema.Draft202012Validator.check_schema(_schema())


def test_json_output_prints_no_event_lines(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "wf.yaml").write_text(WORKFLOW)
    paused = cli("--output", "json", "run", "wf.yaml", "--db", "r.db")
    assert paused.rc == 3, paused.stderr
    [only] = _lines(paused)
    assert only["kind"] == "RunOutcome"
    assert not re.search(r'"kind":"RunEvent"', paused.stderr)


def test_the_trace_id_reaches_the_provider_as_traceparent(
    cli: Cli, tmp_path: Path, server: FixtureServer
) -> None:
    agent = """  agents:
    talker: { provider: main, model: gpt-fixture, instructions: Talk. }
  tasks:
    - { id: t, uses: "agent:talker", with: { prompt: go } }
"""
    (tmp_path / "wf.yaml").write_text(fx.local_openai_spec(server.port, "traced") + agent)
    server.script(Reply(body=fx.openai_text("hello")))
    done = cli("--output", "jsonl", "run", "wf.yaml", "--db", "r.db", env={"FIXTURE_KEY": "k"})
    assert done.rc == 0, done.stderr
    outcome = _lines(done)[-1]["data"]
    [effect] = cli("--output", "json", "inspect", outcome["runId"], "--db", "r.db").data["effects"]
    trace = outcome["traceId"].removeprefix("trace-").replace("-", "")
    [seen] = server.seen
    assert seen.headers["traceparent"] == f"00-{trace}-{effect['effectId'][:16]}-01"


def test_retry_streams_the_new_runs_events_from_its_creation(cli: Cli, tmp_path: Path) -> None:
    text = WORKFLOW.replace("policy: {", "policy: { approval: never,")
    (tmp_path / "wf.yaml").write_text(text.replace("retry: { maxAttempts: 2, backoffMs: 10 }", ""))
    failed = cli("--output", "json", "run", "wf.yaml", "--db", "r.db")
    assert failed.rc == 4
    source = failed.error["error"]["runId"]
    retried = cli("--output", "jsonl", "retry", "wf.yaml", source, "--failed", "--db", "r.db")
    lines = _lines(retried)
    new_run = retried.error["error"]["runId"] if retried.rc else lines[-1]["data"]["runId"]
    validator = jsonschema.Draft202012Validator(_schema())
    for line in lines:
        if line["kind"] != "RunOutcome":
            validator.validate(line)
    events = [line["data"] for line in lines if line["kind"] == "RunEvent"]
    assert events[0]["type"] == "run.created" and events[0]["sequence"] == 1
    assert {e["runId"] for e in events} == {new_run} and new_run != source
    assert [e["sequence"] for e in events] == list(range(1, len(events) + 1))
    printed = [(e["sequence"], e["type"]) for e in events]
    assert printed == [(e["sequence"], e["eventType"]) for e in _audit(cli, new_run)]


def test_each_effect_request_carries_the_policy_decision(cli: Cli, tmp_path: Path) -> None:
    """The decision that let an effect be requested is audited with its request: ``allow``
    for the agent's model calls, ``require_approval`` (with its reason) for the held write."""
    (tmp_path / "wf.yaml").write_text(WORKFLOW)
    paused = cli("--output", "jsonl", "run", "wf.yaml", "--db", "r.db")
    assert paused.rc == 3, paused.stderr
    events = _events(_lines(paused))
    first_of: dict[str, dict[str, Any]] = {}
    for event in events:
        if event["type"].startswith("effect.") and event["effectId"] not in first_of:
            first_of[event["effectId"]] = event
    decided = {
        (e["taskId"], e["type"], e["payload"]["policy"]["decision"]) for e in first_of.values()
    }
    assert decided == {
        ("first", "effect.requested", "allow"),
        ("save", "effect.waiting_for_approval", "require_approval"),
    }
    assert all(e["payload"]["policy"]["reason"] for e in first_of.values())
    later = [e for e in events if e["type"] == "effect.started"]
    assert later and all("policy" not in e["payload"] for e in later)  # only with the request
