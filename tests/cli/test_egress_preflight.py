"""The egress pre-flight through the CLI (spec/cli.md §12): every endpoint a plan reaches is
judged before any database or run exists — a denial exits 3, a name that does not resolve 6.

Each test runs the CLI in a fresh directory against real servers on 127.0.0.1 that count what
reaches them (the providers' local server, the MCP example server, the A2A example peer) and
then looks for a database file: there must be none. Names that must not resolve are under
``.invalid`` (RFC 6761: never resolvable).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.a2a_peer_process import running_peer
from tests.cli.mcp_server import start_server
from tests.conftest import EXAMPLES, Cli, CliResult
from tests.providers import fixtures as fx
from tests.providers.agent_server import AgentServer

KEY = {"OPENAI_API_KEY": "sk-preflight-test"}
NOWHERE = "model.agentctl-test.invalid"
_UNRESOLVABLE = {
    "networkAllowlist: [127.0.0.1]": f"networkAllowlist: [{NOWHERE}]",
    "http://127.0.0.1:": f"http://{NOWHERE}:",
}


@pytest.fixture
def server() -> Iterator[AgentServer]:
    srv = AgentServer()
    yield srv
    srv.close()


def _openai(ws: Path, server: AgentServer, **edits: str) -> Path:
    """The bundled OpenAI example, served by ``server``, with ``edits`` applied, in ``ws``."""
    text = (EXAMPLES / "providers" / "openai.yaml").read_text(encoding="utf-8")
    text = text.replace("8765", str(server.port))
    for old, new in edits.items():
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    (ws / "notes.txt").write_bytes((EXAMPLES / "providers" / "notes.txt").read_bytes())
    path = ws / "wf.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def _refused_before_state(done: CliResult, ws: Path, code: int, *words: str) -> None:
    assert done.rc == code, (done.stdout, done.stderr)
    error = done.error["error"]
    assert error["exitCode"] == code and error["runId"] is None
    for word in words:
        assert word in error["message"], error["message"]
    assert [p for p in ws.rglob("*") if p.suffix in (".db", ".db-wal")] == []
    assert not (ws / ".agentctl").exists()


ORIGINAL_WORDS = "network address is not authorized"

DENIED = {
    # localhost reaches the same server, but the allowlist names 127.0.0.1 only.
    "host outside the allowlist": (
        {"http://127.0.0.1:": "http://localhost:"},
        ("'localhost'", "networkAllowlist"),
    ),
    # No `endpoint`: the kind's default public one, which the allowlist does not name.
    "default endpoint": (
        {"      endpoint: http://127.0.0.1:": "      # was: "},
        ("api.openai.com", "networkAllowlist"),
    ),
    "loopback without allowPrivate": ({", allowPrivate: true": ""}, ("loopback", "allowPrivate")),
}


@pytest.mark.parametrize("case", sorted(DENIED))
def test_a_denied_provider_endpoint_exits_3_before_any_state(
    cli: Cli, tmp_path: Path, server: AgentServer, case: str
) -> None:
    edits, words = DENIED[case]
    wf = _openai(tmp_path, server, **edits)
    done = cli("--output", "json", "run", str(wf), env=KEY)
    # The original's words (its acceptance scenario 44 matches them), then our reason.
    _refused_before_state(done, tmp_path, 3, "provider main", ORIGINAL_WORDS, *words)
    assert server.seen == []


@pytest.mark.parametrize("scheme", ["http", "https"])
@pytest.mark.parametrize("listed", [True, False])
def test_an_explicit_port_0_is_port_0_not_the_default(
    cli: Cli, tmp_path: Path, server: AgentServer, scheme: str, listed: bool
) -> None:
    # `allowedPorts` holds no 0 (spec/dsl.md §7), and an empty list admits the scheme's known
    # port or the URL's explicit one, never port 0: port 0 was falsy and judged as 80/443, so
    # with no `allowedPorts` such an endpoint passed the pre-flight and a run was created.
    edits = {f"http://127.0.0.1:{server.port}/": f"{scheme}://127.0.0.1:0/"}
    if not listed:
        edits[f"allowedPorts: [{server.port}], "] = ""
    wf = _openai(tmp_path, server, **edits)
    done = cli("--output", "json", "run", str(wf), env=KEY)
    _refused_before_state(done, tmp_path, 3, "egress port 0 ")
    assert server.seen == []


def test_submit_refuses_a_denied_endpoint_before_queueing_anything(
    cli: Cli, tmp_path: Path, server: AgentServer
) -> None:
    """A queued run is judged by the same URL rules as ``run``: a serve never meets it."""
    edits, words = DENIED["host outside the allowlist"]
    wf = _openai(tmp_path, server, **edits)
    done = cli("--output", "json", "submit", str(wf), env=KEY)
    _refused_before_state(done, tmp_path, 3, "provider main", *words)
    assert server.seen == []


@pytest.mark.parametrize("command", ["run", "submit"])
def test_an_endpoint_its_adapter_cannot_call_exits_2_before_any_state(
    cli: Cli, tmp_path: Path, server: AgentServer, command: str
) -> None:
    # `…/v1` where an openai endpoint ends with `/responses`: the worker refuses every call to
    # it, so the run was created and charged a providerRequests unit before its task failed.
    wf = _openai(tmp_path, server, **{"/v1/responses": "/v1"})
    done = cli("--output", "json", command, str(wf), env=KEY)
    _refused_before_state(done, tmp_path, 2, "provider main", "ends with /responses")
    (found,) = done.error["diagnostics"]
    assert (found["code"], found["path"]) == (
        "unsupported_capability",
        "spec.providers.main.endpoint",
    )
    assert found["line"] is not None
    assert server.seen == []
    # check refuses it the same way (it validates provider capabilities); plan, doctor and
    # auth check still report on it
    checked = cli("--output", "json", "check", str(wf))
    assert checked.rc == 2, checked.stdout
    (found,) = checked.error["diagnostics"]
    assert found["code"] == "unsupported_capability"
    assert found["path"] == "spec.providers.main.endpoint" and found["line"] is not None
    assert cli("plan", str(wf)).rc == 0
    assert cli("auth", "check", str(wf)).rc == 0


def test_a_provider_name_that_does_not_resolve_exits_6_before_any_state(
    cli: Cli, tmp_path: Path, server: AgentServer
) -> None:
    wf = _openai(tmp_path, server, **_UNRESOLVABLE)
    done = cli("--output", "json", "run", str(wf), env=KEY)
    _refused_before_state(done, tmp_path, 6, "provider main", NOWHERE)


def test_the_allowed_endpoint_still_runs(cli: Cli, tmp_path: Path, server: AgentServer) -> None:
    wf = _openai(tmp_path, server)
    done = cli("--output", "json", "run", str(wf), env=KEY)
    assert done.rc == 0, done.stderr
    assert len(server.seen) == 2


def test_a_preview_applies_the_url_rules_but_resolves_nothing(
    cli: Cli, tmp_path: Path, server: AgentServer
) -> None:
    refused = tmp_path / "refused"
    refused.mkdir()
    wf = _openai(refused, server, **{"http://127.0.0.1:": "http://localhost:"})
    done = cli("--output", "json", "run", str(wf), "--check", cwd=refused)
    _refused_before_state(done, refused, 3, "provider main", "networkAllowlist")
    # A name that cannot resolve passes a preview: it sends nothing, not even a DNS query.
    wf = _openai(tmp_path, server, **_UNRESOLVABLE)
    previewed = cli("--output", "json", "run", str(wf), "--check")
    assert previewed.rc == 0, previewed.stderr
    assert server.seen == []
    # Executing that plan is another matter: a fork resolves, fails, and creates no run.
    forked = cli("--output", "json", "fork", previewed.data["runId"], env=KEY)
    assert forked.rc == 6, forked.stderr
    assert NOWHERE in forked.error["error"]["message"]
    runs = cli("--output", "json", "runs", "list").data["runs"]
    assert [r["runId"] for r in runs] == [previewed.data["runId"]]


def test_a_repair_reaching_a_name_that_does_not_resolve_creates_no_run(
    cli: Cli, tmp_path: Path, server: AgentServer
) -> None:
    server.script(fx.openai_error(400, "no such model"))
    failed = cli("--output", "json", "run", str(_openai(tmp_path, server)), env=KEY)
    assert failed.rc == 4, failed.stderr
    source = failed.error["error"]["runId"]
    fixed = tmp_path / "fixed"
    fixed.mkdir()
    wf = _openai(fixed, server, **_UNRESOLVABLE)
    done = cli("--output", "json", "repair", str(wf), source, "--from", "describe", env=KEY)
    assert done.rc == 6, done.stderr
    assert NOWHERE in done.error["error"]["message"]
    runs = cli("--output", "json", "runs", "list").data["runs"]
    assert [r["runId"] for r in runs] == [source]
    assert len(server.seen) == 1


# --------------------------------------------------------------------------- MCP and A2A

MCP = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: { name: mcp-preflight }
spec:
  policy:
    approval: never
    networkAllowlist: [127.0.0.1]
    network: { allowedPorts: [PORT] }
  mcpServers:
    notes: { url: "URL" }
  actions:
    call: { kind: mcp.call }
  tasks:
    - id: count
      uses: action:call
      with: { server: notes, tool: word_count, arguments: { text: "one two" } }
"""


