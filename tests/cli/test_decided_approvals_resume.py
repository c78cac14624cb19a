"""One ``resume`` settles every decided approval (spec/cli.md §5, §9; docs/operations.md §5).

A run paused at two held writes: once both are decided and at least one was rejected, the
``resume`` fails the rejected task ("approval rejected") and ends the run ``failed`` (exit 4,
its ``RunOutcome`` printed). It used to pause again (exit 3) with nothing pending: the
rejected task's failure stopped the drive before the other decided task was reached, and a
task still ``waiting_for_approval`` kept the run ``paused`` though nobody had anything left to
decide — it took a second ``resume`` to finish the run. A write approved but never started
ends with its effect ``cancelled`` when the run fails or is cancelled, never ``requested``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.conftest import Cli

WF = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: { name: decided }
spec:
  policy: { writableRoots: [out] }
  actions: { save: { kind: builtin.write } }
  tasks:
    - { id: a, uses: "action:save", with: { path: out/a.txt, content: a } }
    - { id: b, uses: "action:save", with: { path: out/b.txt, content: b } }
"""


def _json(cli: Cli, *args: str) -> Any:
    return cli("--output", "json", *args, "--db", "r.db")


def _paused_with_two(cli: Cli, tmp_path: Path) -> tuple[str, list[str]]:
    (tmp_path / "wf.yaml").write_text(WF)
    paused = _json(cli, "run", "wf.yaml")
    assert paused.rc == 3, paused.stderr
    run_id = str(paused.data["runId"])
    approvals = _json(cli, "approvals", "list", run_id).data["approvals"]
    assert [a["taskId"] for a in approvals] == ["a", "b"]
    return run_id, [str(a["approvalId"]) for a in approvals]


def _tasks(cli: Cli, run_id: str) -> dict[str, tuple[str, str | None]]:
    data = _json(cli, "inspect", run_id).data
    assert data["approvals"] == []  # nothing left pending in the finished run
    return {t["taskId"]: (t["state"], t["error"]) for t in data["tasks"]}


def _effects(cli: Cli, run_id: str) -> dict[str, str]:
    return {e["taskId"]: e["status"] for e in _json(cli, "effects", "list", run_id).data["effects"]}


def test_two_rejections_fail_the_run_in_one_resume(cli: Cli, tmp_path: Path) -> None:
    run_id, (first, second) = _paused_with_two(cli, tmp_path)
    for approval in (first, second):
        assert _json(cli, "approvals", "reject", approval, "--reason", "no").rc == 0
    resumed = _json(cli, "resume", run_id)
    assert resumed.rc == 4, resumed.stdout + resumed.stderr
    assert resumed.data["state"] == "failed"
    rejected = ("failed", "approval rejected")
    assert _tasks(cli, run_id) == {"a": rejected, "b": rejected}
    assert not (tmp_path / "out").exists()


def test_a_rejection_beside_an_approval_fails_the_run_in_one_resume(
    cli: Cli, tmp_path: Path
) -> None:
    run_id, (first, second) = _paused_with_two(cli, tmp_path)
    assert _json(cli, "approvals", "reject", first, "--reason", "no").rc == 0
    assert _json(cli, "approvals", "approve", second, "--reason", "ok").rc == 0
    resumed = _json(cli, "resume", run_id)
    assert resumed.rc == 4, resumed.stdout + resumed.stderr
    assert resumed.data["state"] == "failed"
    states = _tasks(cli, run_id)
    assert states["a"] == ("failed", "approval rejected")
    # The failure stopped the run before the approved write started: it never will, and
    # its reservation is settled with nothing, as for any task a failed run did not start.
    assert states["b"][0] == "cancelled"
    assert _effects(cli, run_id)["b"] == "cancelled"  # not left ``requested`` in a failed run
    assert not (tmp_path / "out" / "b.txt").exists()
    budget = _json(cli, "inspect", run_id).data["budget"]
    assert all(v == 0 for v in budget["reserved"].values())


def test_resume_returns_paused_and_runs_nothing_while_an_approval_is_pending(
    cli: Cli, tmp_path: Path
) -> None:
    # spec/cli.md §5: for each task waiting for its approval, "still waiting ⇒ return paused
    # (3)" — before the run turns running, so nothing runs, not even a write approved beside
    # the undecided one, and the run is left as it was.
    run_id, (first, second) = _paused_with_two(cli, tmp_path)
    assert _json(cli, "approvals", "approve", second, "--reason", "ok").rc == 0
    before = _json(cli, "inspect", run_id).data
    assert [a["approvalId"] for a in before["approvals"]] == [first]
    resumed = _json(cli, "resume", run_id)
    assert resumed.rc == 3, resumed.stdout + resumed.stderr
    assert resumed.data["state"] == "paused" and resumed.data["output"] is None
    assert not (tmp_path / "out").exists()
    assert _json(cli, "inspect", run_id).data == before  # no lease, state or audit written
    assert _json(cli, "approvals", "approve", first, "--reason", "ok").rc == 0
    done = _json(cli, "resume", run_id)
    assert done.rc == 0, done.stdout + done.stderr
    assert _tasks(cli, run_id) == {"a": ("succeeded", None), "b": ("succeeded", None)}
    assert (tmp_path / "out" / "a.txt").read_text() == "a"
    assert (tmp_path / "out" / "b.txt").read_text() == "b"


