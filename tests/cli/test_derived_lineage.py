"""Derived runs of derived runs: what a retry or repair of a retry may execute again.

A task a retry reused has no effects of its own; the effects that produced its result are in
the run it was reused from. Executing it again in a later repair repeats those effects just as
much, so they must be judged as the source's own would be (spec/cli.md §5,
``unreconciled_effect``). Each effectful task appends to ``marker.txt`` from a real process.
"""

from __future__ import annotations

from pathlib import Path

FLOW = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: lineage }
spec:
  policy: { approval: never, processAllowlist: [sh] }
  actions:
    a: { kind: builtin.shell.exec, command: /bin/sh, args: ["-c", "echo a >> marker.txt"] }
    b: { kind: builtin.shell.exec, command: /bin/sh, args: ["-c", "echo b >> marker.txt; test -f ok.flag"] }
    put: { kind: builtin.assign }
  tasks:
XTASK
    - { id: a, uses: "action:a"ANEEDS }
    - { id: b, uses: "action:b", needs: [a] }
"""
ORIGINAL = FLOW.replace("XTASK\n", "").replace("ANEEDS", "")
# The corrected workflow: `a` now waits for a new pure task `x`, so repairing from `x`
# executes `a` again.
CHANGED = FLOW.replace("XTASK", '    - { id: x, uses: "action:put", with: { v: 1 } }').replace(
    "ANEEDS", ", needs: [x]"
)


def _marker(ws: Path) -> list[str]:
    return (ws / "marker.txt").read_text().split()


def _blocks(plan: dict[str, list[dict[str, str]]]) -> list[tuple[str, str]]:
    return [(b["taskId"], b["rule"]) for b in plan["blockedReuse"]]


def _pure_a(text: str) -> str:
    return text.replace('"action:a"', '"action:put", with: { v: 2 }')


def _retried(cli, tmp_path: Path, pure_a: bool = False) -> tuple[Path, Path, str, str]:  # type: ignore[no-untyped-def]
    """A failed run and its successful retry, which reused `a`."""
    ws = tmp_path / "ws"
    ws.mkdir()
    wf = ws / "wf.yaml"
    wf.write_text(_pure_a(ORIGINAL) if pure_a else ORIGINAL)
    db = tmp_path / "state" / "r.db"
    first = cli("--output", "json", "run", str(wf), "--db", str(db))
    assert first.rc == 4, first.stderr
    source = str(first.error["error"]["runId"])
    (ws / "ok.flag").write_text("")
    retried = cli("--output", "json", "retry", str(wf), source, "--failed", "--db", str(db))
    assert retried.rc == 0, retried.stderr
    assert retried.data["reusedTasks"] == ["a"]
    assert _marker(ws) == ["b", "b"] if pure_a else ["a", "b", "b"]
    return ws, db, source, str(retried.data["runId"])


def test_repairing_a_retry_does_not_repeat_an_effect_its_reused_task_inherited(
    cli,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    ws, db, source, retry = _retried(cli, tmp_path)
    wf = ws / "wf.yaml"
    wf.write_text(CHANGED)
    # The source itself blocks: its `a` ran a process that took effect.
    direct = cli("--output", "json", "repair", str(wf), source, "--from", "x", "--db", str(db))
    assert direct.rc == 3, direct.stderr
    assert ("a", "unreconciled_effect") in _blocks(direct.data)
    # The retry reused that `a`: its effect is the same one, and blocks the same way.
    got = cli("--output", "json", "repair", str(wf), retry, "--from", "x", "--db", str(db))
    assert got.rc == 3, got.stdout + got.stderr
    assert ("a", "unreconciled_effect") in _blocks(got.data)
    assert _marker(ws) == ["a", "b", "b"], "a blocked plan executes nothing"
    runs = cli("--output", "json", "runs", "list", "--db", str(db)).data["runs"]
    assert len(runs) == 2, "a blocked plan creates no run"


def test_a_reused_task_with_only_pure_history_executes_again(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # The inherited history is judged, not the bare fact of reuse: a pure `a` runs again.
    ws, db, _source, retry = _retried(cli, tmp_path, pure_a=True)
    wf = ws / "wf.yaml"
    wf.write_text(_pure_a(CHANGED))
    got = cli("--output", "json", "repair", str(wf), retry, "--from", "x", "--db", str(db))
    assert got.rc == 3, got.stderr
    # b's own process ran in the retry and blocks; a (pure, inherited) does not.
    assert _blocks(got.data) == [("b", "unreconciled_effect")]


# examples/e7-compensation.yaml: `make` writes out/r.txt (its inverse writes `undone`), then
# `verify` fails.
E7 = Path(__file__).resolve().parents[2] / "examples" / "e7-compensation.yaml"


def test_a_retry_of_a_retry_never_reuses_a_result_compensated_since(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # spec/cli.md §5: compensated tasks are never reused — also when the compensated effect
    # is in the run a reused task came from, not in the source itself.
    wf = tmp_path / "wf.yaml"
    wf.write_text(E7.read_text())
    db = tmp_path / "state" / "r.db"
    source = cli("--output", "json", "run", str(wf), "--db", str(db)).error["error"]["runId"]
    first = cli("--output", "json", "retry", str(wf), source, "--failed", "--db", str(db))
    assert first.rc == 4, first.stderr
    retry = first.error["error"]["runId"]
    undone = cli("--output", "json", "compensate", source, "--db", str(db))
    assert undone.rc == 0, undone.stderr
    assert (tmp_path / "out" / "r.txt").read_text() == "undone"
    plan = cli("--output", "json", "retry", str(wf), retry, "--failed", "--plan", "--db", str(db))
    assert plan.rc == 0, plan.stderr
    assert plan.data["reusedTasks"] == [] and plan.data["rerunTasks"] == ["make", "verify"]
    repair = cli("--output", "json", "repair", str(wf), retry, "--from", "verify", "--db", str(db))
    assert repair.rc == 3, repair.stderr
    assert _blocks(repair.data) == [("make", "reuse_effect_provenance")]
    again = cli("--output", "json", "retry", str(wf), retry, "--failed", "--db", str(db))
    assert again.rc == 4, again.stderr
    assert (tmp_path / "out" / "r.txt").read_text() == "made"


ATTEMPTS = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: attempts }
spec:
  inputs: { ok: false }
  policy: { approval: never, processAllowlist: [sh] }
  actions:
    pre: { kind: builtin.shell.exec, command: /bin/sh, args: ["-c", "echo pre >> marker.txt"] }
    nap: { kind: builtin.shell.exec, command: /bin/sh, args: ["-c", "echo nap >> marker.txt; if test -f slow.flag; then sleep 30; fi"] }
    check: { kind: builtin.assert }
  tasks:
    - { id: pre, uses: "action:pre" }
    - { id: nap, uses: "action:nap", needs: [pre], timeoutSeconds: 1 }
    - { id: fin, uses: "action:check", needs: [nap], with: { that: "${{ inputs.ok }}", message: nope } }
"""