def test_an_mcp_server_on_loopback_without_allow_private_exits_3_before_any_state(
    cli: Cli, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    notes = start_server(tmp_path / "server")
    try:
        text = MCP.replace("PORT", str(notes.port)).replace("URL", notes.url)
        (ws / "wf.yaml").write_text(text, encoding="utf-8")
        done = cli("--output", "json", "run", "wf.yaml", cwd=ws)
        assert notes.calls() == []
    finally:
        notes.kill()
    _refused_before_state(done, ws, 3, "MCP server notes", "loopback", "allowPrivate")


A2A = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: { name: a2a-preflight }
spec:
  policy:
    approval: never
    networkAllowlist: [HOST]
    network: { allowPrivate: true, allowedPorts: [PORT] }
  a2aPeers:
    reviewer: { cardUrl: "http://HOST:PORT/.well-known/agent-card.json" }
  actions:
    review: { kind: a2a.delegate }
  tasks:
    - id: ask
      uses: action:review
      with: { peer: "${{ inputs.peer }}", message: check the release notes }
  inputs: { peer: reviewer }
"""


def test_an_a2a_peer_that_does_not_resolve_exits_6_before_any_state(
    cli: Cli, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    with running_peer(tmp_path, delay=0.0) as peer:
        # A templated peer name may render to any declared peer: all of them are judged.
        text = A2A.replace("PORT", str(peer.port)).replace("HOST", "peer.agentctl-test.invalid")
        (ws / "wf.yaml").write_text(text, encoding="utf-8")
        done = cli("--output", "json", "run", "wf.yaml", cwd=ws)
        _refused_before_state(done, ws, 6, "A2A peer reviewer", "peer.agentctl-test.invalid")
        assert peer.lines(peer.requests) == []