def test_a_rejection_listed_before_an_undecided_approval_fails_the_run(
    cli: Cli, tmp_path: Path
) -> None:
    # Walking the waiting tasks in compiled order (spec/cli.md §5), the rejected one comes
    # first: "cancelled ⇒ task failed, run failed (4)", whatever waits after it.
    run_id, (first, _second) = _paused_with_two(cli, tmp_path)
    assert _json(cli, "approvals", "reject", first, "--reason", "no").rc == 0
    resumed = _json(cli, "resume", run_id)
    assert resumed.rc == 4, resumed.stdout + resumed.stderr
    assert resumed.data["state"] == "failed"
    assert _tasks(cli, run_id)["a"] == ("failed", "approval rejected")
    assert not (tmp_path / "out").exists()


def test_approved_effects_end_cancelled_when_the_run_is_cancelled(cli: Cli, tmp_path: Path) -> None:
    # spec/cli.md §3, §6: a terminal run is immutable. ``cancel`` of the paused run is honoured
    # by the resume before any work: the approved writes never start, so their effects end
    # ``cancelled`` as an undecided approval's does — not ``requested`` for ever.
    run_id, approvals = _paused_with_two(cli, tmp_path)
    for approval in approvals:
        assert _json(cli, "approvals", "approve", approval, "--reason", "ok").rc == 0
    assert _json(cli, "cancel", run_id).rc == 0
    resumed = _json(cli, "resume", run_id)
    assert resumed.rc == 130, resumed.stdout + resumed.stderr
    assert _effects(cli, run_id) == {"a": "cancelled", "b": "cancelled"}
    assert {state for state, _ in _tasks(cli, run_id).values()} == {"cancelled"}
    assert not (tmp_path / "out").exists()
    budget = _json(cli, "inspect", run_id).data["budget"]
    assert all(v == 0 for v in budget["reserved"].values())


FAN = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: { name: fan }
spec:
  runtime: { maxConcurrency: 3 }
  policy: { writableRoots: [out] }
  actions: { save: { kind: builtin.write }, put: { kind: builtin.assign } }
  tasks:
    - { id: fan, uses: "action:save", failure: continue, foreach: { items: [a, b, c] },
        with: { path: "out/${{ vars.item }}.txt", content: "${{ vars.item }}" } }
    - { id: after, uses: "action:put", needs: [fan], with: { seen: "${{ tasks.fan.output.items }}" } }
"""


def test_a_rejection_under_failure_continue_waits_for_the_undecided_approval(
    cli: Cli, tmp_path: Path
) -> None:
    # Under `failure: continue` a rejected task does not end the run, so the exception for a
    # rejection listed first does not apply: while a sibling's approval is undecided the
    # resume returns paused and runs nothing — it had settled the rejection and written the
    # child approved after the undecided one, then paused again.
    (tmp_path / "wf.yaml").write_text(FAN)
    paused = _json(cli, "run", "wf.yaml")
    assert paused.rc == 3, paused.stderr
    run_id = str(paused.data["runId"])
    approvals = _json(cli, "approvals", "list", run_id).data["approvals"]
    first, second, third = (str(a["approvalId"]) for a in approvals)
    assert _json(cli, "approvals", "reject", first, "--reason", "no").rc == 0
    assert _json(cli, "approvals", "approve", third, "--reason", "ok").rc == 0
    before = _json(cli, "inspect", run_id).data
    resumed = _json(cli, "resume", run_id)
    assert resumed.rc == 3, resumed.stdout + resumed.stderr
    assert resumed.data["state"] == "paused"
    assert not (tmp_path / "out").exists()
    assert _json(cli, "inspect", run_id).data == before
    assert _json(cli, "approvals", "approve", second, "--reason", "ok").rc == 0
    done = _json(cli, "resume", run_id)
    assert done.rc == 4, done.stdout + done.stderr
    assert done.data["state"] == "failed"
    states = _tasks(cli, run_id)
    children = sorted(t for t in states if t.startswith("fan--"))
    assert [states[t] for t in children] == [
        ("failed", "approval rejected"),
        ("succeeded", None),
        ("succeeded", None),
    ]
    assert states["fan"] == ("succeeded", None) and states["after"] == ("succeeded", None)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["b.txt", "c.txt"]
