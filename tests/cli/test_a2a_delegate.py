"""``a2a.delegate`` against a real A2A 1.0 peer (a2a-sdk's server parts) on 127.0.0.1.

The peer is ``examples/peers/a2a_peer.py`` in a subprocess: each message starts a task that
works for a while and completes with "reviewed: <text>". It logs every message it received and
every HTTP request it served, so the tests can count what agentctl really sent.
"""

from __future__ import annotations

import itertools
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.a2a_peer_process import Peer, running_peer
from tests.cli.checkedits import assert_check_edit
from tests.conftest import Cli, StartCli

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
      maxPolls: MAXPOLLS
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


def _workflow(
    peer: Peer, tmp_path: Path, allowed: str = "127.0.0.1", max_polls: int = 1000
) -> Path:
    text = WORKFLOW.replace("PORT", str(peer.port)).replace("ALLOWED", allowed)
    text = text.replace("MAXPOLLS", str(max_polls))
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


def _wire(cli: Cli, run_id: str, db: str) -> dict[str, list[dict[str, Any]]]:
    """The run's recorded A2A calls, grouped by session key (``delegate``, ``observe-…``)."""
    seen = cli("--output", "json", "inspect", run_id, "--db", db).data
    by_session: dict[str, list[dict[str, Any]]] = {}
    for session in seen["protocolSessions"]:
        by_session[session["sessionId"].rsplit("/", 1)[1]] = []
    for call in seen["protocolCalls"]:
        by_session[call["sessionId"].rsplit("/", 1)[1]].append(call)
    return by_session


def _polls(calls: list[dict[str, Any]], task_id: str) -> list[str]:
    """The task states the GetTask rows report, checking the rows cover polls 1..N in order
    and that consecutive polls with one outcome share a row (rows stay few)."""
    rows = [c for c in calls if c["method"] == "GetTask"]
    covered, states = 0, []
    for row in rows:
        assert (row["target"], row["remoteId"], row["status"]) == (task_id, task_id, "succeeded")
        found = re.fullmatch(r"polls? (\d+)(?:-(\d+))?: (\w+)", row["detail"])
        assert found is not None, row["detail"]
        first, last = int(found[1]), int(found[2] or found[1])
        assert first == covered + 1 and last >= first
        covered = last
        states.append(found[3])
    assert all(a != b for a, b in itertools.pairwise(states))
    return states


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
    _assert_delegation_recorded(seen, quick_peer, effect)

    served = len(quick_peer.lines(quick_peer.requests))
    replayed = cli("--output", "json", "replay", run_id, "--db", db)
    assert replayed.rc == 0, replayed.stderr
    assert replayed.data["output"] == {"review": "reviewed: check the release notes"}
    assert len(quick_peer.lines(quick_peer.requests)) == served  # not one request more
    # Like MCP: a replay copies outputs, calls nothing, so it records no protocol evidence.
    copy = cli("--output", "json", "inspect", replayed.data["runId"], "--db", db).data
    assert (copy["protocolSessions"], copy["protocolCalls"]) == ([], [])


def test_a_patch_of_the_spoken_protocol_version_delegates_as_the_default_does(
    cli: Cli, tmp_path: Path, quick_peer: Peer
) -> None:
    wf = _workflow(quick_peer, tmp_path)
    text = wf.read_text().replace(
        "pollIntervalMs: 50", 'pollIntervalMs: 50\n      protocolVersion: "1.0.0"'
    )
    assert 'protocolVersion: "1.0.0"' in text
    wf.write_text(text)
    done = cli("--output", "json", "run", str(wf), "--db", _db(tmp_path))
    assert done.rc == 0, done.stderr
    assert done.data["output"] == {"review": "reviewed: check the release notes"}
    # The A2A-Version header is the protocol's Major.Minor, whatever patch the workflow wrote.
    sent = {line["version"] for line in quick_peer.lines(quick_peer.requests)}
    assert sent == {"1.0"}


