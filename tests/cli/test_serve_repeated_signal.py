"""A ``serve`` signalled again while it stops, black-box.

An impatient operator presses Ctrl-C twice, a supervisor sends SIGTERM and the shell's job
control a SIGINT, ``kill`` is typed twice: the first SIGINT/SIGTERM stops the ``serve``
(no more claims, each drive hands its run back), and one landing while it stops changes
nothing — as in a ``run``, whose later signals are taken and dropped while it stops. The
hand-back still completes (the run ``running``, its lease released, the cut effect
``uncertain``, its task parked ``waiting_for_effect``) and the process exits 0 with its
``ServeReport`` (docs/scale-out.md "Stopping a serve"), instead of dying mid-hand-back with
exit 130 and leaving the effect ``started`` under a lease that only expiry frees.
"""

from __future__ import annotations

import signal
from pathlib import Path

from tests.cli.queue_helpers import MARKER_WORKFLOW, ledger_query, markers, serve_report, wait_for
from tests.clibackend import LedgerTarget
from tests.conftest import Cli, StartCli

DB = ("--db", "db.sqlite")
SERVE = ("--output", "json", "serve", *DB, "--lease-seconds", "2", "--poll-seconds", "0.2")


def test_a_signal_sent_again_while_serve_stops_does_not_cut_the_hand_back(
    cli: Cli, start_cli: StartCli, ledger_target: LedgerTarget, tmp_path: Path
) -> None:
    query = ledger_query(ledger_target, tmp_path / "db.sqlite")
    (tmp_path / "wf.yaml").write_text(MARKER_WORKFLOW, encoding="utf-8")
    (tmp_path / "markers").mkdir()
    (tmp_path / "markers" / "g.hold").touch()  # task a's effect waits while this exists
    run_id = cli("--output", "json", "submit", "wf.yaml", *DB, "--input", "tag=g").data["runId"]
    serving = start_cli(*SERVE)
    wait_for(
        lambda: query("SELECT status FROM effects WHERE task_id = 'a'", ()) == [("started",)],
        what="task a's effect to start",
    )
    # All three are pending before the serve has handed anything back.
    for signum in (signal.SIGTERM, signal.SIGTERM, signal.SIGINT):
        serving.send_signal(signum)
    report = serve_report(serving)
    (tmp_path / "markers" / "g.hold").unlink()
    # Pending together, the kernel delivers the lower-numbered SIGINT first.
    assert report["stoppedBy"] in {"SIGTERM", "SIGINT"}
    assert [(r["runId"], r["state"]) for r in report["runs"]] == [(run_id, "released")]
    assert query("SELECT state, owner_pid FROM runs", ()) == [("running", None)]
    assert query("SELECT status FROM effects", ()) == [("uncertain",)]
    tasks = query("SELECT task_id, state FROM task_states ORDER BY task_id", ())
    assert tasks == [("a", "waiting_for_effect"), ("b", "pending"), ("c", "pending")]
    assert markers(tmp_path) == {}  # the held effect was cut before it wrote its line
