"""Replay, retry, repair, fork and compensate from the outside, with marker files.

Each effectful task appends its name to ``marker.txt`` from a real subprocess, so the tests
see exactly which effects executed in each derived run.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

HEAD = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: recover }
spec:
  policy: { approval: never, processAllowlist: [sh], writableRoots: [out] }
"""

FLOW = (
    HEAD
    + """\
  actions:
    a: { kind: builtin.shell.exec, command: /bin/sh, args: ["-c", "echo a >> marker.txt; echo A"] }
    b: { kind: builtin.shell.exec, command: /bin/sh, args: ["-c", "echo B_ECHO >> marker.txt; test -f ok.flag"] }
    c: { kind: builtin.shell.exec, command: /bin/sh, args: ["-c", "echo c >> marker.txt"] }
    save: { kind: builtin.write }
  tasks:
    - { id: a, uses: "action:a" }
    - { id: w, uses: "action:save", needs: [a], with: { path: out/a.txt, content: "${{ tasks.a.output.stdout }}" } }
    - { id: b, uses: "action:b", needs: [a] }
    - { id: c, uses: "action:c", needs: [b] }
"""
)


def _marker(ws: Path) -> list[str]:
    path = ws / "marker.txt"
    return path.read_text().split() if path.exists() else []


def _setup(cli, ws: Path, text: str = FLOW) -> tuple[Path, Path, str]:  # type: ignore[no-untyped-def]
    ws.mkdir(parents=True, exist_ok=True)
    wf = ws / "wf.yaml"
    wf.write_text(text.replace("B_ECHO", "b"))
    db = ws.parent / "state" / "r.db"
    first = cli("--output", "json", "run", str(wf), "--db", str(db))
    assert first.rc == 4, first.stderr
    assert _marker(ws) == ["a", "b"]
    return wf, db, str(first.error["error"]["runId"])


def _inspect(cli, db: Path, run_id: str):  # type: ignore[no-untyped-def]
    got = cli("--output", "json", "inspect", run_id, "--db", str(db))
    assert got.rc == 0, got.stderr
    return got.data