def test_a_compensated_earlier_attempt_does_not_stop_reuse_of_the_attempt_that_succeeded(
    cli,
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    """`nap` timed out (uncertain), was reconciled applied then compensated, and ran again
    on resume (attempt 2) before `fin` failed. Its result is attempt 2's: a retry reuses it
    without running it a third time, and so does a retry of that retry (inherited)."""
    (tmp_path / "wf.yaml").write_text(ATTEMPTS)
    (tmp_path / "slow.flag").write_text("")
    db = ("--db", "r.db")
    first = cli("--output", "json", "run", "wf.yaml", *db)
    assert first.rc == 4, first.stderr
    source = str(first.error["error"]["runId"])
    (tmp_path / "slow.flag").unlink()
    listed = cli("--output", "json", "effects", "list", source, *db).data["effects"]
    effect_of = {e["taskId"]: e["effectId"] for e in listed}
    (tmp_path / "res.json").write_text('{"status": "changed", "changed": true, "exitCode": 0}')
    settle = ("effects", "reconcile", effect_of["nap"], "--reason", "r", *db)
    assert cli(*settle, "--status", "applied", "--result-file", "res.json").rc == 0
    undo = ("--status", "compensated", "--compensation-effect", effect_of["pre"])
    assert cli(*settle, *undo).rc == 0
    assert cli("resume", source, *db).rc == 4  # nap attempt 2 succeeds, fin fails
    assert _marker(tmp_path) == ["pre", "nap", "nap"]
    again = cli("--output", "json", "retry", "wf.yaml", source, "--failed", *db)
    assert again.rc == 4 and _marker(tmp_path) == ["pre", "nap", "nap"], again.stderr
    retry_run = str(again.error["error"]["runId"])
    done = cli(
        "--output", "json", "retry", "wf.yaml", retry_run, "--failed", "--input", "ok=true", *db
    )
    assert done.rc == 0, done.stderr
    assert (done.data["reusedTasks"], done.data["executedTasks"]) == (["pre", "nap"], ["fin"])
    assert _marker(tmp_path) == ["pre", "nap", "nap"]
