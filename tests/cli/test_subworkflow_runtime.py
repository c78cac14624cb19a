"""Sub-workflows at run time, seen from the CLI (spec/dsl.md §4.9): what a failing boundary
says, and how recovery commands name the tasks an invocation expanded into."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import Cli

SCHEMAS = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: bounds }
spec:
  actions: { put: { kind: builtin.assign } }
  subworkflows:
    inner:
      version: 1.0.0
      inputs: { x: 1 }
      inputSchema: { type: object, properties: { x: { type: integer } } }
      outputSchema: { type: object, properties: { y: { type: string } }, required: [y] }
      outputs: { y: "${{ tasks.p.output.output.v }}" }
      tasks:
        - { id: p, uses: action:put, with: { v: 2 } }
  tasks:
    - { id: pre, uses: action:put, with: { v: seven } }
    - { id: early, uses: workflow:inner, needs: [pre], failure: continue,
        with: { x: "${{ tasks.pre.output.output.v }}" } }
    - { id: late, uses: workflow:inner, failure: continue }
"""


def _tasks(cli: Cli, run_id: str) -> dict[str, dict[str, object]]:
    got = cli("--output", "json", "inspect", run_id, "--db", "r.db")
    assert got.rc == 0, got.stderr
    return {t["taskId"]: t for t in got.data["tasks"]}


def test_a_boundary_that_fails_names_the_schema_it_broke(cli: Cli, tmp_path: Path) -> None:
    """The input boundary checks `inputSchema`, the aggregate `outputSchema`: the error says
    which (and of which sub-workflow), as `check` does for a literal `with`, rather than an
    "output contract" the author never wrote."""
    (tmp_path / "wf.yaml").write_text(SCHEMAS, encoding="utf-8")
    done = cli("--output", "json", "run", "wf.yaml", "--db", "r.db")
    assert done.rc == 4, done.stderr
    tasks = _tasks(cli, done.error["error"]["runId"])
    inputs = str(tasks["early--inputs-3a1bd4df"]["error"])
    assert "the inputs of inner@1.0.0 do not match its inputSchema: /x:" in inputs, inputs
    outputs = str(tasks["late"]["error"])
    assert "the outputs of inner@1.0.0 do not match its outputSchema: /y:" in outputs, outputs
    assert "output contract" not in inputs + outputs


GATED = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: gated }
spec:
  policy: { approval: never, processAllowlist: [sh] }
  actions:
    put: { kind: builtin.assign }
    gate: { kind: builtin.shell.exec, command: sh, args: ["-c", "test -f ok"] }
  subworkflows:
    inner:
      version: 1.0.0
      tasks:
        - { id: g, uses: action:gate }
  tasks:
    - { id: top, uses: workflow:inner }
    - { id: other, uses: workflow:inner }
"""


def test_a_recovery_root_named_by_its_local_id_suggests_the_namespaced_ones(
    cli: Cli, tmp_path: Path
) -> None:
    """`--from g` names the definition's task, which the run knows only as `top--g` (and
    `other--g`): the plan stays blocked, but says which ids to give instead."""
    (tmp_path / "wf.yaml").write_text(GATED, encoding="utf-8")
    done = cli("--output", "json", "run", "wf.yaml", "--db", "r.db")
    assert done.rc == 4, done.stderr
    source = done.error["error"]["runId"]
    (tmp_path / "ok").write_text("", encoding="utf-8")
    for command in ("retry", "repair"):
        planned = cli(
            "--output", "json", command, "wf.yaml", source, "--from", "g", "--plan", "--db", "r.db"
        )
        assert planned.rc == 3, planned.stderr
        [block] = [b for b in planned.data["blockedReuse"] if b["taskId"] == "g"]
        assert block["rule"] == "repair_root_missing"
        assert block["suggestedRepairRoots"] == ["top--g", "other--g"]
        assert "did you mean top--g or other--g?" in block["message"], block["message"]
    ghost = cli(
        "--output", "json", "retry", "wf.yaml", source, "--from", "ghost", "--plan", "--db", "r.db"
    )
    [block] = [b for b in ghost.data["blockedReuse"] if b["taskId"] == "ghost"]
    assert block["suggestedRepairRoots"] == [] and "did you mean" not in block["message"]


SCOPES = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: scopes }
spec:
  actions: { put: { kind: builtin.assign }, check: { kind: builtin.assert } }
  subworkflows:
    inner:
      version: 1.0.0
      tasks:
        - { id: bad, uses: action:check, with: { that: false, message: boom } }
  tasks:
    - { id: call, uses: workflow:inner, failure: continue }
    - { id: later, uses: action:put }
"""


def test_the_invocations_failure_is_its_boundaries_and_a_child_keeps_its_own(
    cli: Cli, tmp_path: Path
) -> None:
    """As docs/workflow-language.md says: `failure: continue` on the invocation does not
    reach a child, whose default `stop` stops the run; on the child it keeps the run going."""
    (tmp_path / "wf.yaml").write_text(SCOPES, encoding="utf-8")
    done = cli("--output", "json", "run", "wf.yaml", "--db", "r.db")
    assert done.rc == 4, done.stderr
    tasks = _tasks(cli, done.error["error"]["runId"])
    assert tasks["call--bad"]["state"] == "failed" and tasks["later"]["state"] == "cancelled"
    kept = SCOPES.replace("message: boom } }", "message: boom }, failure: continue }")
    (tmp_path / "wf.yaml").write_text(kept, encoding="utf-8")
    done = cli("--output", "json", "run", "wf.yaml", "--db", "r.db")
    assert done.rc == 4, done.stderr
    tasks = _tasks(cli, done.error["error"]["runId"])
    assert tasks["call"]["state"] == "succeeded" and tasks["later"]["state"] == "succeeded"


def test_a_task_filter_named_by_its_local_id_suggests_the_namespaced_ones(
    cli: Cli, tmp_path: Path
) -> None:
    """`effects list --task p` where the task runs as `early--p`/`late--p`: still not found
    (exit 5), but the error names the ids to use; an id nothing ends in gets no hint."""
    (tmp_path / "wf.yaml").write_text(SCHEMAS, encoding="utf-8")
    cli("--output", "json", "run", "wf.yaml", "--db", "r.db")
    [run] = cli("--output", "json", "runs", "list", "--db", "r.db").data["runs"]
    run_id = str(run["runId"])
    local = cli("effects", "list", run_id, "--task", "p", "--db", "r.db")
    assert local.rc == 5
    assert "did you mean early--p or late--p?" in local.stderr, local.stderr
    unknown = cli("effects", "list", run_id, "--task", "zz", "--db", "r.db")
    assert unknown.rc == 5 and "did you mean" not in unknown.stderr
