"""`failure: continue` from the outside (spec/dsl.md §4.3, §4.6, §2): an aggregate runs
whatever its children ended as and records each one's state and error, so the work after it
goes on; a run that ran to its end renders its `outputs` though it failed."""

from __future__ import annotations

from pathlib import Path

FAN = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: fan-continue }
spec:
  actions: { put: { kind: builtin.assign }, check: { kind: builtin.assert } }
  outputs: { seen: "${{ tasks.summary.output.output.n }}" }
  tasks:
    - id: fan
      uses: "action:check"
      failure: continue
      foreach: { items: [true, false] }
      with: { that: "${{ vars.item }}", message: "item ${{ vars.foreachIndex }} bad" }
    - { id: summary, uses: "action:put", needs: [fan], with: { n: "${{ tasks.fan.output.items }}" } }
"""

SUB = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: sub-continue }
spec:
  actions: { put: { kind: builtin.assign }, check: { kind: builtin.assert } }
  subworkflows:
    inner:
      version: 1.0.0
      outputs: { broken: "${{ tasks.bad.output }}" }
      tasks:
        - { id: bad, uses: "action:check", failure: continue, with: { that: false, message: nope } }
  tasks:
    - { id: call, uses: "workflow:inner" }
"""


def _inspect(cli, tmp_path: Path, run_id: str):  # type: ignore[no-untyped-def]
    got = cli("--output", "json", "inspect", run_id, "--db", str(tmp_path / "r.db"))
    assert got.rc == 0, got.stderr
    return got.data


def test_an_aggregate_over_a_failed_child_records_it_and_its_dependants_run(
    cli, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "wf.yaml").write_text(FAN)
    done = cli("--output", "json", "run", "wf.yaml", "--db", "r.db", cwd=tmp_path)
    assert done.rc == 4  # a task failed: the run fails (an error envelope, spec/cli.md §2)
    run_id = done.error["error"]["runId"]
    data = _inspect(cli, tmp_path, run_id)
    tasks = {t["taskId"]: t for t in data["tasks"]}
    assert tasks["fan"]["state"] == "succeeded" and tasks["summary"]["state"] == "succeeded"
    items = tasks["fan"]["output"]["items"]
    assert [(i["index"], i["state"]) for i in items] == [(0, "succeeded"), (1, "failed")]
    assert items[0]["error"] is None and "item 1 bad" in items[1]["error"]
    assert items[1]["output"] is None
    # The run ran to its end: its outputs are rendered and kept, though it failed.
    assert data["run"]["state"] == "failed"
    assert data["run"]["output"]["seen"] == items


def test_a_failed_run_that_stopped_early_keeps_no_output(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "wf.yaml").write_text(FAN.replace("failure: continue", "failure: stop"))
    done = cli("--output", "json", "run", "wf.yaml", "--db", "r.db", cwd=tmp_path)
    assert done.rc == 4
    data = _inspect(cli, tmp_path, done.error["error"]["runId"])
    tasks = {t["taskId"]: t for t in data["tasks"]}
    assert tasks["summary"]["state"] != "succeeded"
    assert data["run"]["output"] is None


def test_sub_workflow_outputs_reading_a_failed_task_name_it(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "wf.yaml").write_text(SUB)
    done = cli("--output", "json", "run", "wf.yaml", "--db", "r.db", cwd=tmp_path)
    assert done.rc == 4
    tasks = {t["taskId"]: t for t in _inspect(cli, tmp_path, done.error["error"]["runId"])["tasks"]}
    assert tasks["call"]["state"] == "failed"
    assert "1 of its tasks did not succeed: call--bad" in tasks["call"]["error"]


def test_sub_workflow_outputs_reading_a_skipped_task_name_it(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A child skipped behind a failed one did not succeed either: outputs reading it fail
    naming it (docs/workflow-language.md, `failure`), not with a bare undefined value."""
    wf = SUB.replace("tasks.bad.output", "tasks.after.output.output.v").replace(
        "with: { that: false, message: nope } }\n",
        "with: { that: false, message: nope } }\n"
        '        - { id: after, uses: "action:put", needs: [bad], with: { v: 1 } }\n',
    )
    (tmp_path / "wf.yaml").write_text(wf)
    done = cli("--output", "json", "run", "wf.yaml", "--db", "r.db", cwd=tmp_path)
    assert done.rc == 4
    tasks = {t["taskId"]: t for t in _inspect(cli, tmp_path, done.error["error"]["runId"])["tasks"]}
    assert tasks["call--after"]["state"] == "skipped"
    assert tasks["call"]["state"] == "failed"
    assert "2 of its tasks did not succeed: call--bad, call--after" in tasks["call"]["error"]


def test_a_run_error_naming_some_failed_tasks_says_how_many_more_failed(
    cli, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """Seven independent `continue` failures: the error names five and counts the other two,
    so a reader never takes a cut list for the whole story."""
    fail = '{{ id: f{0}, uses: "action:check", failure: continue, with: {{ that: false }} }}'
    tasks = "\n".join(f"    - {fail.format(i)}" for i in range(7))
    (tmp_path / "wf.yaml").write_text(SUB.split("  subworkflows:")[0] + "  tasks:\n" + tasks)
    done = cli("--output", "json", "run", "wf.yaml", "--db", "r.db", cwd=tmp_path)
    assert done.rc == 4
    message = done.error["error"]["message"]
    assert [f"f{i}:" in message for i in range(7)] == [True] * 5 + [False] * 2
    assert message.endswith("; and 2 more: inspect the run"), message
