"""The human views of ``effects list``, ``effects inspect`` and ``effects reconcile``: an operator
settling a crashed run reads which effect is unresolved, copies its whole id and the printed
command, and sees what was concluded — without reading JSON.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from tests.cli.test_audit_traces import ECHO  # one shell task, `echo hi`
from tests.conftest import Cli

pytestmark = pytest.mark.sqlite_only(reason="printed commands quote the --db path")


def _crashed(cli: Cli, tmp_path: Path) -> tuple[str, str]:
    """A run killed right after its one effect was recorded started: (run id, effect id)."""
    (tmp_path / "wf.yaml").write_text(ECHO, encoding="utf-8")
    crash = {"AGENTCTL_CRASH_AT": "coordinator.after_started", "AGENTCTL_CRASH_HIT": "1"}
    killed = cli("--output", "json", "run", "wf.yaml", "--db", "r.db", env=crash)
    assert killed.rc == -9, killed.stderr
    run_id = cli("--output", "json", "runs", "list", "--db", "r.db").data["runs"][0]["runId"]
    listed = cli("--output", "json", "effects", "list", run_id, "--db", "r.db")
    return run_id, listed.data["effects"][0]["effectId"]


def _commands(text: str) -> list[list[str]]:
    """The commands a view prints (``$ agentctl …``, continued with `` \\``), as argv."""
    joined = text.replace(" \\\n", " ")
    return [shlex.split(line.split("$ ", 1)[1]) for line in joined.splitlines() if "$ " in line]


def test_effects_list_and_inspect_show_the_unresolved_effect_and_how_to_settle_it(
    cli: Cli, tmp_path: Path
) -> None:
    run_id, effect_id = _crashed(cli, tmp_path)
    for args in (("effects", "list", run_id), ("effects", "inspect", effect_id)):
        shown = cli(*args, "--db", "r.db")
        assert shown.rc == 0, shown.stderr
        assert not shown.stdout.lstrip().startswith("{"), shown.stdout  # a view, not JSON
        assert f"  {effect_id}\n" in shown.stdout  # whole, alone on its line: copyable
        assert "task step" in shown.stdout and "builtin.shell.exec" in shown.stdout
        assert "started  not confirmed" in shown.stdout
        printed = _commands(shown.stdout)
        assert [c[c.index("--status") + 1] for c in printed] == ["applied", "not-applied"]
        assert all(c[:4] == ["agentctl", "effects", "reconcile", effect_id] for c in printed)
        assert all(c[-2:] == ["--db", "r.db"] for c in printed)
    # A unique prefix names the effect, as for runs.
    by_prefix = cli("--output", "json", "effects", "inspect", effect_id[:10], "--db", "r.db")
    assert by_prefix.rc == 0 and by_prefix.data["effect"]["effectId"] == effect_id
    verbose = cli("effects", "inspect", effect_id, "--db", "r.db", "--verbose")
    assert '"effectId"' in verbose.stdout  # --verbose adds the data as JSON
    # The older form reads its argument as a run: an effect id there is told so, exit 5.
    older = cli(
        "--output", "json", "effects", "inspect", effect_id, "--task", "step", "--db", "r.db"
    )
    assert older.rc == 5 and "with --task, `effects inspect` takes a run id" in older.stderr
    listed = cli("--output", "json", "effects", "inspect", run_id, "--task", "step", "--db", "r.db")
    assert listed.rc == 0 and listed.data["effects"][0]["effectId"] == effect_id


def test_a_reconciliation_is_shown_with_its_id_actor_and_the_resume_that_follows(
    cli: Cli, tmp_path: Path
) -> None:
    run_id, effect_id = _crashed(cli, tmp_path)
    why = ("--status", "not-applied", "--reason", "the shell never ran", "--actor", "ops")
    done = cli("effects", "reconcile", effect_id[:10], *why, "--db", "r.db")  # a prefix names it
    assert done.rc == 0, done.stderr
    record = json.loads(
        cli("--output", "json", "effects", "inspect", effect_id, "--db", "r.db").stdout
    )["data"]["effectiveReconciliation"]
    assert f"reconciled not_applied  ({record['reconciliationId']})" in done.stdout
    assert "by ops: the shell never ran" in done.stdout
    assert _commands(done.stdout) == [["agentctl", "resume", run_id, "--db", "r.db"]]
    # `resume` refuses a run that has ended: the view says what recovers one instead.
    assert "a run that has ended: retry, repair or compensate it instead" in done.stdout
    # Listed again, the effect carries its conclusion and no longer asks to be settled.
    listed = cli("effects", "list", run_id, "--db", "r.db").stdout
    assert "reconciled not_applied by ops: the shell never ran" in listed
    assert _commands(listed) == []
    resumed = cli("--output", "json", "resume", run_id, "--db", "r.db")
    assert resumed.rc == 0 and resumed.data["state"] == "succeeded", resumed.stderr
