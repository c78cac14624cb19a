"""A sub-workflow sees only its own tasks and its inputs (spec/dsl.md §4.9): a definition whose
task needs and reads a task of the invoking workflow by its bare id is refused before anything
runs (exit 2, a `missing_reference` at the definition), instead of reading whatever the caller
happens to call that task."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import Cli

LEAK = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: { name: leak }
spec:
  subworkflows:
    shout: { version: 0.1.0, inputs: { word: hey },
      outputs: { loud: "${{ tasks.echo.output.output.w }}" },
      tasks: [ { id: echo, uses: "action:put", needs: [secret],
                 with: { w: "${{ tasks.secret.output.output.v }}" } } ] }
  actions: { put: { kind: builtin.assign } }
  tasks:
    - { id: secret, uses: "action:put", with: { v: caller-only } }
    - { id: wrap, uses: "workflow:shout", needs: [secret], with: { word: hi } }
"""


def test_a_subworkflow_reading_a_caller_task_is_refused(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "wf.yaml").write_text(LEAK, encoding="utf-8")
    for command in (("check", "wf.yaml"), ("run", "wf.yaml", "--db", "r.db")):
        refused = cli("--output", "json", *command)
        assert refused.rc == 2, refused.stderr
        [first, *_] = refused.error["diagnostics"]
        assert first["code"] == "missing_reference"
        assert first["path"] == "spec.subworkflows.shout.tasks.0"
        assert "`secret`" in first["message"] and "Traceback" not in refused.stderr
    listed = cli("--output", "json", "runs", "list", "--db", "r.db")
    assert listed.rc != 0 or listed.data["runs"] == []  # nothing was created


def test_without_the_needs_the_leak_is_reported_once_and_not_as_a_missing_need(
    cli: Cli, tmp_path: Path
) -> None:
    # Adding the caller's task to the definition's needs could never make it right: the one
    # diagnostic says what would (pass the value in as an input).
    (tmp_path / "wf.yaml").write_text(LEAK.replace(" needs: [secret],\n", "\n"), encoding="utf-8")
    refused = cli("--output", "json", "check", "wf.yaml")
    assert refused.rc == 2, refused.stderr
    [only] = refused.error["diagnostics"]
    assert (only["code"], only["path"]) == ("missing_reference", "spec.subworkflows.shout.tasks.0")


VARS = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: { name: vars-in }
spec:
  vars: { greeting: hello }
  actions: { put: { kind: builtin.assign } }
  subworkflows:
    shout:
      version: 0.1.0
      inputs: { word: hey }
      outputs: { loud: "${{ inputs.word }}", seen: "${{ vars.greeting }}" }
      tasks: [ { id: echo, uses: "action:put", with: { g: "${{ vars.greeting }}" } } ]
  tasks:
    - { id: wrap, uses: "workflow:shout", with: { word: "${{ vars.greeting }}!" } }
"""


def test_the_workflow_vars_reach_the_invocation_and_the_outputs(cli: Cli, tmp_path: Path) -> None:
    # The invoking task's `with` and the definition's `outputs` read `vars` like any task
    # (spec/dsl.md §6.4): `check` accepts them, so the run must render them too.
    (tmp_path / "wf.yaml").write_text(VARS, encoding="utf-8")
    plain = cli("--output", "json", "run", "wf.yaml", "--db", "a.db")
    assert plain.rc == 0, plain.stderr
    assert plain.data["output"]["wrap"] == {"loud": "hello!", "seen": "hello"}
    overridden = cli("--output", "json", "run", "wf.yaml", "--db", "b.db", "--var", 'greeting="hi"')
    assert overridden.rc == 0, overridden.stderr
    assert overridden.data["output"]["wrap"] == {"loud": "hi!", "seen": "hi"}
    assert overridden.data["output"]["wrap--echo"]["output"] == {"g": "hi"}
