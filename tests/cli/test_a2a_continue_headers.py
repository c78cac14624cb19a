"""``effects continue-remote`` of a delegation to a peer that takes header secrets.

The effect's recorded input keeps each header as its source and SHA-256; the request built
again from the run's plan holds references until they are resolved. Observing the remote task
must work for such a peer (the header authenticates the polls), and the check that the plan
still builds the recorded request must refuse, sending nothing, when the header now resolves
to another value than the message was sent with.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.a2a_peer_process import Peer, running_peer
from tests.conftest import Cli, StartCli

TOKEN = "Bearer peer-s3cret-7781"

WORKFLOW = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: { name: a2a-headers }
spec:
  policy:
    approval: never
    networkAllowlist: [127.0.0.1]
    network: { allowPrivate: true, allowedPorts: [PORT] }
    environmentAllowlist: [PEER_TOKEN]
  a2aPeers:
    reviewer:
      cardUrl: http://127.0.0.1:PORT/.well-known/agent-card.json
      headers: { Authorization: { env: PEER_TOKEN } }
      pollIntervalMs: 50
      maxPolls: 1000
  actions:
    review: { kind: a2a.delegate }
  tasks:
    - id: ask
      uses: action:review
      with: { peer: reviewer, messageId: msg-1, message: check the release notes }
"""


@pytest.fixture
def held_peer(tmp_path: Path) -> Iterator[Peer]:
    """Its tasks keep working until the test lets them finish."""
    with running_peer(tmp_path, delay=0.0, hold=True) as peer:
        yield peer


def _stopped_mid_task(
    cli: Cli, start_cli: StartCli, tmp_path: Path, peer: Peer
) -> tuple[str, dict[str, Any]]:
    """A run stopped by SIGTERM once its remote task id is durable: cancelled, its delegation
    uncertain with a handle. Returns the database and the effect."""
    wf, db = tmp_path / "wf.yaml", str(tmp_path / "state" / "runtime.db")
    wf.write_text(WORKFLOW.replace("PORT", str(peer.port)), encoding="utf-8")
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    proc = start_cli(
        "--output", "json", "run", str(wf), "--db", db, env={"PEER_TOKEN": TOKEN}, **quiet
    )
    try:
        _wait_for_handle(cli, db)
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait()
    assert proc.returncode == 130
    run_id = cli("--output", "json", "runs", "list", "--db", db).data["runs"][0]["runId"]
    (effect,) = cli("--output", "json", "effects", "list", run_id, "--db", db).data["effects"]
    assert effect["status"] == "uncertain" and effect["remoteTaskId"]
    return db, effect


def _wait_for_handle(cli: Cli, db: str) -> None:
    for _ in range(2000):  # a bound on the wait, not a timing assertion
        runs = cli("--output", "json", "runs", "list", "--db", db)
        if runs.rc == 0 and runs.data["runs"]:
            run_id = runs.data["runs"][0]["runId"]
            effects = cli("--output", "json", "inspect", run_id, "--db", db).data["effects"]
            if effects and "remoteTaskId" in effects[0]:
                return
        time.sleep(0.02)
    raise AssertionError("the remote task id never became durable")


def test_continue_remote_observes_a_peer_that_takes_a_header_secret(
    cli: Cli, start_cli: StartCli, tmp_path: Path, held_peer: Peer
) -> None:
    db, effect = _stopped_mid_task(cli, start_cli, tmp_path, held_peer)
    held_peer.let_tasks_finish()
    args = ("--output", "json", "effects", "continue-remote", effect["effectId"], "--db", db)
    cont = cli(*args, env={"PEER_TOKEN": TOKEN})
    assert cont.rc == 0, cont.stderr
    assert cont.data["status"] == "applied"
    assert cont.data["result"]["text"] == "reviewed: check the release notes"
    assert held_peer.lines(held_peer.received) == [{"messageId": "msg-1"}]  # sent once
    assert TOKEN not in cont.stdout + cont.stderr
    seen = cli("--output", "json", "inspect", effect["runId"], "--db", db)
    assert TOKEN not in seen.stdout and "peer-s3cret" not in seen.stdout
    for stored in tmp_path.rglob("runtime.db*"):
        if stored.is_file():
            assert b"peer-s3cret" not in stored.read_bytes()


def test_continue_remote_refuses_a_header_that_now_resolves_to_another_value(
    cli: Cli, start_cli: StartCli, tmp_path: Path, held_peer: Peer
) -> None:
    db, effect = _stopped_mid_task(cli, start_cli, tmp_path, held_peer)
    held_peer.let_tasks_finish()
    requests = len(held_peer.lines(held_peer.requests))
    args = ("--output", "json", "effects", "continue-remote", effect["effectId"], "--db", db)
    other = cli(*args, env={"PEER_TOKEN": "Bearer another-value"})
    assert other.rc == 4, other.stderr
    error = other.error["error"]
    assert "header secret now resolves to another value" in error["message"], error
    assert error["runId"] == effect["runId"]
    assert "another-value" not in other.stdout + other.stderr
    assert len(held_peer.lines(held_peer.requests)) == requests  # nothing was observed
    listed = cli("--output", "json", "effects", "list", effect["runId"], "--db", db)
    assert listed.data["reconciliations"] == []