def test_replay_executes_nothing(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    ws = tmp_path / "ws"
    _wf, db, source = _setup(cli, ws)
    replayed = cli("--output", "json", "replay", source, "--db", str(db))
    # A failed source replays as failed: a normal RunOutcome on stdout, with exit 4.
    assert replayed.rc == 4 and replayed.data["state"] == "failed"
    run_id = replayed.data["runId"]
    assert _marker(ws) == ["a", "b"]
    data = _inspect(cli, db, run_id)
    assert data["run"]["mode"] == "replay" and data["run"]["parentRunId"] == source
    assert data["effects"] == []
    src = {t["taskId"]: t for t in _inspect(cli, db, source)["tasks"]}
    for task in data["tasks"]:
        assert task["state"] == src[task["taskId"]]["state"]
        assert task["output"] == src[task["taskId"]]["output"]
        if task["state"] != "pending":
            assert task["disposition"] == "recorded"


def test_replay_walks_each_task_as_it_ran(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # spec/cli.md §5: replayed tasks walk ready → running → terminal, a skipped (or never
    # started, cancelled) one directly;
    # each task's walk ends before the next one's starts.
    ws = tmp_path / "ws"
    _wf, db, source = _setup(cli, ws)
    replayed = cli("--output", "json", "replay", source, "--db", str(db))
    audit = _inspect(cli, db, replayed.data["runId"])["audit"]
    walked = [(e["taskId"], e["eventType"]) for e in audit if e["eventType"].startswith("task.")]
    ran = ["task.ready", "task.running"]
    assert walked == [
        *[("a", e) for e in [*ran, "task.succeeded"]],
        *[("w", e) for e in [*ran, "task.succeeded"]],
        *[("b", e) for e in [*ran, "task.failed"]],
        ("c", "task.cancelled"),  # never started: the failure stopped the run
    ]


def test_retry_failed_runs_only_the_failed_task_and_descendants(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    ws = tmp_path / "ws"
    wf, db, source = _setup(cli, ws)
    plan = cli("--output", "json", "retry", str(wf), source, "--failed", "--plan", "--db", str(db))
    assert plan.rc == 0, plan.stderr
    assert plan.data["compatible"] is True
    assert sorted(plan.data["reusedTasks"]) == ["a", "w"]
    assert _marker(ws) == ["a", "b"], "--plan must not execute anything"
    (ws / "ok.flag").write_text("")
    done = cli("--output", "json", "retry", str(wf), source, "--failed", "--db", str(db))
    assert done.rc == 0, done.stderr
    assert _marker(ws) == ["a", "b", "b", "c"]
    run_id = done.data["runId"]
    data = _inspect(cli, db, run_id)
    assert data["run"]["mode"] == "retry" and data["run"]["sourceRunId"] == source
    tasks = {t["taskId"]: t for t in data["tasks"]}
    assert tasks["a"]["disposition"] == "reused" and tasks["a"]["sourceRunId"] == source
    assert tasks["b"]["disposition"] == "executed" and tasks["c"]["state"] == "succeeded"
    # The decision is audited before what follows from it: the reuses, then the new work.
    kinds = [(e["eventType"], e["taskId"]) for e in data["audit"]]
    decided = kinds.index(("retry.created", None))
    assert kinds.index(("retry.task_reused", "a")) > decided
    assert kinds.index(("retry.task_reused", "w")) > decided
    # The new run owns copies of what it reused: the source workspace can go away.
    shutil.rmtree(ws)
    assert cli("--output", "json", "inspect", run_id, "--db", str(db)).rc == 0
    assert cli("--output", "json", "replay", run_id, "--db", str(db)).rc == 0


def test_retry_refuses_a_changed_workflow(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    ws = tmp_path / "ws"
    wf, db, source = _setup(cli, ws)
    wf.write_text(FLOW.replace("B_ECHO", "b2"))
    got = cli("--output", "json", "retry", str(wf), source, "--failed", "--db", str(db))
    assert got.rc == 3
    assert "repair" in str(got.data["blockedReuse"])
    assert len(cli("--output", "json", "runs", "list", "--db", str(db)).data["runs"]) == 1


def test_repair_reuses_everything_outside_the_closure(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    ws = tmp_path / "ws"
    wf, db, source = _setup(cli, ws)
    (ws / "ok.flag").write_text("")
    wf.write_text(FLOW.replace("B_ECHO", "b2"))  # the corrected definition of b
    done = cli("--output", "json", "repair", str(wf), source, "--from", "b", "--db", str(db))
    assert done.rc == 0, done.stderr
    assert _marker(ws) == ["a", "b", "b2", "c"]
    assert sorted(done.data["reusedTasks"]) == ["a", "w"]
    data = _inspect(cli, db, done.data["runId"])
    assert data["run"]["mode"] == "repair" and data["run"]["sourceRunId"] == source
    assert [a["path"] for a in data["artifacts"]] == ["out/a.txt"]
    shutil.rmtree(ws)
    assert cli("--output", "json", "replay", done.data["runId"], "--db", str(db)).rc == 0


def test_repair_is_blocked_by_a_corrupt_artifact(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    ws = tmp_path / "ws"
    wf, db, source = _setup(cli, ws)
    [blob] = [p for p in (db.parent / "artifacts" / "sha256").rglob("*") if p.is_file()]
    os.chmod(blob, 0o600)
    blob.write_bytes(b"corrupted")
    got = cli("--output", "json", "repair", str(wf), source, "--from", "b", "--db", str(db))
    assert got.rc == 3, got.stderr
    rules = {b["rule"] for b in got.data["blockedReuse"]}
    assert "artifact_integrity" in rules
    assert len(cli("--output", "json", "runs", "list", "--db", str(db)).data["runs"]) == 1


def test_fork_executes_everything_again(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    ws = tmp_path / "ws"
    _wf, db, source = _setup(cli, ws)
    (ws / "ok.flag").write_text("")
    done = cli("--output", "json", "fork", source, "--db", str(db))
    assert done.rc == 0, done.stderr
    assert _marker(ws) == ["a", "b", "a", "b", "c"]
    data = _inspect(cli, db, done.data["runId"])
    assert data["run"]["mode"] == "fork" and data["run"]["parentRunId"] == source
    assert {t["disposition"] for t in data["tasks"]} == {"executed"}


_UUID7 = r"[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"
TRACE_V7 = re.compile(f"trace-{_UUID7}")
RECONCILIATION_V7 = re.compile(f"reconciliation-{_UUID7}")

COMPENSATED = (
    HEAD
    + """\
  actions:
    make: { kind: builtin.shell.exec, command: /bin/sh, args: ["-c", "echo $0 >> marker.txt", "made"] }
    undo1: { kind: builtin.shell.exec, command: /bin/sh, args: ["-c", "test -f allow.flag && echo undo1 >> marker.txt"] }
    undo2: { kind: builtin.shell.exec, command: /bin/sh, args: ["-c", "echo undo2 >> marker.txt"] }
    check: { kind: builtin.assert }
  tasks:
    - { id: m1, uses: "action:make", compensate: { uses: "action:undo1" } }
    - { id: m2, uses: "action:make", needs: [m1], compensate: { uses: "action:undo2" } }
    - { id: verify, uses: "action:check", needs: [m2], with: { that: false, message: boom } }
"""
)


def test_compensation_resumes_only_the_remainder(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    ws = tmp_path / "ws"
    ws.mkdir()
    wf = ws / "wf.yaml"
    wf.write_text(COMPENSATED)
    db = tmp_path / "state" / "r.db"
    source = cli("--output", "json", "run", str(wf), "--db", str(db)).error["error"]["runId"]
    plan = cli("--output", "json", "compensate", source, "--plan", "--db", str(db))
    assert plan.rc == 0, plan.stderr
    assert [t["sourceTaskId"] for t in plan.data["tasks"]] == ["m2", "m1"]  # reverse order
    first = cli("--output", "json", "compensate", source, "--db", str(db))
    assert first.rc == 4  # undo1 failed; undo2 still ran
    assert _marker(ws) == ["made", "made", "undo2"]
    again = cli("--output", "json", "compensate", source, "--plan", "--db", str(db))
    assert [t["sourceTaskId"] for t in again.data["tasks"]] == ["m1"]
    assert len(again.data["alreadyCompensatedEffects"]) == 1
    (ws / "allow.flag").write_text("")
    second = cli("--output", "json", "compensate", source, "--db", str(db))
    assert second.rc == 0, second.stderr
    assert _marker(ws) == ["made", "made", "undo2", "undo1"]
    done = cli("--output", "json", "compensate", source, "--plan", "--db", str(db))
    assert done.data["tasks"] == [] and len(done.data["alreadyCompensatedEffects"]) == 2
    effects = cli("--output", "json", "effects", "list", source, "--db", str(db)).data
    assert {r["status"] for r in effects["reconciliations"]} == {"compensated"}
    assert len(effects["reconciliations"]) == 2
    # Their ids are `reconciliation-` + UUIDv7 (spec/cli.md §1), as an operator's are.
    for record in effects["reconciliations"]:
        assert RECONCILIATION_V7.fullmatch(record["reconciliationId"]), record


def _automatic(tmp_path: Path) -> tuple[Path, Path, Path]:
    """The compensated workflow with ``onFailure: automatic``, its undo allowed: (workspace,
    workflow file, database)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "allow.flag").write_text("")
    wf = ws / "wf.yaml"
    wf.write_text(
        COMPENSATED.replace("  tasks:\n", "  compensation: { onFailure: automatic }\n  tasks:\n", 1)
    )
    return ws, wf, tmp_path / "state" / "r.db"


def test_automatic_compensation_after_failure(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    ws, wf, db = _automatic(tmp_path)
    done = cli("--output", "json", "run", str(wf), "--db", str(db))
    assert done.rc == 4
    assert "automatic compensation" in done.error["error"]["message"]
    assert _marker(ws) == ["made", "made", "undo2", "undo1"]
    runs = cli("--output", "json", "runs", "list", "--db", str(db)).data["runs"]
    assert [r["mode"] for r in runs] == ["compensation", "execute"]
    assert runs[0]["sourceRunId"] == runs[1]["runId"]
    # A compensation run is a run: spec/cli.md §2 has no other id kind for it.
    assert all(r["runId"].startswith("run-") for r in runs), runs


def test_automatic_compensation_after_a_fork_fails(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # "Automatic compensation starts only after a failed terminal run": a fork is a run too.
    ws, wf, db = _automatic(tmp_path)
    source = cli("--output", "json", "run", str(wf), "--db", str(db)).error["error"]["runId"]
    forked = cli("--output", "json", "fork", source, "--db", str(db))
    assert forked.rc == 4
    assert "automatic compensation" in forked.error["error"]["message"]
    assert _marker(ws) == ["made", "made", "undo2", "undo1"] * 2
    runs = cli("--output", "json", "runs", "list", "--db", str(db)).data["runs"]
    assert [r["mode"] for r in runs] == ["compensation", "fork", "compensation", "execute"]
    assert runs[0]["sourceRunId"] == forked.error["error"]["runId"] == runs[1]["runId"]


def test_automatic_compensation_after_a_retry_fails(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # A retry run is a run: failing, it is compensated as the source was. Its compensated
    # source tasks are never reused, so they execute (and are undone) again.
    ws, wf, db = _automatic(tmp_path)
    source = cli("--output", "json", "run", str(wf), "--db", str(db)).error["error"]["runId"]
    retried = cli("--output", "json", "retry", str(wf), source, "--failed", "--db", str(db))
    assert retried.rc == 4
    assert "automatic compensation" in retried.error["error"]["message"]
    assert _marker(ws) == ["made", "made", "undo2", "undo1"] * 2
    runs = cli("--output", "json", "runs", "list", "--db", str(db)).data["runs"]
    assert [r["mode"] for r in runs] == ["compensation", "retry", "compensation", "execute"]
    assert runs[0]["sourceRunId"] == retried.error["error"]["runId"] == runs[1]["runId"]


PAUSED_THEN_FAILING = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: auto-after-resume }
spec:
  compensation: { onFailure: automatic }
  policy: { approval: high_risk, processAllowlist: [sh], writableRoots: [out] }
  actions:
    save: { kind: builtin.write }
    gate: { kind: builtin.shell.exec, command: /bin/sh, args: ["-c", "exit 1"] }
  tasks:
    - { id: make, uses: "action:save", with: { path: out/r.txt, content: made },
        compensate: { uses: "action:save", with: { path: out/r.txt, content: undone } } }
    - { id: gate, uses: "action:gate", needs: [make] }
"""


def test_automatic_compensation_after_a_resumed_run_fails(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # The run pauses for approval (exit 3), so it fails only in `resume`: that failed terminal
    # run is compensated as one failing in `run` is, and the outcome says so.
    ws = tmp_path / "ws"
    ws.mkdir()
    wf = ws / "wf.yaml"
    wf.write_text(PAUSED_THEN_FAILING)
    db = tmp_path / "state" / "r.db"
    paused = cli("--output", "json", "run", str(wf), "--db", str(db))
    assert paused.rc == 3 and paused.data["state"] == "paused", paused.stderr
    assert (ws / "out" / "r.txt").read_text() == "made"
    run_id = paused.data["runId"]
    pending = cli("--output", "json", "approvals", "list", run_id, "--db", str(db)).data
    approval = pending["approvals"][0]["approvalId"]
    ok = cli(
        "--output", "json", "approvals", "approve", approval, "--reason", "go", "--db", str(db)
    )
    assert ok.rc == 0, ok.stderr
    resumed = cli("--output", "json", "resume", run_id, "--db", str(db))
    assert resumed.rc == 4
    assert "automatic compensation" in resumed.error["error"]["message"]
    assert (ws / "out" / "r.txt").read_text() == "undone"
    runs = cli("--output", "json", "runs", "list", "--db", str(db)).data["runs"]
    assert [r["mode"] for r in runs] == ["compensation", "execute"]
    assert runs[0]["sourceRunId"] == run_id


VARS_COMPENSATED = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: comp-vars }
spec:
  varsFiles: [v.yaml]
  vars: { greeting: hi }
  policy: { approval: never, writableRoots: [out] }
  actions:
    save: { kind: builtin.write }
  tasks:
    - id: make
      uses: action:save
      vars: { note: undone }
      with: { path: "${{ vars.target }}", content: "${{ vars.greeting }}" }
      compensate:
        uses: action:save
        with: { path: "${{ vars.target }}", content: "${{ vars.note }} (${{ vars.extra }})" }
"""


def test_compensation_renders_the_source_tasks_variables(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # Var files, task vars and --var values were read when the source was compiled; the
    # compensation run, compiled later from the stored document, renders with the same values.
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "wf.yaml").write_text(VARS_COMPENSATED)
    (ws / "v.yaml").write_text("target: out/made.txt\n")
    db = tmp_path / "state" / "r.db"
    run = cli("--output", "json", "run", "wf.yaml", "--db", str(db), "--var", 'extra="cli"', cwd=ws)
    assert run.rc == 0, run.stderr
    assert (ws / "out" / "made.txt").read_text() == "hi"
    (ws / "v.yaml").unlink()  # nothing of the source's files is read again
    done = cli("--output", "json", "compensate", run.data["runId"], "--db", str(db), cwd=ws)
    assert done.rc == 0, done.stderr
    assert done.data["compensatedTasks"] == ["make"]
    assert (ws / "out" / "made.txt").read_text() == "undone (cli)"


BINDINGS_COMPENSATED = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: comp-bindings }
spec:
  policy: { approval: never, writableRoots: [out] }
  actions:
    save: { kind: builtin.write }
  tasks:
    - id: fan
      uses: action:save
      foreach: { items: [ada, lin], as: name, maxItems: 2 }
      with: { path: "out/${{ vars.name }}.txt", content: "made ${{ vars.foreachIndex }}" }
      compensate:
        uses: action:save
        with: { path: "out/${{ vars.name }}.txt", content: "undone ${{ vars.foreachIndex }}" }
    - id: grid
      uses: action:save
      matrix: { axes: { size: [s, m] } }
      with: { path: "out/${{ vars.matrix.size }}.txt", content: "made" }
      compensate:
        uses: action:save
        with:
          path: "out/${{ vars.matrix.size }}.txt"
          content: "undone ${{ vars.matrix.size }} ${{ vars.matrixIndex }}"
    - id: step
      uses: action:save
      loop: { maxIterations: 3, while: "${{ vars.loopIndex < 2 }}", initial: { status: initial } }
      with: { path: "out/loop-${{ vars.loopIndex }}.txt", content: "made" }
      compensate:
        uses: action:save
        with:
          path: "out/loop-${{ vars.loopIndex }}.txt"
          content: "undone ${{ vars.loopIndex }} after ${{ vars.loopPrevious.status }}"
"""


def test_compensation_renders_a_childs_engine_bindings(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # A foreach or matrix child's inverse reads the child's own item and index, as the child
    # did; they are engine bindings, never declarable vars, so the compensation run carries
    # them from the source plan (the inverse used to fail: "undefined value vars.foreachIndex").
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "wf.yaml").write_text(BINDINGS_COMPENSATED)
    db = tmp_path / "state" / "r.db"
    run = cli("--output", "json", "run", "wf.yaml", "--db", str(db), cwd=ws)
    assert run.rc == 0, run.stderr
    assert (ws / "out" / "lin.txt").read_text() == "made 1"
    done = cli("--output", "json", "compensate", run.data["runId"], "--db", str(db), cwd=ws)
    assert done.rc == 0, done.stderr
    assert done.data["state"] == "succeeded"
    assert len(done.data["compensatedTasks"]) == 6
    got = {p.name: p.read_text() for p in (ws / "out").iterdir()}
    assert got == {
        "ada.txt": "undone 0",
        "lin.txt": "undone 1",
        "s.txt": "undone s 0",
        "m.txt": "undone m 1",
        # A loop child's previous output is the one its sibling gave in the source run.
        "loop-0.txt": "undone 0 after initial",
        "loop-1.txt": "undone 1 after changed",
    }


DIFFED = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: diffed }
spec:
  policy: { approval: never, writableRoots: [out] }
  actions:
    save: { kind: builtin.write }
    check: { kind: builtin.assert }
  tasks:
    - id: make
      uses: action:save
      with: { path: out/r.txt, content: "CONTENT\\n" }
      compensate: { uses: "action:save", with: { path: out/r.txt, content: "undone\\n" } }
    - { id: verify, uses: "action:check", needs: [make], with: { that: VERDICT } }
"""


def test_repair_and_compensate_take_the_run_style_diff_flag(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "wf.yaml").write_text(DIFFED.replace("CONTENT", "made").replace("VERDICT", "false"))
    (ws / "fixed.yaml").write_text(DIFFED.replace("CONTENT", "mended").replace("VERDICT", "true"))
    db = str(tmp_path / "state" / "r.db")
    first = cli("--output", "json", "run", "wf.yaml", "--db", db, cwd=ws)
    assert first.rc == 4, first.stderr
    source = first.error["error"]["runId"]
    repair = ("repair", "fixed.yaml", source, "--from", "make", "--restart-successful")
    repaired = cli("--output", "json", *repair, "--diff", "--db", db, cwd=ws)
    assert repaired.rc == 0, repaired.stderr
    assert "-made\n+mended" in repaired.data["output"]["make"]["diff"]
    undone = cli(
        "--output", "json", "compensate", repaired.data["runId"], "--diff", "--db", db, cwd=ws
    )
    assert undone.rc == 0, undone.stderr
    inspected = cli("--output", "json", "inspect", undone.data["runId"], "--db", db, cwd=ws).data
    [effect] = inspected["effects"]
    assert "-mended\n+undone" in effect["result"]["diff"]
    assert (ws / "out" / "r.txt").read_text() == "undone\n"


def test_retry_and_repair_default_to_the_workflow_files_directory(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # spec/cli.md §1: the workspace of run, retry and repair defaults to the workflow file's
    # directory; only resume, fork and compensate reuse the source run's own.
    ws = tmp_path / "ws"
    _wf, db, source = _setup(cli, ws)
    fixed = tmp_path / "fixed"
    fixed.mkdir()
    (fixed / "ok.flag").write_text("")
    wf = fixed / "wf.yaml"
    wf.write_text(FLOW.replace("B_ECHO", "b"))
    retried = cli("--output", "json", "retry", str(wf), source, "--failed", "--db", str(db))
    assert retried.rc == 0, retried.stderr
    assert _marker(ws) == ["a", "b"] and _marker(fixed) == ["b", "c"]
    assert _inspect(cli, db, retried.data["runId"])["run"]["basePath"] == str(fixed)
    wf.write_text(FLOW.replace("B_ECHO", "b2"))
    repaired = cli("--output", "json", "repair", str(wf), source, "--from", "b", "--db", str(db))
    assert repaired.rc == 0, repaired.stderr
    assert _marker(ws) == ["a", "b"] and _marker(fixed) == ["b", "c", "b2", "c"]
    assert _inspect(cli, db, repaired.data["runId"])["run"]["basePath"] == str(fixed)
    # Runs, all of them: spec/cli.md §2 has no repair-/retry- id kind (the mode says which).
    assert retried.data["runId"].startswith("run-") and repaired.data["runId"].startswith("run-")
    # --workspace still wins over the default.
    other = tmp_path / "other"
    other.mkdir()
    (other / "ok.flag").write_text("")
    args = ("repair", str(wf), source, "--from", "b", "--db", str(db), "--workspace", str(other))
    chosen = cli("--output", "json", *args)
    assert chosen.rc == 0, chosen.stderr
    assert _marker(other) == ["b2", "c"]


MEMORY_READER = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: reads-memory }
spec:
  memory: { working: { seen: first } }
  policy: { approval: never, processAllowlist: [sh] }
  actions:
    put: { kind: builtin.assign }
    gate: { kind: builtin.shell.exec, command: /bin/sh, args: ["-c", "test -f ok.flag"] }
  tasks:
    - { id: d, uses: "action:put", with: { seen: "${{ memory.seen }}" } }
    - { id: f, uses: "action:gate" }
"""


def test_repair_refuses_a_reused_task_whose_initial_memory_changed(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # spec/cli.md §5 resolved_input_digest_mismatch: `d` read memory.seen == "first"; the
    # corrected workflow starts from "second", so d's recorded output would be stale.
    ws = tmp_path / "ws"
    ws.mkdir()
    wf = ws / "wf.yaml"
    wf.write_text(MEMORY_READER)
    db = tmp_path / "state" / "r.db"
    source = cli("--output", "json", "run", str(wf), "--db", str(db)).error["error"]["runId"]
    (ws / "ok.flag").write_text("")
    fixed = ws / "fixed.yaml"
    fixed.write_text(MEMORY_READER.replace("seen: first", "seen: second"))
    refused = cli("--output", "json", "repair", str(fixed), source, "--from", "f", "--db", str(db))
    assert refused.rc == 3, refused.stderr
    assert refused.data["compatible"] is False and refused.data["reusedTasks"] == []
    block = refused.data["blockedReuse"][0]
    assert block["taskId"] == "d" and block["rule"] == "resolved_input_digest_mismatch"
    assert block["suggestedRepairRoots"] == ["d"]
    runs = cli("--output", "json", "runs", "list", "--db", str(db)).data["runs"]
    assert len(runs) == 1  # a blocked plan creates nothing
    # The same initial memory reuses d; naming d as a root re-executes it with the new value.
    same = cli(
        "--output", "json", "repair", str(wf), source, "--from", "f", "--plan", "--db", str(db)
    )
    assert same.rc == 0 and same.data["reusedTasks"] == ["d"]
    rooted = ("--from", "d", "--from", "f", "--restart-successful", "--db", str(db))
    done = cli("--output", "json", "repair", str(fixed), source, *rooted)
    assert done.rc == 0, done.stderr
    assert done.data["output"]["d"]["output"] == {"seen": "second"}


def test_compensating_a_paused_run_is_refused_naming_the_run(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # §5 compensate needs a terminal source; the refusal names the run, as replay's does.
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "wf.yaml").write_text(PAUSED_THEN_FAILING)
    db = tmp_path / "state" / "r.db"
    paused = cli("--output", "json", "run", str(ws / "wf.yaml"), "--db", str(db))
    assert paused.rc == 3, paused.stderr
    run_id = paused.data["runId"]
    for command in (("compensate", run_id), ("replay", run_id)):
        refused = cli("--output", "json", *command, "--db", str(db))
        assert refused.rc == 4 and refused.error["error"]["runId"] == run_id, refused.stderr


def test_replay_and_compensate_refusals_carry_this_invocations_trace(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # §1 "every invocation mints a new trace ID"; §2 the error envelope carries it, as a
    # resume's refusal does: each refused attempt has its own, not the paused run's.
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "wf.yaml").write_text(PAUSED_THEN_FAILING)
    db = tmp_path / "state" / "r.db"
    paused = cli("--output", "json", "run", str(ws / "wf.yaml"), "--db", str(db))
    assert paused.rc == 3, paused.stderr
    run_id = paused.data["runId"]
    seen = {paused.data["traceId"]}
    for command in (("compensate", run_id), ("compensate", run_id, "--plan"), ("replay", run_id)):
        refused = cli("--output", "json", *command, "--db", str(db))
        assert refused.rc == 4, refused.stderr
        trace = refused.error["error"]["traceId"]
        assert isinstance(trace, str) and TRACE_V7.fullmatch(trace), (command, trace)
        assert trace not in seen, command
        seen.add(trace)


def test_retry_and_repair_plans_carry_the_reason(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # §1/§5: --reason is recorded on the run and shown in the plan, for retry as for repair.
    ws = tmp_path / "ws"
    wf, db, source = _setup(cli, ws)
    for command in (("retry", "--failed"), ("repair", "--from", "b")):
        kind, *flags = command
        asked = (kind, str(wf), source, *flags, "--plan", "--reason", "flaky")
        plan = cli("--output", "json", *asked, "--db", str(db))
        assert plan.rc == 0, plan.stderr
        assert plan.data["reason"] == "flaky", kind


ASKED_COMPENSATION = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: asked-compensation }
spec:
  compensation: { approval: APPROVAL }
  policy: { approval: POLICY, writableRoots: [out] }
  actions: { save: { kind: builtin.write }, check: { kind: builtin.assert } }
  tasks:
    - { id: make, uses: "action:save", with: { path: out/r.txt, content: made },
        compensate: { uses: "action:save", with: { path: out/r.txt, content: undone } } }
    - { id: verify, uses: "action:check", needs: [make], with: { that: false, message: boom } }
"""


def _approve_all(cli, db: Path, run_id: str) -> None:  # type: ignore[no-untyped-def]
    listed = cli("--output", "json", "approvals", "list", run_id, "--db", str(db)).data
    for approval in listed["approvals"]:
        asked = ("approvals", "approve", approval["approvalId"], "--reason", "ok")
        assert cli("--output", "json", *asked, "--db", str(db)).rc == 0


def test_compensation_approval_always_pauses_and_resume_records_it(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # spec.compensation.approval: always asks a durable approval for the compensation run even
    # when the workflow's policy asks none; the paused outcome exits 3 (§2), and the inverse
    # confirmed by `resume` records `compensated` on the source effect, so it never repeats.
    ws = tmp_path / "ws"
    ws.mkdir()
    wf = ws / "wf.yaml"
    wf.write_text(ASKED_COMPENSATION.replace("APPROVAL", "always").replace("POLICY", "never"))
    db = tmp_path / "state" / "r.db"
    source = cli("--output", "json", "run", str(wf), "--db", str(db)).error["error"]["runId"]
    held = cli("--output", "json", "compensate", source, "--db", str(db))
    assert held.rc == 3 and held.data["state"] == "paused", held.stderr
    assert (ws / "out" / "r.txt").read_text() == "made"
    _approve_all(cli, db, held.data["runId"])
    resumed = cli("--output", "json", "resume", held.data["runId"], "--db", str(db))
    assert resumed.rc == 0, resumed.stderr
    assert (ws / "out" / "r.txt").read_text() == "undone"
    effects = cli("--output", "json", "effects", "list", source, "--db", str(db)).data
    assert [r["status"] for r in effects["reconciliations"]] == ["compensated"]
    again = cli("--output", "json", "compensate", source, "--plan", "--db", str(db))
    assert again.data["tasks"] == [] and len(again.data["alreadyCompensatedEffects"]) == 1


def test_compensation_approval_never_removes_the_gate(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    ws = tmp_path / "ws"
    ws.mkdir()
    wf = ws / "wf.yaml"
    wf.write_text(ASKED_COMPENSATION.replace("APPROVAL", "never").replace("POLICY", "mutations"))
    db = tmp_path / "state" / "r.db"
    paused = cli("--output", "json", "run", str(wf), "--db", str(db))
    assert paused.rc == 3, paused.stderr  # the workflow's own policy holds `make`
    source = paused.data["runId"]
    _approve_all(cli, db, source)
    assert cli("--output", "json", "resume", source, "--db", str(db)).rc == 4
    done = cli("--output", "json", "compensate", source, "--db", str(db))
    assert done.rc == 0 and done.data["state"] == "succeeded", done.stderr
    assert (ws / "out" / "r.txt").read_text() == "undone"
