"""SIGTERM (or SIGINT) landing while ``run``, ``fork``, ``retry`` or ``repair`` creates its run: once the creating
write has committed, the run exists (``running``, nothing of it started) and the exit-130 error
names it (``error.runId``), as one landing just before the drive does
(test_interrupt_before_drive.py); one landing before the write created nothing and names none.

Found by a black-box script: a SIGINT about a second into ``agentctl run`` left a ``running``
run behind an error whose ``runId`` was null, so the script could not cancel or resume it. The
stand-in command sends the signal to itself right after (or right before) the creating write.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from tests.cli.test_interrupt_before_drive import WF
from tests.cli.test_startup import EXAMPLES
from tests.clibackend import LedgerTarget
from tests.conftest import Cli

# ``python -m agentctl`` whose run-creating write is followed (or preceded) by a SIGTERM.
SIGNALLED_AT_CREATION = (
    "import signal, sys\n"
    "import agentctl.coordinator.service as service, agentctl.coordinator.lineage as lineage\n"
    "after = sys.argv.pop(1) == 'after'\n"
    "def signalling(real):\n"
    "    def signalled(*args, **kwargs):\n"
    "        if not after:\n"
    "            signal.raise_signal(signal.SIGTERM)\n"
    "        real(*args, **kwargs)\n"
    "        signal.raise_signal(signal.SIGTERM)\n"
    "    return signalled\n"
    "service._record = signalling(service._record)\n"
    "import agentctl.coordinator.recovery as recovery\n"
    "lineage.record_fork = signalling(lineage.record_fork)\n"
    "recovery.create_derived_run = signalling(recovery.create_derived_run)\n"
    "import agentctl.entry as e; e.main()"
)


def signalled(
    when: str, args: list[str], ledger_target: LedgerTarget, tmp_path: Path
) -> subprocess.CompletedProcess[str]:
    """``agentctl ARGS`` through the stand-in, signalled ``when`` (before/after) it creates."""
    how = ledger_target.invocation(args, tmp_path)
    return subprocess.run(
        [sys.executable, "-c", SIGNALLED_AT_CREATION, when, *how.args],
        cwd=tmp_path,
        env=how.env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _error(proc: subprocess.CompletedProcess[str]) -> dict[str, object]:
    assert proc.returncode == 130, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    error: dict[str, object] = json.loads(proc.stderr.strip().splitlines()[-1])["error"]
    return error


def _named_and_left_running(cli: Cli, error: dict[str, object], runs: list[str]) -> None:
    listed = cli("runs", "list", "--db", "s/r.db", "--output", "json").data["runs"]
    created = [r for r in listed if r["runId"] not in runs]
    assert [r["state"] for r in created] == ["running"]  # created, never driven
    run_id = created[0]["runId"]
    assert error["runId"] == run_id and error["traceId"] is not None
    assert run_id in str(error["message"])
    assert cli("cancel", run_id, "--db", "s/r.db").rc == 0  # what the hint says ends it


def test_an_interrupt_right_after_the_run_is_created_names_it(
    cli: Cli, ledger_target: LedgerTarget, tmp_path: Path
) -> None:
    (tmp_path / "wf.yaml").write_text(WF, encoding="utf-8")
    args = ["--output", "json", "run", "wf.yaml", "--db", "s/r.db"]
    _named_and_left_running(cli, _error(signalled("after", args, ledger_target, tmp_path)), [])


def test_an_interrupt_right_after_a_fork_is_created_names_it(
    cli: Cli, ledger_target: LedgerTarget, tmp_path: Path
) -> None:
    (tmp_path / "wf.yaml").write_text(WF, encoding="utf-8")
    source = cli("run", "wf.yaml", "--db", "s/r.db", "--output", "json").data["runId"]
    args = ["fork", source, "--db", "s/r.db", "--output", "json"]
    error = _error(signalled("after", args, ledger_target, tmp_path))
    _named_and_left_running(cli, error, [source])


def test_an_interrupt_before_the_creating_write_names_no_run(
    cli: Cli, ledger_target: LedgerTarget, tmp_path: Path
) -> None:
    (tmp_path / "wf.yaml").write_text(WF, encoding="utf-8")
    args = ["--output", "json", "run", "wf.yaml", "--db", "s/r.db"]
    error = _error(signalled("before", args, ledger_target, tmp_path))
    assert error["runId"] is None and "interrupt" in str(error["message"])
    assert cli("runs", "list", "--db", "s/r.db", "--output", "json").data["runs"] == []


def test_an_interrupt_right_after_a_retry_or_repair_is_created_names_it(
    cli: Cli, ledger_target: LedgerTarget, tmp_path: Path
) -> None:
    (tmp_path / "wf.yaml").write_text(WF, encoding="utf-8")
    source = cli("run", "wf.yaml", "--db", "s/r.db", "--output", "json").data["runId"]
    runs = [source]
    for kind in ("retry", "repair"):
        args = [kind, "wf.yaml", source, "--from", "a", "--restart-successful"]
        error = _error(
            signalled(
                "after", [*args, "--db", "s/r.db", "--output", "json"], ledger_target, tmp_path
            )
        )
        _named_and_left_running(cli, error, runs)
        runs.append(str(error["runId"]))


def test_an_interrupt_right_after_a_compensation_run_is_created_names_it(
    cli: Cli, ledger_target: LedgerTarget, tmp_path: Path
) -> None:
    shutil.copy(EXAMPLES / "e7-compensation.yaml", tmp_path / "wf.yaml")  # fails after a write
    failed = cli("run", "wf.yaml", "--db", "s/r.db", "--output", "json")
    assert failed.rc == 4, failed.stdout
    source = failed.error["error"]["runId"]
    args = ["compensate", source, "--db", "s/r.db", "--output", "json"]
    _named_and_left_running(
        cli, _error(signalled("after", args, ledger_target, tmp_path)), [source]
    )
    assert (tmp_path / "out" / "r.txt").read_text(encoding="utf-8") == "made"  # nothing undone
