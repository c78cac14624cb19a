"""Who resolves an approval is part of its record (spec/cli.md §9: approve/reject "records
resolver/time/reason"): an empty ``--actor`` or ``--reason`` is bad input (exit 2, spec/cli.md
§2), refused before the database is opened, and leaves the approval pending; a named actor is
what the audit row records."""

from __future__ import annotations

from pathlib import Path

WF = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: { name: resolver }
spec:
  policy: { writableRoots: [out] }
  actions: { save: { kind: builtin.write } }
  tasks: [ { id: a, uses: "action:save", with: { path: out/a.txt, content: a } } ]
"""


def test_an_approval_needs_a_named_resolver(cli, write_workflow, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    wf = write_workflow(WF)
    db = ("--db", str(tmp_path / "r.db"))
    paused = cli("--output", "json", "run", str(wf), *db)
    assert paused.rc == 3, paused.stderr
    run_id = paused.data["runId"]
    listed = cli("--output", "json", "approvals", "list", run_id, *db)
    approval_id = listed.data["approvals"][0]["approvalId"]
    approve = ("--output", "json", "approvals", "approve", approval_id, "--reason", "ok", *db)
    for actor in ("", "   "):
        refused = cli(*approve, "--actor", actor)
        assert refused.rc == 2, refused.stdout
        assert "--actor must not be empty" in refused.error["error"]["message"]
    for verb in ("approve", "reject"):
        blank = cli("--output", "json", "approvals", verb, approval_id, "--reason", " ", *db)
        assert blank.rc == 2, blank.stdout
        assert "--reason must not be empty" in blank.error["error"]["message"]
    still = cli("--output", "json", "approvals", "list", run_id, *db)
    assert [a["status"] for a in still.data["approvals"]] == ["pending"]
    named = cli(*approve, "--actor", "alice")
    assert named.rc == 0, named.stderr
    audit = cli("--output", "json", "inspect", run_id, *db).data["audit"]
    approved = [a["payload"] for a in audit if a["eventType"] == "approval.approved"]
    assert [p["actor"] for p in approved] == ["alice"]


def test_a_decision_is_audited_before_the_effect_it_moves(
    cli, write_workflow, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    decisions = (("approve", "approval.approved", "effect.requested"),)
    decisions += (("reject", "approval.rejected", "effect.cancelled"),)
    for verb, decided, moved in decisions:
        db = ("--db", str(tmp_path / f"{verb}.db"))
        run_id = cli("--output", "json", "run", str(write_workflow(WF)), *db).data["runId"]
        listed = cli("--output", "json", "approvals", "list", run_id, *db)
        approval_id = listed.data["approvals"][0]["approvalId"]
        assert cli("approvals", verb, approval_id, "--reason", "r", *db).rc == 0
        audit = cli("--output", "json", "inspect", run_id, *db).data["audit"]
        assert [a["eventType"] for a in audit][-2:] == [decided, moved]


def test_an_option_is_never_taken_as_the_value_of_the_one_before(  # type: ignore[no-untyped-def]
    cli, write_workflow, tmp_path: Path
) -> None:
    """``--reason --actor alice``: click gave --reason the text "--actor" and the approval was
    resolved (exit 0) with that reason and the default actor; it is a usage error (exit 2)
    that leaves the approval pending. ``--reason=--actor`` still says that text on purpose."""
    wf = write_workflow(WF)
    db = ("--db", str(tmp_path / "r.db"))
    run_id = cli("--output", "json", "run", str(wf), *db).data["runId"]
    listed = cli("--output", "json", "approvals", "list", run_id, *db)
    approval_id = listed.data["approvals"][0]["approvalId"]
    approve = ("--output", "json", "approvals", "approve", approval_id)
    for argv in (("--reason", "--actor", "alice"), ("--actor", "--reason", "ok")):
        refused = cli(*approve, *argv, *db)
        assert refused.rc == 2, (refused.stdout, refused.stderr)
        message = refused.error["error"]["message"]
        assert f"option {argv[0]} requires a value" in message, message
    still = cli("--output", "json", "approvals", "list", run_id, *db)
    assert [a["status"] for a in still.data["approvals"]] == ["pending"]
    meant = cli(*approve, "--reason=--actor", "--actor", "alice", *db)
    assert meant.rc == 0, meant.stderr
    audit = cli("--output", "json", "inspect", run_id, *db).data["audit"]
    approved = [a["payload"] for a in audit if a["eventType"] == "approval.approved"]
    assert [(p["actor"], p["reason"]) for p in approved] == [("alice", "--actor")]


FAILING = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: { name: failing }
spec:
  actions: { check: { kind: builtin.assert } }
  tasks: [ { id: a, uses: "action:check", with: { that: false, message: no } } ]
"""


def test_retry_and_repair_refuse_a_blank_reason(cli, write_workflow, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """``--reason`` is recorded on the new run, as an approval's is: blank is exit 2, and no
    run is created."""
    wf = write_workflow(FAILING)
    db = ("--db", str(tmp_path / "r.db"))
    failed = cli("--output", "json", "run", str(wf), *db)
    assert failed.rc == 4, failed.stderr
    source = failed.error["error"]["runId"]
    for command in (
        ("retry", str(wf), source, "--failed"),
        ("repair", str(wf), source, "--from", "a"),
    ):
        for reason in ("", "  "):
            refused = cli("--output", "json", *command, "--reason", reason, *db)
            assert refused.rc == 2, (command, refused.stdout, refused.stderr)
            assert "--reason must not be empty" in refused.error["error"]["message"]
    runs = cli("--output", "json", "runs", "list", *db).data["runs"]
    assert [r["runId"] for r in runs] == [source]
