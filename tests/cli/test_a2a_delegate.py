"""``a2a.delegate`` against a real A2A 1.0 peer (a2a-sdk's server parts) on 127.0.0.1.

The peer is ``examples/peers/a2a_peer.py`` in a subprocess: each message starts a task that
works for a while and completes with "reviewed: <text>". It logs every message it received and
every HTTP request it served, so the tests can count what agentctl really sent.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.a2a_peer_process import Peer, running_peer
from tests.conftest import Cli, agentctl_argv, cli_env

WORKFLOW = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: { name: a2a-test }
spec:
  policy:
    approval: never
    networkAllowlist: [ALLOWED]
    network: { allowPrivate: true, allowedPorts: [PORT] }
  a2aPeers:
    reviewer:
      cardUrl: http://127.0.0.1:PORT/.well-known/agent-card.json
      maxPolls: 1000
      pollIntervalMs: 50
  actions:
    review: { kind: a2a.delegate }
  tasks:
    - id: ask
      uses: action:review
      with: { peer: reviewer, messageId: msg-1, message: check the release notes }
  outputs:
    review: "${{ tasks.ask.output.text }}"
"""


def _workflow(peer: Peer, tmp_path: Path, allowed: str = "127.0.0.1") -> Path:
    text = WORKFLOW.replace("PORT", str(peer.port)).replace("ALLOWED", allowed)
    path = tmp_path / "wf.yaml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def quick_peer(tmp_path: Path) -> Iterator[Peer]:
    with running_peer(tmp_path, delay=0.2) as peer:
        yield peer


@pytest.fixture
def slow_peer(tmp_path: Path) -> Iterator[Peer]:
    """Its tasks keep working until the test lets them finish."""
    with running_peer(tmp_path, delay=0.0, hold=True) as peer:
        yield peer


def _db(tmp_path: Path) -> str:
    return str(tmp_path / "state" / "runtime.db")


def test_delegation_completes_and_replay_calls_nothing(
    cli: Cli, tmp_path: Path, quick_peer: Peer
) -> None:
    wf, db = _workflow(quick_peer, tmp_path), _db(tmp_path)
    done = cli("--output", "json", "run", str(wf), "--db", db)
    assert done.rc == 0, done.stderr
    assert done.data["output"] == {"review": "reviewed: check the release notes"}
    assert quick_peer.lines(quick_peer.received) == [{"messageId": "msg-1"}]
    run_id = done.data["runId"]

    seen = cli("--output", "json", "inspect", run_id, "--db", db).data
    (effect,) = seen["effects"]
    assert effect["operation"] == "a2a.delegate" and effect["status"] == "succeeded"
    assert effect["remoteTaskId"] == effect["result"]["taskId"]
    assert effect["effectClass"] == "remote_agent"

    served = len(quick_peer.lines(quick_peer.requests))
    replayed = cli("--output", "json", "replay", run_id, "--db", db)
    assert replayed.rc == 0, replayed.stderr
    assert replayed.data["output"] == {"review": "reviewed: check the release notes"}
    assert len(quick_peer.lines(quick_peer.requests)) == served  # not one request more


def test_host_outside_allowlist_is_refused_before_any_state(
    cli: Cli, tmp_path: Path, quick_peer: Peer
) -> None:
    wf, db = _workflow(quick_peer, tmp_path, allowed="peer.example.com"), _db(tmp_path)
    done = cli("--output", "json", "run", str(wf), "--db", db)
    assert done.rc == 3, done.stderr  # the egress pre-flight: no run, not even a database
    assert "A2A peer reviewer" in done.error["error"]["message"]
    assert "networkAllowlist" in done.error["error"]["message"]
    assert not (tmp_path / "state").exists()
    assert quick_peer.lines(quick_peer.requests) == []  # not even the Agent Card


def test_a_delegation_failed_before_its_message_cannot_be_continued(
    cli: Cli, tmp_path: Path, quick_peer: Peer
) -> None:
    # The card offers no interface for this protocol version: the message is never sent.
    wf, db = _workflow(quick_peer, tmp_path), _db(tmp_path)
    text = wf.read_text(encoding="utf-8").replace("maxPolls: 1000", 'protocolVersion: "0.9"')
    wf.write_text(text, encoding="utf-8")
    done = cli("--output", "json", "run", str(wf), "--db", db)
    assert done.rc == 4, done.stderr
    assert quick_peer.lines(quick_peer.received) == []  # the card was read, no message sent
    (effect,) = cli(
        "--output", "json", "effects", "list", done.error["error"]["runId"], "--db", db
    ).data["effects"]
    assert effect["status"] == "failed"  # refused before sending: certain, nothing happened
    assert "remoteTaskId" not in effect
    again = cli("--output", "json", "effects", "continue-remote", effect["effectId"], "--db", db)
    assert again.rc == 4 and "unresolved" in again.error["error"]["message"]