def _assert_delegation_recorded(seen: Any, peer: Peer, effect: dict[str, Any]) -> None:
    """One session for the effect, bound to the card's JSON-RPC URL, and its calls in order."""
    (session,) = seen["protocolSessions"]
    card_url = f"http://127.0.0.1:{peer.port}/.well-known/agent-card.json"
    assert (session["protocol"], session["peer"], session["effectId"]) == (
        "a2a",
        "reviewer",
        effect["effectId"],
    )
    assert session["endpoint"].startswith(f"http://127.0.0.1:{peer.port}/")
    assert session["endpoint"] != card_url  # the interface the card named, not the card
    assert session["protocolVersion"] == "1.0"
    assert session["peerInfo"] == {"name": "reviewer", "version": "1.0.0"}
    assert session["remoteSessionId"] == effect["result"]["contextId"]
    calls = seen["protocolCalls"]
    assert [(c["method"], c["target"], c["status"]) for c in calls[:2]] == [
        ("GetAgentCard", card_url, "succeeded"),
        ("SendMessage", "msg-1", "succeeded"),
    ]
    assert calls[1]["remoteId"] == effect["remoteTaskId"]
    assert all(c["sessionId"] == session["sessionId"] for c in calls)
    assert _polls(calls[2:], effect["remoteTaskId"])[-1] == "completed"
    assert len(calls) == 2 + len(_polls(calls[2:], effect["remoteTaskId"]))


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
    # No card where the workflow says (HTTP 404): the message is never sent. (A protocol
    # version no card could offer is refused earlier, by `check`.)
    wf, db = _workflow(quick_peer, tmp_path), _db(tmp_path)
    text = wf.read_text(encoding="utf-8").replace("agent-card.json", "no-card.json")
    wf.write_text(text, encoding="utf-8")
    done = cli("--output", "json", "run", str(wf), "--db", db)
    assert done.rc == 4, done.stderr
    assert quick_peer.lines(quick_peer.received) == []  # no message sent
    (effect,) = cli(
        "--output", "json", "effects", "list", done.error["error"]["runId"], "--db", db
    ).data["effects"]
    assert effect["status"] == "failed"  # refused before sending: certain, nothing happened
    assert "remoteTaskId" not in effect
    again = cli("--output", "json", "effects", "continue-remote", effect["effectId"], "--db", db)
    assert again.rc == 4 and "unresolved" in again.error["error"]["message"]


def _killed_mid_task(
    cli: Cli,
    start_cli: StartCli,
    tmp_path: Path,
    peer: Peer,
    sig: signal.Signals = signal.SIGKILL,
    max_polls: int = 1000,
) -> tuple[str, dict[str, str]]:
    """Start a run, signal its coordinator once the remote task id is durable; returns the
    run id and the effect as ``inspect`` shows it then."""
    wf, db = _workflow(peer, tmp_path, max_polls=max_polls), _db(tmp_path)
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    proc = start_cli("--output", "json", "run", str(wf), "--db", db, **quiet)
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
    cli: Cli, start_cli: StartCli, tmp_path: Path, slow_peer: Peer
) -> None:
    run_id, effect = _killed_mid_task(cli, start_cli, tmp_path, slow_peer)
    db = _db(tmp_path)
    slow_peer.let_tasks_finish()  # the task was still working when the coordinator died
    done = cli("--output", "json", "resume", run_id, "--db", db)
    assert done.rc == 0, done.stderr
    assert done.data["output"] == {"review": "reviewed: check the release notes"}
    assert slow_peer.lines(slow_peer.received) == [{"messageId": "msg-1"}]  # sent once
    (after,) = cli("--output", "json", "inspect", run_id, "--db", db).data["effects"]
    assert after["effectId"] == effect["effectId"] and after["status"] == "succeeded"
    assert after["result"]["taskId"] == effect["remoteTaskId"]
    _assert_observed_apart(_wire(cli, run_id, db), effect["remoteTaskId"])


def _assert_observed_apart(wire: dict[str, list[dict[str, Any]]], task_id: str) -> None:
    """The first execution's card fetch and message — committed with the task id, before the
    kill — and the later observation's own session, which polled the task to completion."""
    first = wire.pop("delegate")
    assert [(c["method"], c["status"]) for c in first[:2]] == [
        ("GetAgentCard", "succeeded"),
        ("SendMessage", "succeeded"),
    ]
    assert first[1]["remoteId"] == task_id
    (observation,) = wire.values()  # one more session, keyed observe-…
    assert [c["method"] for c in observation[:1]] == ["GetAgentCard"]
    assert _polls(observation[1:], task_id)[-1] == "completed"
    sent = [c for c in first + observation if c["method"] == "SendMessage"]
    assert len(sent) == 1  # the observation never sent the message again


def test_continue_remote_of_a_task_still_working_names_the_run_and_keeps_its_calls(
    cli: Cli, start_cli: StartCli, tmp_path: Path, slow_peer: Peer
) -> None:
    """The peer's task is still working when the observation's polls run out: exit 6 naming
    the run, no reconciliation recorded — but the observation's own calls are (docs)."""
    run_id, effect = _killed_mid_task(cli, start_cli, tmp_path, slow_peer, max_polls=100)
    db = _db(tmp_path)
    why = ("--actor", "ops", "--reason", "look again")
    cont = cli(
        "--output", "json", "effects", "continue-remote", effect["effectId"], "--db", db, *why
    )
    assert cont.rc == 6, cont.stderr
    error = cont.error["error"]
    assert error["runId"] == run_id and "no reconciliation was recorded" in error["message"]
    seen = cli("--output", "json", "effects", "inspect", effect["effectId"], "--db", db).data
    assert seen["reconciliations"] == []
    sessions = cli("--output", "json", "inspect", run_id, "--db", db).data["protocolSessions"]
    assert any("/observe-" in str(s.get("sessionId")) for s in sessions), sessions


