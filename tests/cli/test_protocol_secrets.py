"""The header secrets of MCP servers and A2A peers, as a user meets them through the CLI.

A header is a secret reference like a provider credential, so it is pre-flighted the same
way: an unset variable refuses the run with exit 6 before any database or run exists, and
``doctor`` reports it. A preview (``run --check``) sends nothing, so it resolves no header:
an unset variable is no error there and a ``{process}`` helper does not run.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.a2a_peer_process import Peer, running_peer
from tests.conftest import Cli

PORT = 9  # nothing is sent: every refusal here comes before a connection


def _workflow(name: str, env: str, body: str) -> str:
    """A workflow on 127.0.0.1:PORT whose one task uses ``body``'s server or peer."""
    helpers = os.path.basename(sys.executable)
    head = f"""\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {{ name: {name} }}
spec:
  policy:
    approval: never
    networkAllowlist: [127.0.0.1]
    network: {{ allowPrivate: true, allowedPorts: [{PORT}] }}
    environmentAllowlist: [{env}]
    secretProcessAllowlist: [{helpers}]
"""
    return head + body.replace("PORT", str(PORT))


MCP = _workflow(
    "mcp-secret",
    "NOTES_TOKEN",
    """\
  mcpServers:
    notes: { url: "http://127.0.0.1:PORT/mcp", headers: { X-Notes-Token: HEADER } }
  actions: { call: { kind: mcp.call } }
  tasks:
    - { id: count, uses: action:call, with: { server: notes, tool: t, arguments: {} } }
""",
)

A2A = _workflow(
    "a2a-secret",
    "PEER_TOKEN",
    """\
  a2aPeers:
    reviewer:
      cardUrl: http://127.0.0.1:PORT/.well-known/agent-card.json
      headers: { X-Peer-Token: { env: PEER_TOKEN } }
  actions: { review: { kind: a2a.delegate } }
  tasks:
    - { id: ask, uses: action:review, with: { peer: reviewer, message: hi } }
""",
)

ENV_HEADER = "{ env: NOTES_TOKEN }"


def _refused_before_any_state(done: object, tmp_path: Path, needle: str) -> None:
    assert done.rc == 6, (done.stdout, done.stderr)  # type: ignore[attr-defined]
    error = done.error["error"]  # type: ignore[attr-defined]
    assert needle in error["message"] and "nothing was created" in error["message"], error
    assert error["runId"] is None
    assert not list(tmp_path.rglob("*.db"))


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (MCP.replace("HEADER", ENV_HEADER), "MCP server notes: headers.X-Notes-Token"),
        (A2A, "A2A peer reviewer: headers.X-Peer-Token"),
    ],
)
def test_an_unset_header_variable_refuses_the_run_before_any_state(  # type: ignore[no-untyped-def]
    cli: Cli, tmp_path: Path, text, needle
) -> None:
    (tmp_path / "wf.yaml").write_text(text, encoding="utf-8")
    _refused_before_any_state(cli("--output", "json", "run", "wf.yaml"), tmp_path, needle)
    doctor = cli("--output", "json", "doctor", "wf.yaml")
    assert doctor.rc == 6, (doctor.stdout, doctor.stderr)
    [check] = [c for c in doctor.data["checks"] if c["check"].startswith("credential")]
    assert needle.replace(": ", " ") in check["check"] and check["status"] == "missing", check


def test_a_preview_resolves_no_header_and_runs_no_helper(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "wf.yaml").write_text(MCP.replace("HEADER", ENV_HEADER), encoding="utf-8")
    preview = cli("--output", "json", "run", "--check", "wf.yaml")
    assert preview.rc == 0, (preview.stdout, preview.stderr)
    marker = tmp_path / "helper-ran.txt"
    helper = f"open('{marker}', 'a').write('ran'); print('s3cret')"
    ref = f'{{ process: {{ command: {sys.executable}, args: [-c, "{helper}"] }} }}'
    (tmp_path / "wf.yaml").write_text(MCP.replace("HEADER", ref), encoding="utf-8")
    preview = cli("--output", "json", "run", "--check", "wf.yaml")
    assert preview.rc == 0, (preview.stdout, preview.stderr)
    assert not marker.exists()  # the helper never ran for a preview
    ran = cli(
        "--output", "json", "run", "wf.yaml"
    )  # a real run does run it (then fails to connect)
    assert ran.rc == 4 and marker.exists(), (ran.stdout, ran.stderr)


