"""The command a blocked recovery plan names for an unresolved effect runs once its placeholders
are filled in: an operator whose run was killed mid-effect tries `retry` (or `repair`,
`compensate`), reads "reconcile it first (`agentctl effects reconcile …`)" and pastes it. The bare
``effects reconcile EFFECT`` it used to name was refused (exit 2: ``--status`` is required).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from tests.cli.test_audit_traces import ECHO  # one shell task, `echo hi`
from tests.conftest import Cli


def _parked(cli: Cli, tmp_path: Path) -> tuple[str, str]:
    """A run whose coordinator was killed with its one effect started, then parked by the
    refused ``resume``: (run id, effect id)."""
    (tmp_path / "wf.yaml").write_text(ECHO, encoding="utf-8")
    crash = {"AGENTCTL_CRASH_AT": "coordinator.after_started", "AGENTCTL_CRASH_HIT": "1"}
    killed = cli("run", "wf.yaml", "--db", "r.db", env=crash)
    assert killed.rc == -9, killed.stderr
    run_id = cli("--output", "json", "runs", "list", "--db", "r.db").data["runs"][0]["runId"]
    refused = cli("resume", run_id, "--db", "r.db")
    assert refused.rc == 3, refused.stderr
    effect_id = cli("--output", "json", "effects", "list", run_id, "--db", "r.db")
    return run_id, effect_id.data["effects"][0]["effectId"]


def _hinted(message: str) -> list[str]:
    """The command in ``… reconcile it first (`COMMAND`; …)``, its placeholders filled in."""
    found = re.search(r"reconcile it first \(`(agentctl [^`]*)`", message)
    assert found is not None, message
    text = found.group(1).replace("applied|not-applied", "not-applied")
    return shlex.split(text.replace("…", "'the process never ran'"))[1:]


def test_the_reconcile_a_blocked_retry_plan_names_is_accepted_as_printed(
    cli: Cli, tmp_path: Path
) -> None:
    run_id, effect_id = _parked(cli, tmp_path)
    plan = cli("--output", "json", "retry", "wf.yaml", run_id, "--failed", "--plan", "--db", "r.db")
    assert plan.rc == 3, plan.stderr
    (block,) = plan.data["blockedReuse"]
    assert block["rule"] == "unreconciled_effect"
    argv = _hinted(block["message"])
    assert argv[:3] == ["effects", "reconcile", effect_id]
    settled = cli(*argv, "--db", "r.db")
    assert settled.rc == 0, settled.stderr
    again = cli(
        "--output", "json", "retry", "wf.yaml", run_id, "--failed", "--plan", "--db", "r.db"
    )
    assert again.rc == 0, again.stderr  # the block is gone: the hint settled what it named


def test_the_human_plan_names_this_invocations_database_in_that_command(
    cli: Cli, tmp_path: Path
) -> None:
    """The block's reason comes from the core, which does not know the database; the human
    view adds the named ``--db``, so the command runs as printed (JSON keeps the reason)."""
    run_id, effect_id = _parked(cli, tmp_path)
    plan = cli("retry", "wf.yaml", run_id, "--failed", "--plan", "--db", "r.db")
    assert plan.rc == 3, plan.stderr
    argv = _hinted(plan.stdout.replace("\n      ", " "))
    assert argv[:3] == ["effects", "reconcile", effect_id] and argv[-2] == "--db"
    assert cli(*argv).rc == 0