def test_continue_remote_records_the_observed_result(
    cli: Cli, start_cli: StartCli, tmp_path: Path, slow_peer: Peer
) -> None:
    run_id, effect = _killed_mid_task(cli, start_cli, tmp_path, slow_peer)
    db = _db(tmp_path)
    slow_peer.let_tasks_finish()
    # Recorded words, as `effects reconcile` takes them: blank is exit 2 and records nothing.
    cont_args = ("--output", "json", "effects", "continue-remote", effect["effectId"], "--db", db)
    for flag in ("--actor", "--reason"):
        blank = cli(*cont_args, flag, " ")
        assert blank.rc == 2 and f"{flag} must not be empty" in blank.error["error"]["message"]
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
    assert rec["resultSchema"] is None  # the EffectReconciliation shape `reconcile` prints
    assert slow_peer.lines(slow_peer.received) == [{"messageId": "msg-1"}]
    _assert_observed_apart(_wire(cli, run_id, db), effect["remoteTaskId"])

    done = cli("--output", "json", "resume", run_id, "--db", db)
    assert done.rc == 0, done.stderr
    assert done.data["output"] == {"review": "reviewed: check the release notes"}
    assert slow_peer.lines(slow_peer.received) == [{"messageId": "msg-1"}]
    again = cli("--output", "json", "effects", "continue-remote", effect["effectId"], "--db", db)
    assert again.rc == 4 and "already reconciled" in again.error["error"]["message"]


def test_continue_remote_needs_approved_where_the_policy_requires_approval(
    cli: Cli, start_cli: StartCli, tmp_path: Path, slow_peer: Peer
) -> None:
    # Under approval: mutations the delegation (remote_agent) waited for its approval, and
    # recording its observed result as applied is a reconciliation the policy judges alike.
    wf, db = _workflow(slow_peer, tmp_path), _db(tmp_path)
    wf.write_text(wf.read_text().replace("approval: never", "approval: mutations"))
    paused = cli("--output", "json", "run", str(wf), "--db", db)
    assert paused.rc == 3, paused.stderr
    run_id = paused.data["runId"]
    [pending] = cli("--output", "json", "approvals", "list", run_id, "--db", db).data["approvals"]
    assert cli("approvals", "approve", pending["approvalId"], "--reason", "go", "--db", db).rc == 0
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    proc = start_cli("--output", "json", "resume", run_id, "--db", db, **quiet)
    try:
        effect = _wait_for_handle(cli, db)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    slow_peer.let_tasks_finish()
    args = ("--output", "json", "effects", "continue-remote", effect["effectId"], "--db", db)
    refused = cli(*args)
    assert refused.rc == 4 and "add --approved" in refused.error["error"]["message"]
    assert list(_wire(cli, run_id, db)) == ["delegate"]  # refused before observing anything
    listed = cli("--output", "json", "effects", "list", run_id, "--db", db)
    assert listed.data["reconciliations"] == []
    done = cli(*args, "--approved")
    assert done.rc == 0, done.stderr
    assert done.data["status"] == "applied"
    assert done.data["authorization"]["kind"] == "explicit_operator_approval"
    assert slow_peer.lines(slow_peer.received) == [{"messageId": "msg-1"}]  # sent once


def test_a_cancelled_delegation_is_settled_by_continue_remote(
    cli: Cli, start_cli: StartCli, tmp_path: Path, slow_peer: Peer
) -> None:
    run_id, effect = _killed_mid_task(cli, start_cli, tmp_path, slow_peer, signal.SIGTERM)
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