def _killed_mid_task(
    cli: Cli, tmp_path: Path, peer: Peer, sig: signal.Signals = signal.SIGKILL
) -> tuple[str, dict[str, str]]:
    """Start a run, signal its coordinator once the remote task id is durable; returns the
    run id and the effect as ``inspect`` shows it then."""
    wf, db = _workflow(peer, tmp_path), _db(tmp_path)
    argv = agentctl_argv("--output", "json", "run", str(wf), "--db", db)
    proc = subprocess.Popen(
        argv, cwd=tmp_path, env=cli_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        effect = _wait_for_handle(cli, db)
    finally:
        os.kill(proc.pid, sig)
        proc.wait()
    run_id = effect["runId"]
    return run_id, effect


def _wait_for_handle(cli: Cli, db: str) -> dict[str, str]:
    for _ in range(2000):  # a bound on the wait, not a timing assertion
        runs = cli("--output", "json", "runs", "list", "--db", db)
        if runs.rc == 0 and runs.data["runs"]:
            run_id = runs.data["runs"][0]["runId"]
            effects = cli("--output", "json", "inspect", run_id, "--db", db).data["effects"]
            if effects and "remoteTaskId" in effects[0]:
                assert effects[0]["status"] == "started"
                return dict(effects[0])
        time.sleep(0.02)
    raise AssertionError("the remote task id never became durable")


def test_resume_after_coordinator_kill_observes_the_same_task(
    cli: Cli, tmp_path: Path, slow_peer: Peer
) -> None:
    run_id, effect = _killed_mid_task(cli, tmp_path, slow_peer)
    db = _db(tmp_path)
    slow_peer.let_tasks_finish()  # the task was still working when the coordinator died
    done = cli("--output", "json", "resume", run_id, "--db", db)
    assert done.rc == 0, done.stderr
    assert done.data["output"] == {"review": "reviewed: check the release notes"}
    assert slow_peer.lines(slow_peer.received) == [{"messageId": "msg-1"}]  # sent once
    (after,) = cli("--output", "json", "inspect", run_id, "--db", db).data["effects"]
    assert after["effectId"] == effect["effectId"] and after["status"] == "succeeded"
    assert after["result"]["taskId"] == effect["remoteTaskId"]


def test_continue_remote_records_the_observed_result(
    cli: Cli, tmp_path: Path, slow_peer: Peer
) -> None:
    run_id, effect = _killed_mid_task(cli, tmp_path, slow_peer)
    db = _db(tmp_path)
    slow_peer.let_tasks_finish()
    cont = cli(
        "--output",
        "json",
        "effects",
        "continue-remote",
        effect["effectId"],
        "--db",
        db,
        "--actor",
        "ops",
        "--reason",
        "observe the persisted A2A task",
    )
    assert cont.rc == 0, cont.stderr
    rec = cont.data
    assert (rec["status"], rec["actor"]) == ("applied", "ops")
    assert rec["evidence"]["remoteTaskId"] == effect["remoteTaskId"]
    assert rec["result"]["text"] == "reviewed: check the release notes"
    assert slow_peer.lines(slow_peer.received) == [{"messageId": "msg-1"}]

    done = cli("--output", "json", "resume", run_id, "--db", db)
    assert done.rc == 0, done.stderr
    assert done.data["output"] == {"review": "reviewed: check the release notes"}
    assert slow_peer.lines(slow_peer.received) == [{"messageId": "msg-1"}]
    again = cli("--output", "json", "effects", "continue-remote", effect["effectId"], "--db", db)
    assert again.rc == 4 and "already reconciled" in again.error["error"]["message"]


def test_a_cancelled_delegation_is_settled_by_continue_remote(
    cli: Cli, tmp_path: Path, slow_peer: Peer
) -> None:
    run_id, effect = _killed_mid_task(cli, tmp_path, slow_peer, signal.SIGTERM)
    db = _db(tmp_path)
    (cancelled,) = cli("--output", "json", "effects", "list", run_id, "--db", db).data["effects"]
    assert cancelled["status"] == "uncertain"  # cancelled mid-poll: the outcome is unknown
    assert cancelled["remoteTaskId"] == effect["remoteTaskId"]  # ... but the task is known
    slow_peer.let_tasks_finish()
    cont = cli("--output", "json", "effects", "continue-remote", effect["effectId"], "--db", db)
    assert cont.rc == 0, cont.stderr
    assert cont.data["status"] == "applied"
    assert cont.data["result"]["taskId"] == effect["remoteTaskId"]
    assert slow_peer.lines(slow_peer.received) == [{"messageId": "msg-1"}]
