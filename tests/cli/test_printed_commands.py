"""A command a human view tells the operator to run next runs as printed, its placeholders
(``<why>``, ``<result.json>``) filled in: against the database this invocation named, with
every option the command needs.

- ``effects list|inspect`` and ``inspect`` print, for an unresolved effect, an ``applied`` and
  a ``not-applied`` reconciliation; ``applied`` needs the result the task carries on with, so
  its command names ``--result-file`` (without it the ledger refuses, exit 4);
- ``approvals approve|reject`` says which ``resume`` continues the run: with ``--db`` when
  the approval was resolved in a database other than the default; so does ``cancel`` of a
  paused run, whose next ``resume`` ends it.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from tests.cli.test_audit_traces import ECHO  # one shell task, `echo hi`
from tests.conftest import EXAMPLES, Cli

pytestmark = pytest.mark.sqlite_only(reason="printed commands quote the --db path")
DB = ("--db", "state/r.db")


def _commands(text: str) -> list[list[str]]:
    """The commands a view prints (``$ agentctl …``, continued with `` \\``), as argv."""
    joined = text.replace(" \\\n", " ")
    return [shlex.split(line.split("$ ", 1)[1]) for line in joined.splitlines() if "$ " in line]


def _filled(command: list[str], result: Path) -> list[str]:
    """``command`` without ``agentctl``, its placeholders replaced by real values."""
    values = {"<why>": "checked by hand", "<result.json>": str(result)}
    return [values.get(word, word) for word in command[1:]]


def test_the_printed_applied_reconciliation_is_accepted(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "wf.yaml").write_text(ECHO, encoding="utf-8")
    crash = {"AGENTCTL_CRASH_AT": "coordinator.after_started", "AGENTCTL_CRASH_HIT": "1"}
    assert cli("--output", "json", "run", "wf.yaml", *DB, env=crash).rc == -9
    run_id = cli("--output", "json", "runs", "list", *DB).data["runs"][0]["runId"]
    effect = cli("--output", "json", "effects", "list", run_id, *DB).data["effects"][0]
    result = tmp_path / "result.json"
    result.write_text('{"exitCode": 0, "stdout": "hi\\n", "stderr": ""}', encoding="utf-8")
    views = [("effects", "list", run_id), ("effects", "inspect", effect["effectId"])]
    for view in [*views, ("inspect", run_id)]:
        shown = cli(*view, *DB)
        assert shown.rc == 0, shown.stderr
        applied = [c for c in _commands(shown.stdout) if "applied" in c]
        assert len(applied) == 1, shown.stdout
        assert applied[0][-2:] == list(DB) and "--result-file" in applied[0], applied
        assert "--approved" not in applied[0]  # approval: never gives the leave itself
    recorded = cli(*_filled(applied[0], result))
    assert recorded.rc == 0, recorded.stderr
    assert cli("resume", run_id, *DB).rc == 0  # the recorded result is used, nothing reruns


@pytest.mark.parametrize("verb", ["approve", "reject"])
def test_the_resume_an_approval_prints_names_its_database(
    cli: Cli, tmp_path: Path, verb: str
) -> None:
    (tmp_path / "e6.yaml").write_text((EXAMPLES / "e6-approval.yaml").read_text())
    paused = cli("--output", "json", "run", "e6.yaml", *DB)
    assert paused.rc == 3, paused.stderr
    run_id = paused.data["runId"]
    pending = cli("--output", "json", "approvals", "list", run_id, *DB).data["approvals"]
    decided = cli("approvals", verb, pending[0]["approvalId"], "--reason", "r", *DB)
    assert decided.rc == 0, decided.stderr
    printed = decided.stdout.strip().split("continue with: ", 1)[1]
    assert shlex.split(printed) == ["agentctl", "resume", run_id, *DB]
    resumed = cli(*shlex.split(printed)[1:])
    assert resumed.rc == (0 if verb == "approve" else 4), resumed.stderr
    # The default database needs no --db, as every printed command.
    default = cli("approvals", verb, pending[0]["approvalId"][:15], "--reason", "r")
    assert default.rc == 5  # no default database here: nothing else is named


def test_the_resume_a_paused_cancel_prints_names_its_database(cli: Cli, tmp_path: Path) -> None:
    """`cancel` of a paused run says which `resume` ends it: with this invocation's --db."""
    (tmp_path / "e6.yaml").write_text((EXAMPLES / "e6-approval.yaml").read_text())
    paused = cli("--output", "json", "run", "e6.yaml", *DB)
    assert paused.rc == 3, paused.stderr
    run_id = paused.data["runId"]
    asked = cli("cancel", run_id, *DB)
    assert asked.rc == 0, asked.stderr
    printed = asked.stdout.split("`")[1]
    assert shlex.split(printed) == ["agentctl", "resume", run_id, *DB]
    assert cli(*shlex.split(printed)[1:]).rc == 130  # it runs as printed and ends the run