def test_a_task_the_peer_forgot_is_uncertain_and_never_sent_again(
    cli: Cli, start_cli: StartCli, tmp_path: Path
) -> None:
    # The peer accepted the message (its task id is durable), then restarted with an empty
    # in-memory store: "Task not found" says nothing about whether the task ran, so the effect
    # is uncertain — `failed` would let `retry --failed` send the message a second time.
    (tmp_path / "first").mkdir()
    with running_peer(tmp_path / "first", delay=0.0, hold=True) as first:
        run_id, effect = _killed_mid_task(cli, start_cli, tmp_path, first)
    (tmp_path / "again").mkdir()
    with running_peer(tmp_path / "again", delay=0.0, port=first.port) as again:
        db, wf = _db(tmp_path), str(tmp_path / "wf.yaml")
        done = cli("--output", "json", "resume", run_id, "--db", db)
        assert done.rc == 4 and "uncertain" in done.error["error"]["message"]
        (after,) = cli("--output", "json", "effects", "list", run_id, "--db", db).data["effects"]
        assert after["status"] == "uncertain", after["error"]
        assert effect["remoteTaskId"] in after["error"] and "Task not found" in after["error"]
        retried = cli("--output", "json", "retry", wf, run_id, "--failed", "--db", db)
        assert retried.rc != 0  # blocked until reconciled
        assert again.lines(again.received) == []  # never sent again
        reconciled = cli(
            "effects", "reconcile", effect["effectId"], "--status", "not-applied",
            "--reason", "the peer lost it", "--db", db,
        )  # fmt: skip
        assert reconciled.rc == 0, reconciled.stderr
    assert first.lines(first.received) == [{"messageId": "msg-1"}]


def test_polling_that_gives_up_records_its_polls_as_evidence(
    cli: Cli, tmp_path: Path, slow_peer: Peer
) -> None:
    wf, db = _workflow(slow_peer, tmp_path, max_polls=3), _db(tmp_path)
    done = cli("--output", "json", "run", str(wf), "--db", db)
    assert done.rc != 0
    run_id = done.error["error"]["runId"]
    (effect,) = cli("--output", "json", "effects", "list", run_id, "--db", db).data["effects"]
    assert effect["status"] == "uncertain"  # the task still works remotely
    wire = _wire(cli, run_id, db)
    calls = wire["delegate"]  # reported with the uncertain outcome, polls included
    assert [c["method"] for c in calls[:2]] == ["GetAgentCard", "SendMessage"]
    task_id = effect["remoteTaskId"]
    states = _polls(calls[2:], task_id)
    assert "completed" not in states
    assert calls[-1]["detail"].split(":")[0].endswith("3")  # the rows end at poll 3, maxPolls

    slow_peer.let_tasks_finish()
    cont = cli("--output", "json", "effects", "continue-remote", effect["effectId"], "--db", db)
    assert cont.rc == 0, cont.stderr
    _assert_observed_apart(_wire(cli, run_id, db), task_id)
    # The run was left resumable (blocked on the effect): it resumes with the observed result,
    # and the peer still received the message once (docs/protocols.md).
    done = cli("--output", "json", "resume", run_id, "--db", db)
    assert done.rc == 0 and done.data["state"] == "succeeded", done.stderr
    assert done.data["output"] == {"review": "reviewed: check the release notes"}
    assert slow_peer.lines(slow_peer.received) == [{"messageId": "msg-1"}]


@pytest.mark.parametrize(
    ("edit", "code", "needle"),
    [
        (("", ""), None, ""),
        (("peer: reviewer,", "peer: nowhere,"), "missing_reference", "unknown A2A peer `nowhere`"),
        ((", message: check the release notes", ""), "schema_violation", "needs `with.message`"),
        (
            ("messageId: msg-1", "messageId: 5"),
            "schema_violation",
            "`with.messageId` must be a non-empty string, got 5",
        ),
        (
            ("pollIntervalMs: 50", 'pollIntervalMs: 50\n      protocolVersion: "0.3"'),
            "unsupported_capability",
            "A2A protocol '0.3'",
        ),
        (
            ("pollIntervalMs: 50", 'pollIntervalMs: 50\n      protocolVersion: "1.1"'),
            "unsupported_capability",
            "A2A protocol '1.1'",
        ),
        (
            ("pollIntervalMs: 50", 'pollIntervalMs: 50\n      protocolVersion: "1.0.x"'),
            "unsupported_capability",
            "A2A protocol '1.0.x'",
        ),
        # A patch of the spoken version picks the same interface of the card (major.minor).
        (("pollIntervalMs: 50", 'pollIntervalMs: 50\n      protocolVersion: "1.0.0"'), None, ""),
        (
            ("http://127.0.0.1:9/.well-known/agent-card.json", "peers/card.json"),
            "schema_violation",
            "A2A Agent Card URL 'peers/card.json' is not an absolute http(s) URL",
        ),
    ],
)
def test_check_judges_a2a_declarations(  # type: ignore[no-untyped-def]
    cli: Cli, tmp_path: Path, edit, code, needle
) -> None:
    """What a run could only fail on (no such peer, no message, a protocol no card offers) is
    refused by `check`, before any run exists, as for MCP servers."""
    text = WORKFLOW.replace("PORT", "9").replace("ALLOWED", "127.0.0.1").replace("MAXPOLLS", "5")
    assert_check_edit(cli, tmp_path, text, edit, code, needle)
