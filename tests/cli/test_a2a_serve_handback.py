"""A ``serve`` stopped by SIGTERM while an A2A delegation polls its remote task, black-box.

The peer (a2a-sdk's server parts, ``examples/peers/a2a_peer.py``) accepted the message and
its task id is durable (a remote handle): the stop is no failure of the remote work, so the
hand-back leaves the delegation ``started`` with its handle and its task ``running`` — as a
crash would — and the next ``serve`` that claims the run observes the same remote task
(``GetTask`` only) and completes the run, with no operator reconciliation. The peer receives
the message once (docs/protocols.md "Crashes, resume and `effects continue-remote`",
docs/scale-out.md "Stopping a serve").
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.a2a_peer_process import Peer, running_peer
from tests.cli.queue_helpers import serve_report, wait_for
from tests.cli.test_a2a_delegate import WORKFLOW
from tests.conftest import Cli, StartCli

LEASE = ("--lease-seconds", "2", "--poll-seconds", "0.2")


@pytest.fixture
def slow_peer(tmp_path: Path) -> Iterator[Peer]:
    """Its tasks keep working until the test lets them finish."""
    with running_peer(tmp_path, delay=0.0, hold=True) as peer:
        yield peer


def _effects(cli: Cli, run_id: str, db: str) -> list[dict[str, Any]]:
    listed = cli("--output", "json", "effects", "list", run_id, "--db", db)
    assert listed.rc == 0, listed.stderr
    found: list[dict[str, Any]] = listed.data["effects"]
    return found


def _has_handle(cli: Cli, run_id: str, db: str) -> bool:
    found = _effects(cli, run_id, db)
    return bool(found) and "remoteTaskId" in found[0]


def test_a_stopped_serve_leaves_a_delegation_with_its_handle_for_the_next_serve(
    cli: Cli, start_cli: StartCli, tmp_path: Path, slow_peer: Peer
) -> None:
    text = WORKFLOW.replace("PORT", str(slow_peer.port)).replace("ALLOWED", "127.0.0.1")
    (tmp_path / "wf.yaml").write_text(text.replace("MAXPOLLS", "1000"), encoding="utf-8")
    db = str(tmp_path / "db.sqlite")
    submitted = cli("--output", "json", "submit", "wf.yaml", "--db", db)
    assert submitted.rc == 0, submitted.stderr
    run_id = submitted.data["runId"]
    serving = start_cli("--output", "json", "serve", "--db", db, "--exit-when-idle", *LEASE)
    wait_for(lambda: _has_handle(cli, run_id, db), what="the remote task id to be durable")
    serving.send_signal(signal.SIGTERM)
    assert serve_report(serving)  # exit 0: the run handed back

    # Handed back as a crash leaves it: the delegation started, with its handle; the task
    # running; the run running and unowned; nothing for an operator to reconcile.
    (effect,) = _effects(cli, run_id, db)
    assert effect["status"] == "started", effect
    seen = cli("--output", "json", "inspect", run_id, "--db", db).data
    assert seen["run"]["state"] == "running"
    assert {t["taskId"]: t["state"] for t in seen["tasks"]} == {"ask": "running"}
    assert slow_peer.lines(slow_peer.received) == [{"messageId": "msg-1"}]

    # The next serve claims it, observes the same remote task and completes the run.
    slow_peer.let_tasks_finish()
    serve_report(start_cli("--output", "json", "serve", "--db", db, "--exit-when-idle", *LEASE))
    done = cli("--output", "json", "inspect", run_id, "--db", db).data
    assert done["run"]["state"] == "succeeded", done["run"]
    assert done["run"]["output"] == {"review": "reviewed: check the release notes"}
    (after,) = done["effects"]
    assert (after["effectId"], after["status"]) == (effect["effectId"], "succeeded")
    assert after["result"]["taskId"] == effect["remoteTaskId"]
    assert done["effectReconciliations"] == []  # no operator step was needed
    assert slow_peer.lines(slow_peer.received) == [{"messageId": "msg-1"}]  # sent once
    sent = [c for c in done["protocolCalls"] if c["method"] == "SendMessage"]
    assert len(sent) == 1
    assert any("/observe-" in s["sessionId"] for s in done["protocolSessions"])
