"""Graph semantics of spec/dsl.md §4 probed from the outside: loops, expansion, skips."""

from __future__ import annotations

from pathlib import Path

HEAD = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: graph }
spec:
"""


def _tasks(cli, db: Path, run_id: str) -> dict:  # type: ignore[no-untyped-def,type-arg]
    got = cli("--output", "json", "inspect", run_id, "--db", str(db))
    assert got.rc == 0, got.stderr
    return {t["taskId"]: t for t in got.data["tasks"]}


def test_the_loop_guard_after_the_last_iteration_sees_the_task_vars(  # type: ignore[no-untyped-def]
    cli, write_workflow, tmp_path: Path
) -> None:
    # The guard is re-checked with loopIndex = maxIterations; like every iteration's guard
    # it reads the task's variables, here one rendered from memory that the iteration turned
    # off: the loop converged, so its aggregate succeeds.
    wf = write_workflow(
        HEAD
        + """\
  policy: { approval: never }
  memory: { working: { go: true } }
  actions: { remember: { kind: builtin.memory.write } }
  outputs: { runs: "${{ tasks.poll.output.iterations }}" }
  tasks:
    - { id: poll, uses: "action:remember", vars: { flag: "${{ memory.go }}" },
        loop: { maxIterations: 1, while: "${{ vars.flag }}" }, with: { key: go, value: false } }
"""
    )
    db = tmp_path / "r.db"
    done = cli("--output", "json", "run", str(wf), "--db", str(db))
    assert done.rc == 0, done.stderr
    assert done.data["output"] == {"runs": 1}


def test_a_loop_whose_guard_stays_true_on_a_var_fails_as_not_converged(  # type: ignore[no-untyped-def]
    cli, write_workflow, tmp_path: Path
) -> None:
    wf = write_workflow(
        HEAD
        + """\
  vars: { keep: true }
  actions: { step: { kind: builtin.assign } }
  tasks:
    - { id: poll, uses: "action:step", loop: { maxIterations: 2, while: "${{ vars.keep }}" } }
"""
    )
    db = tmp_path / "r.db"
    done = cli("--output", "json", "run", str(wf), "--db", str(db))
    assert done.rc == 4, done.stdout
    poll = _tasks(cli, db, done.error["error"]["runId"])["poll"]
    assert poll["state"] == "failed"
    assert "loop guard is still true after maxIterations (2)" in poll["error"]
