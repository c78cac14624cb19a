"""A value that names something — a task, a memory namespace or key, an approval — names
something that exists, or the command says so; it is never silently taken as "nothing".

- ``effects list RUN --task T`` and ``artifacts list --run R --task T``: a ``T`` that is not a
  task of the run (a typo, an empty string) is not found, exit 5, naming the task and the
  run; a task that exists without effects or artifacts is an empty list, exit 0; a foreach's
  expanded children are tasks of the run;
- ``runs list --workflow ""`` names no workflow (a name is never empty): exit 2;
- ``memory get|put|search|reindex``: an empty namespace or key is bad input, exit 2, and
  nothing is written;
- ``approvals approve|reject``: an approval is named by its id or a unique prefix of it, by
  the rule run ids follow (the kind and at least 6 characters after it);
- ``effects inspect|reconcile``: an effect id shorter than a prefix (6 hex digits) names no
  effect: not found, exit 5, as any unknown id (spec/cli.md §2), and nothing is recorded.
"""

from __future__ import annotations

from pathlib import Path

from tests.conftest import Cli

FAN_OUT = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: { name: lookups }
spec:
  policy: { writableRoots: [out], approval: APPROVAL }
  actions: { save: { kind: builtin.write }, note: { kind: builtin.assign } }
  tasks:
    - { id: save, uses: "action:save", foreach: { items: [x, y] }, with: { path: "out/${{ vars.item }}.txt", content: a } }
    - { id: after, uses: "action:note", needs: [save], with: { done: true } }
"""
DB = ("--db", "r.db")


def _run(cli: Cli, tmp_path: Path, approval: str) -> tuple[str, list[str]]:
    """A run of FAN_OUT: its id and the foreach's expanded children, from ``inspect``."""
    (tmp_path / "wf.yaml").write_text(FAN_OUT.replace("APPROVAL", approval), encoding="utf-8")
    ran = cli("--output", "json", "run", "wf.yaml", *DB)
    assert ran.rc == (0 if approval == "never" else 3), ran.stderr
    run_id = ran.data["runId"]
    tasks = cli("--output", "json", "inspect", run_id, *DB).data["tasks"]
    children = [t["taskId"] for t in tasks if t["taskId"].startswith("save--")]
    assert len(children) == 2, tasks
    return run_id, children


def test_a_task_filter_names_a_task_of_the_run(cli: Cli, tmp_path: Path) -> None:
    run_id, children = _run(cli, tmp_path, "never")
    effects = ("--output", "json", "effects", "list", run_id, *DB, "--task")
    artifacts = ("--output", "json", "artifacts", "list", "--run", run_id, *DB, "--task")
    for child in children:  # an expanded child is a task of the run
        listed = cli(*effects, child)
        assert listed.rc == 0, listed.stderr
        assert [e["taskId"] for e in listed.data["effects"]] == [child]
        refs = cli(*artifacts, child)
        assert refs.rc == 0, refs.stderr
        assert [r["taskId"] for r in refs.data["references"]] == [child]
    for command in (effects, artifacts):  # a task without any: an empty list, exit 0
        none = cli(*command, "after")
        assert none.rc == 0, none.stderr
        assert none.data.get("effects", none.data.get("references")) == []
    older = ("--output", "json", "effects", "inspect", run_id, *DB, "--task")
    for typo in ("typo", "", "save--9"):
        for command in (effects, artifacts, older):
            refused = cli(*command, typo)
            assert refused.rc == 5, (command, typo, refused.stdout)
            message = refused.error["error"]["message"]
            assert f"task {typo!r} not found in run {run_id}" in message, message
            assert refused.error["error"]["runId"] == run_id  # the run is known: named


def test_an_empty_workflow_filter_is_bad_input(cli: Cli) -> None:
    assert cli("db", "migrate", *DB).rc == 0
    refused = cli("--output", "json", "runs", "list", "--workflow", "", *DB)
    assert refused.rc == 2, refused.stdout
    assert "--workflow must not be empty" in refused.error["error"]["message"]
    assert cli("--output", "json", "runs", "list", "--workflow", "w", *DB).data["runs"] == []


def test_memory_names_an_entry_with_a_namespace_and_a_key(cli: Cli) -> None:
    db = ("--db", "m.db")
    for argv in (
        ("put", "", "k", "1"),
        ("put", "ns", "", "1"),
        ("get", "", "k"),
        ("get", "ns", ""),
        ("search", "", "q"),
        ("reindex", ""),
    ):
        refused = cli("--output", "json", "memory", *argv, *db)
        assert refused.rc == 2, (argv, refused.stdout)
        message = refused.error["error"]["message"]
        assert "must not be empty" in message, message
    assert cli("--output", "json", "memory", "put", "ns", "k", "1", *db).rc == 0
    counts = cli("--output", "json", "db", "stats", *db).data["counts"]
    assert counts["long_term_memory"] == 1  # the one written, none of the refused


def test_an_approval_is_named_by_a_unique_prefix(cli: Cli, tmp_path: Path) -> None:
    run_id, _ = _run(cli, tmp_path, "mutations")
    listed = cli("--output", "json", "approvals", "list", run_id, *DB).data["approvals"]
    first, second = (a["approvalId"] for a in listed)
    why = ("--reason", "checked", *DB)
    for short in ("approval-", first[: len("approval-") + 5], ""):
        refused = cli("--output", "json", "approvals", "approve", short, *why)
        assert refused.rc == 5, (short, refused.stdout)
        # The example prefix looks like an approval id (uuid4), not like a run's (uuid7).
        assert "e.g. approval-7e7f45…" in refused.error["error"]["message"], refused.stderr
    too_short = cli("--output", "json", "cancel", "run-01", *DB).error["error"]["message"]
    assert "e.g. run-01a229…" in too_short, too_short
    still = cli("--output", "json", "approvals", "list", run_id, *DB).data["approvals"]
    assert [a["status"] for a in still] == ["pending", "pending"]
    # The kind and 8 hex digits: unique for two random ids but for a 1-in-4-billion draw.
    approved = cli("--output", "json", "approvals", "approve", first[:17], *why)
    assert approved.rc == 0, approved.stderr
    assert (approved.data["approvalId"], approved.data["status"]) == (first, "approved")
    rejected = cli("--output", "json", "approvals", "reject", second[:17], *why)
    assert rejected.rc == 0, rejected.stderr
    assert (rejected.data["approvalId"], rejected.data["status"]) == (second, "rejected")


def test_an_effect_id_too_short_for_a_prefix_is_not_found(cli: Cli, tmp_path: Path) -> None:
    run_id, _ = _run(cli, tmp_path, "never")
    listed = cli("--output", "json", "effects", "list", run_id, *DB).data["effects"]
    effect_id = listed[0]["effectId"]
    why = ("--status", "not-applied", "--reason", "r", *DB)
    for short in ("", "abc", effect_id[:5]):
        for command in (("effects", "inspect", short, *DB), ("effects", "reconcile", short, *why)):
            refused = cli("--output", "json", *command)
            assert refused.rc == 5, (command, refused.stderr)
            assert "not found" in refused.error["error"]["message"], refused.stderr
    shown = cli("--output", "json", "effects", "inspect", effect_id[:6], *DB)
    assert shown.rc == 0 and shown.data["effect"]["effectId"] == effect_id, shown.stderr
    after = cli("--output", "json", "effects", "list", run_id, *DB).data["reconciliations"]
    assert after == []
