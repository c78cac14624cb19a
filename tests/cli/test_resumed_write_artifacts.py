"""A ``builtin.write`` whose outcome was durable when its coordinator died, its task not yet
completed: ``resume`` completes the task from the recorded outcome and commits the artifact
reference the write would have had without the crash (spec/cli.md §8: task success commits
refs) — from the blob still stored, else from the workspace file if it still holds exactly the
bytes written; otherwise none, audited as ``artifact.not_recovered``, and the run goes on.

The crash is the ``coordinator.after_outcome`` point (two effects in one batch: each outcome
commits ahead of its task's completion), so nothing here depends on timing."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.cli.tool_writer import tool_writer
from tests.clibackend import LedgerTarget

WRITES = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: artcrash }
spec:
  runtime: { maxConcurrency: 2 }
  policy: { approval: never, writableRoots: [out] }
  actions:
    save: { kind: builtin.write }
  tasks:
    - { id: a, uses: action:save, with: { path: out/a.txt, content: hello } }
    - { id: b, uses: action:save, with: { path: out/b.txt, content: world } }
"""
# Both outcomes durable (the second is committed by then), neither task completed.
KILL = {"AGENTCTL_CRASH_AT": "coordinator.after_outcome", "AGENTCTL_CRASH_HIT": "2"}


def _crashed(cli, wf: Path, db: Path) -> str:  # type: ignore[no-untyped-def]
    first = cli("--output", "json", "run", str(wf), "--db", str(db), env=KILL)
    assert first.rc == -9, first.stderr
    run_id = cli("--output", "json", "runs", "list", "--db", str(db)).data["runs"][0]["runId"]
    tasks = cli("--output", "json", "inspect", run_id, "--db", str(db)).data["tasks"]
    assert {t["taskId"]: t["state"] for t in tasks} == {"a": "running", "b": "running"}
    return str(run_id)


def _refs(cli, run_id: str, db: Path) -> dict[str, str]:  # type: ignore[no-untyped-def]
    listed = cli("--output", "json", "artifacts", "list", "--run", run_id, "--db", str(db))
    assert listed.rc == 0, listed.stderr
    return {r["taskId"]: r["path"] for r in listed.data["references"]}


def test_resume_commits_the_reference_of_a_write_confirmed_before_the_crash(  # type: ignore[no-untyped-def]
    cli, ledger_target: LedgerTarget, write_workflow: Callable[[str], Path], tmp_path: Path
) -> None:
    db = tmp_path / "st" / "r.db"
    run_id = _crashed(cli, write_workflow(WRITES), db)
    resumed = cli("--output", "json", "resume", run_id, "--db", str(db))
    assert (resumed.rc, resumed.data["state"]) == (0, "succeeded"), resumed.stderr
    assert _refs(cli, run_id, db) == {"a": "out/a.txt", "b": "out/b.txt"}
    # The first ingestion's leases are released with the completion, and its bytes were
    # metered once: asking again under the same reservation counts nothing.
    assert ledger_target.sql(db, "SELECT lease_id FROM artifact_ingests") == []
    shown = cli("--output", "json", "inspect", run_id, "--db", str(db)).data
    assert shown["budget"]["usage"]["artifactBytes"] == len("hello") + len("world")
    assert shown["effects"] and len(shown["effects"]) == 2  # nothing written again


def test_resume_ingests_the_file_again_or_says_it_cannot(  # type: ignore[no-untyped-def]
    cli, ledger_target: LedgerTarget, write_workflow: Callable[[str], Path], tmp_path: Path
) -> None:
    """The blobs collected meanwhile (their leases expired): ``a``'s file still holds what was
    written and is ingested again; ``b``'s was changed since, so it has no reference — and the
    audit says why — while the run still succeeds."""
    db = tmp_path / "st" / "r.db"
    run_id = _crashed(cli, write_workflow(WRITES), db)
    ledger_target.sql(db, "UPDATE artifact_ingests SET expires_at = '2000-01-01T00:00:00Z'")
    ledger_target.sql(db, "UPDATE artifact_blobs SET created_at = '2000-01-01T00:00:00Z'")
    gc = cli("--output", "json", "artifacts", "gc", "--older-than-days", "0", "--db", str(db))
    assert gc.rc == 0 and len(gc.data["report"]["removed"]) == 2, gc.stderr
    (tmp_path / "out" / "b.txt").write_text("changed by hand", encoding="utf-8")
    resumed = cli("--output", "json", "resume", run_id, "--db", str(db))
    assert (resumed.rc, resumed.data["state"]) == (0, "succeeded"), resumed.stderr
    assert _refs(cli, run_id, db) == {"a": "out/a.txt"}
    shown = cli("--output", "json", "inspect", run_id, "--db", str(db)).data
    lost = [e for e in shown["audit"] if e["eventType"] == "artifact.not_recovered"]
    assert [(e["taskId"], e["payload"]["path"]) for e in lost] == [("b", "out/b.txt")]
    assert shown["budget"]["usage"]["artifactBytes"] == len("hello") + len("world")


AGENT = tool_writer(
    "toolcrash",
    """\
  tasks:
    - { id: viaTool, uses: "agent:w", with: { prompt: go } }
""",
)


def test_resume_commits_the_reference_of_a_tool_write_made_before_the_crash(  # type: ignore[no-untyped-def]
    cli, write_workflow: Callable[[str], Path], tmp_path: Path
) -> None:
    """Killed once the agent's write call is durable (its model call first, then the write):
    the resumed loop reuses the call, and the task's completion references its file."""
    db = tmp_path / "st" / "r.db"
    first = cli("--output", "json", "run", str(write_workflow(AGENT)), "--db", str(db), env=KILL)
    assert first.rc == -9, first.stderr
    run_id = cli("--output", "json", "runs", "list", "--db", str(db)).data["runs"][0]["runId"]
    effects = cli("--output", "json", "inspect", run_id, "--db", str(db)).data["effects"]
    assert [e["status"] for e in effects] == ["succeeded", "succeeded"]
    resumed = cli("--output", "json", "resume", run_id, "--db", str(db))
    assert (resumed.rc, resumed.data["state"]) == (0, "succeeded"), resumed.stderr
    assert _refs(cli, run_id, db) == {"viaTool": "out/t.txt"}