def test_the_commands_an_error_suggests_name_its_database(cli: Cli, tmp_path: Path) -> None:
    """An error's message and hint come from layers that do not know the database; the CLI
    adds the named ``--db`` to each command they suggest, so each runs as printed."""
    (tmp_path / "wf.yaml").write_text(ECHO, encoding="utf-8")
    crash = {"AGENTCTL_CRASH_AT": "coordinator.after_started", "AGENTCTL_CRASH_HIT": "1"}
    assert cli("--output", "json", "run", "wf.yaml", *DB, env=crash).rc == -9
    run_id = cli("--output", "json", "runs", "list", *DB).data["runs"][0]["runId"]
    blocked = cli("--output", "json", "resume", run_id, *DB)
    assert blocked.rc == 3, blocked.stderr
    hint = str(blocked.error["error"]["details"]["hint"])
    suggested = [shlex.split(span) for span in hint.split("`")[1::2]]
    assert [c[:3] for c in suggested] == [["agentctl", "effects", "reconcile"]], hint
    assert suggested[0][-2:] == list(DB), hint
    effect = cli("--output", "json", "effects", "list", run_id, *DB).data["effects"][0]
    result = tmp_path / "result.json"
    result.write_text('{"exitCode": 0, "stdout": "hi\\n", "stderr": ""}', encoding="utf-8")
    filled = {"EFFECT": effect["effectId"], "applied|not-applied": "applied", "…": "by hand"}
    command = [filled.get(word, word) for word in suggested[0][1:]]
    recorded = cli(*command, "--result-file", str(result))
    assert recorded.rc == 0, recorded.stderr
    assert cli("resume", run_id, *DB).rc == 0
    assert not (tmp_path / ".agentctl").exists()  # nothing looked in the default ledger


def test_the_printed_reconciliation_carries_approved_where_the_policy_asks_it(
    cli: Cli, tmp_path: Path
) -> None:
    """Under the default policy (``approval: mutations``) reconciling a process effect takes
    ``--approved`` (without it the ledger refuses, exit 4): the printed commands carry it."""
    asking = ECHO.replace("approval: never, ", "")
    (tmp_path / "wf.yaml").write_text(asking, encoding="utf-8")
    paused = cli("--output", "json", "run", "wf.yaml", *DB)
    assert paused.rc == 3, paused.stderr
    run_id = paused.data["runId"]
    pending = cli("--output", "json", "approvals", "list", run_id, *DB).data["approvals"]
    assert cli("approvals", "approve", pending[0]["approvalId"], "--reason", "ok", *DB).rc == 0
    crash = {"AGENTCTL_CRASH_AT": "coordinator.after_started", "AGENTCTL_CRASH_HIT": "1"}
    assert cli("resume", run_id, *DB, env=crash).rc == -9
    effect = cli("--output", "json", "effects", "list", run_id, *DB).data["effects"][0]
    views = [("effects", "list", run_id), ("effects", "inspect", effect["effectId"])]
    for view in [*views, ("inspect", run_id)]:
        shown = cli(*view, *DB)
        assert shown.rc == 0, shown.stderr
        printed = [c for c in _commands(shown.stdout) if "reconcile" in c]
        assert len(printed) == 2 and all("--approved" in c for c in printed), shown.stdout
    not_applied = next(c for c in printed if "not-applied" in c)
    without = [w for w in _filled(not_applied, tmp_path / "unused.json") if w != "--approved"]
    refused = cli("--output", "json", *without)
    assert refused.rc == 4 and "add --approved" in refused.error["error"]["message"]
    assert refused.error["error"]["runId"] == run_id  # the refusal names the effect's run
    recorded = cli(*_filled(not_applied, tmp_path / "unused.json"))
    assert recorded.rc == 0, recorded.stderr  # runs as printed


def test_a_paused_run_says_how_to_go_on_against_its_database(cli: Cli, tmp_path: Path) -> None:
    """The human view of a paused run names the commands that list its approvals and resume
    it — with this invocation's --db — and each runs as printed."""
    (tmp_path / "e6.yaml").write_text((EXAMPLES / "e6-approval.yaml").read_text())
    paused = cli("run", "e6.yaml", *DB)
    assert paused.rc == 3, paused.stderr
    listing, resume = _quoted(paused.stdout)
    assert listing[:3] == ["agentctl", "approvals", "list"] and listing[-2:] == list(DB)
    listed = cli("--output", "json", *listing[1:])
    assert listed.rc == 0, listed.stderr
    approval = listed.data["approvals"][0]["approvalId"]
    assert cli("approvals", "approve", approval, "--reason", "ok", *DB).rc == 0
    assert resume == ["agentctl", "resume", listed.data["runId"], *DB]
    assert cli(*resume[1:]).rc == 0


def _quoted(text: str) -> list[list[str]]:
    """The `` `agentctl …` `` commands a line of a view names, as argv."""
    return [shlex.split(part) for part in text.split("`")[1::2] if part.startswith("agentctl ")]