PEER_THEN_WRITE = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: { name: a2a-then-write }
spec:
  inputs: { which: reviewer }
  policy:
    approval: mutations
    writableRoots: [out]
    networkAllowlist: [127.0.0.1]
    network: { allowPrivate: true, allowedPorts: [PEER_PORT] }
    environmentAllowlist: [PEER_TOKEN, OTHER_TOKEN]
  a2aPeers:
    reviewer:
      cardUrl: http://127.0.0.1:PEER_PORT/.well-known/agent-card.json
      pollIntervalMs: 50
      headers: { X-Peer-Token: { env: PEER_TOKEN } }
    other:
      cardUrl: http://127.0.0.1:PEER_PORT/.well-known/agent-card.json
      headers: { X-Peer-Token: { env: OTHER_TOKEN } }
  actions:
    review: { kind: a2a.delegate }
    save: { kind: builtin.write }
  tasks:
    - { id: ask, uses: action:review, with: { peer: "PEERNAME", message: hi } }
    - id: keep
      uses: action:save
      needs: [ask]
      with: { path: out/review.txt, content: "${{ tasks.ask.output.text }}" }
"""


@pytest.fixture
def peer(tmp_path: Path) -> Iterator[Peer]:
    with running_peer(tmp_path, delay=0.0) as running:
        yield running


def _peer_workflow(tmp_path: Path, peer: Peer, named: str) -> Path:
    path = tmp_path / "wf.yaml"
    path.write_text(PEER_THEN_WRITE.replace("PEER_PORT", str(peer.port)).replace("PEERNAME", named))
    return path


def _approve_pending(cli: Cli, run_id: str, db: str) -> None:
    (held,) = cli("--output", "json", "approvals", "list", run_id, "--db", db).data["approvals"]
    assert cli("approvals", "approve", held["approvalId"], "--reason", "ok", "--db", db).rc == 0


def test_resume_needs_no_secret_of_a_task_that_already_succeeded(
    cli: Cli, tmp_path: Path, peer: Peer
) -> None:
    # Both tasks wait for approval (policy `mutations`). The delegation runs with its token;
    # the token is gone by the time the operator resumes for the write: only the tasks still
    # to finish are pre-flighted (spec/cli.md §5).
    wf, db = _peer_workflow(tmp_path, peer, "reviewer"), str(tmp_path / "st" / "r.db")
    token = {"PEER_TOKEN": "t0k"}
    first = cli("--output", "json", "run", str(wf), "--db", db, env=token)
    assert first.rc == 3, first.stderr
    run_id = first.data["runId"]
    _approve_pending(cli, run_id, db)
    delegated = cli("--output", "json", "resume", run_id, "--db", db, env=token)
    assert delegated.rc == 3, delegated.stderr  # the delegation ran; the write waits
    _approve_pending(cli, run_id, db)
    resumed = cli("--output", "json", "resume", run_id, "--db", db)
    assert resumed.rc == 0, resumed.stderr
    assert (tmp_path / "out" / "review.txt").read_text() == "reviewed: hi"


def test_a_peer_a_template_selects_is_not_pre_flighted(
    cli: Cli, tmp_path: Path, peer: Peer
) -> None:
    # `other`'s token is missing, but the template selects `reviewer`, whose token is set:
    # the run must not be refused for a peer it never calls (each peer's header is checked
    # when a call to it is made).
    wf = _peer_workflow(tmp_path, peer, "${{ inputs.which }}")
    db, token = str(tmp_path / "st" / "r.db"), {"PEER_TOKEN": "t0k"}
    first = cli("--output", "json", "run", str(wf), "--db", db, env=token)
    assert first.rc == 3, first.stderr
    _approve_pending(cli, first.data["runId"], db)
    delegated = cli("--output", "json", "resume", first.data["runId"], "--db", db, env=token)
    assert delegated.rc == 3, delegated.stderr  # the delegation went through; the write waits
    tasks = cli("--output", "json", "inspect", first.data["runId"], "--db", db).data["tasks"]
    assert {t["taskId"]: t["state"] for t in tasks}["ask"] == "succeeded"
    # A literally named peer still is: its missing token refuses the run before any state.
    named = _peer_workflow(tmp_path, peer, "other")
    refused = cli("--output", "json", "run", str(named), "--db", str(tmp_path / "n" / "r.db"))
    _refused_before_any_state(refused, tmp_path / "n", "A2A peer other: headers.X-Peer-Token")


@pytest.mark.parametrize(
    ("text", "where"),
    [
        (MCP.replace("HEADER", ENV_HEADER), "headers/X-Notes-Token"),
        (A2A.replace("PEER_TOKEN", "NOTES_TOKEN"), "headers/X-Peer-Token"),
    ],
    ids=["mcp", "a2a"],
)
@pytest.mark.parametrize("value", ["tok-4815162342\r", "tok-4815162342\nX-Injected: 1"])
def test_a_header_value_with_a_line_break_fails_closed_and_is_never_shown(  # type: ignore[no-untyped-def]
    cli: Cli, tmp_path: Path, text, where, value
) -> None:
    """An HTTP header cannot carry a CR or LF: the value is refused where it is resolved
    (exit 4, naming its source, not its value), never quoted back by the HTTP stack, so it
    reaches neither the error, the ledger nor ``inspect``."""
    (tmp_path / "wf.yaml").write_text(text, encoding="utf-8")
    env = {"NOTES_TOKEN": value}
    done = cli("--output", "json", "run", "wf.yaml", "--db", "r.db", env=env)
    assert done.rc == 4, (done.stdout, done.stderr)
    message = done.error["error"]["message"]
    assert where in message and "env:NOTES_TOKEN" in message and "control character" in message
    seen = cli("--output", "json", "inspect", done.error["error"]["runId"], "--db", "r.db")
    assert seen.rc == 0, seen.stderr
    files = [p.read_bytes().decode("latin-1") for p in tmp_path.glob("r.db*") if p.is_file()]
    for shown in (done.stderr, seen.stdout, *files):
        assert "4815162342" not in shown


@pytest.mark.parametrize(
    ("text", "where"),
    [
        (MCP.replace("HEADER", ENV_HEADER), "headers/X-Notes-Token"),
        (A2A.replace("PEER_TOKEN", "NOTES_TOKEN"), "headers/X-Peer-Token"),
    ],
    ids=["mcp", "a2a"],
)
@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("tok-4815162342 ", "begins or ends with whitespace"),
        ("tok-é-4815162342", "holds a character outside ASCII"),
        ("  ", "is empty or only whitespace"),
    ],
    ids=["trailing-space", "non-ascii", "spaces"],
)
def test_a_header_value_no_header_can_carry_fails_closed_and_is_never_shown(  # type: ignore[no-untyped-def]
    cli: Cli, tmp_path: Path, text, where, value, why
) -> None:
    """Refused where it is resolved (exit 4, naming its source), as a line break is — never
    sent for the HTTP stack to refuse as a transport failure — and the message is whole (a
    whitespace value is never redacted from it)."""
    (tmp_path / "wf.yaml").write_text(text, encoding="utf-8")
    done = cli("--output", "json", "run", "wf.yaml", "--db", "r.db", env={"NOTES_TOKEN": value})
    assert done.rc == 4, (done.stdout, done.stderr)
    message = done.error["error"]["message"]
    assert where in message and "env:NOTES_TOKEN" in message and why in message, message
    assert "[REDACTED]" not in message and "Error" not in message, message
    files = [p.read_bytes().decode("latin-1") for p in tmp_path.glob("r.db*") if p.is_file()]
    for shown in (done.stderr, *files):
        assert "4815162342" not in shown
