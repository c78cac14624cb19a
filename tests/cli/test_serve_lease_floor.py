"""``serve --lease-seconds`` has a floor the heartbeat can honour.

The heartbeat renews a lease every third of its length; a lease shorter than a second (0.001 s
was accepted) expired before its renewal committed, so a lone ``serve`` took its own run over,
fenced its own drive out and left the effect in flight uncertain. Such a lease is refused
before anything is claimed (exit 2, one line naming the flag and the minimum).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.queue_helpers import MARKER_WORKFLOW, ledger_query, markers
from tests.clibackend import LedgerTarget
from tests.conftest import Cli


@pytest.mark.parametrize("lease", ["0.001", "0.5", "0.999", "0"])
def test_serve_refuses_a_lease_shorter_than_its_heartbeat_can_keep(
    cli: Cli, ledger_target: LedgerTarget, tmp_path: Path, lease: str
) -> None:
    (tmp_path / "wf.yaml").write_text(MARKER_WORKFLOW, encoding="utf-8")
    (tmp_path / "markers").mkdir()
    queued = cli("--output", "json", "submit", "wf.yaml", "--db", "db.sqlite", "--input", "tag=n")
    assert queued.rc == 0, queued.stderr
    got = cli("serve", "--db", "db.sqlite", "--once", "--lease-seconds", lease)
    assert got.rc == 2, got.stderr
    assert got.stderr.count("\n") == 1 and "Traceback" not in got.stderr, got.stderr
    assert "--lease-seconds must be a number ≥ 1 " in got.stderr, got.stderr
    # Refused before the ledger is touched: the run is still queued, nothing ran.
    query = ledger_query(ledger_target, tmp_path / "db.sqlite")
    assert query("SELECT state, lease_token FROM runs", ()) == [("queued", 0)]
    assert not markers(tmp_path)


def test_serve_takes_a_lease_of_exactly_the_minimum(cli: Cli, tmp_path: Path) -> None:
    got = cli("--output", "json", "serve", "--db", "db.sqlite", "--once", "--lease-seconds", "1")
    assert got.rc == 0, got.stderr
    assert got.data["stoppedBy"] == "once"
