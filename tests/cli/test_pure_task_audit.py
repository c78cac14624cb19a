"""Every transition of a task decided in the coordinator is audited (spec/cli.md §3): a pure
task the run executes shows `task.ready` and `task.running` before its end, as an effectful
one does, and a `when` or route skip shows the `task.ready` it was decided on; only a
dependency skip goes straight from pending. Its row still moves in one UPDATE."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import Cli

WORKFLOW = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: { name: pure-audit }
spec:
  inputs: { go: false }
  actions: { put: { kind: builtin.assign }, check: { kind: builtin.assert } }
  tasks:
    - { id: a, uses: "action:put", with: { x: 1 } }
    - { id: gated, uses: "action:put", needs: [a], when: "${{ inputs.go }}" }
    - { id: after, uses: "action:put", needs: [gated] }
    - { id: pick, uses: router, needs: [a],
        route: { select: "${{ inputs.go }}", cases: [ { equals: true, tasks: [chosen] } ] } }
    - { id: chosen, uses: "action:put", needs: [pick] }
    - { id: sure, uses: "action:check", needs: [a], with: { that: true } }
"""


def _task_events(cli: Cli, db: str, run_id: str) -> dict[str, list[str]]:
    shown = cli("--output", "json", "inspect", run_id, "--db", db)
    assert shown.rc == 0, shown.stderr
    events: dict[str, list[str]] = {}
    for event in shown.data["audit"]:
        if event["taskId"]:
            events.setdefault(event["taskId"], []).append(event["eventType"])
    return events


def test_pure_tasks_audit_the_states_they_pass(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "wf.yaml").write_text(WORKFLOW, encoding="utf-8")
    ran = cli("--output", "json", "run", "wf.yaml", "--db", "r.db")
    assert ran.rc == 0, ran.stderr
    events = _task_events(cli, "r.db", ran.data["runId"])
    walked = ["task.ready", "task.running", "task.succeeded"]
    assert events["a"] == events["pick"] == events["sure"] == walked
    assert events["gated"] == ["task.ready", "task.condition_evaluated", "task.skipped"]
    assert events["chosen"] == ["task.ready", "task.skipped"]
    assert events["after"] == ["task.skipped"]


def test_the_jsonl_stream_shows_the_same_walk(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "wf.yaml").write_text(WORKFLOW, encoding="utf-8")
    ran = cli("--output", "jsonl", "run", "wf.yaml", "--db", "r.db")
    assert ran.rc == 0, ran.stderr
    lines = [json.loads(line) for line in ran.stdout.splitlines()]
    streamed = [line["data"] for line in lines if line["kind"] == "RunEvent"]
    of_a = [e["type"] for e in streamed if e.get("taskId") == "a"]
    assert of_a == ["task.ready", "task.running", "task.succeeded"]
