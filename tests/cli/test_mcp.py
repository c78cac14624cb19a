"""MCP through the CLI, against the example server built from the official ``mcp`` package.

The server runs on 127.0.0.1 in a subprocess and appends each ``tools/call`` it receives to a
file, so every test can count what really reached it: a call, an agent's tool use, a replay
(nothing), a server killed mid-call (uncertain, never sent again), an egress refusal (nothing).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cli.checkedits import assert_check_edit
from tests.cli.mcp_server import TOKEN, NotesServer, start_server
from tests.clibackend import LedgerTarget
from tests.conftest import Cli, StartCli

WORKFLOW = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {{ name: mcp }}
spec:
  policy:
    approval: never
    networkAllowlist: [127.0.0.1]
    network: {{ allowPrivate: true, allowedPorts: [{port}] }}
    environmentAllowlist: [NOTES_TOKEN]
  mcpServers:
    notes: {{ url: "{url}", timeoutSeconds: 60{headers} }}
  actions:
    call: {{ kind: mcp.call }}
  tasks:
    - id: count
      uses: action:call
      with: {{ server: notes, tool: {tool}, arguments: {arguments} }}
"""

AGENT = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {{ name: mcp-agent }}
spec:
  policy:
    approval: never
    networkAllowlist: [127.0.0.1]
    network: {{ allowPrivate: true, allowedPorts: [{port}] }}
  mcpServers:
    notes: {{ url: "{url}" }}
  providers: {{ sim: {{ kind: fake }} }}
  tools:
    count_words: {{ kind: mcp.tool, server: notes, tool: word_count, idempotency: idempotent }}
  agents:
    counter:
      provider: sim
      model: scripted
      instructions: Count the words.
      tools: [count_words]
      maxTurns: 2
      providerOptions: {{ toolInput: {tool_input}, finalText: counted }}
  tasks:
    - {{ id: agent, uses: agent:counter, with: {{ prompt: count }} }}
"""


@pytest.fixture
def server(tmp_path: Path) -> Iterator[NotesServer]:
    started = start_server(tmp_path / "server")
    try:
        yield started
    finally:
        started.kill()


def _workflow(
    tmp_path: Path,
    server: NotesServer,
    *,
    tool: str = "word_count",
    arguments: str = '{ text: "one two three four" }',
    url: str | None = None,
    headers: str = "",
) -> Path:
    text = WORKFLOW.format(
        port=server.port,
        url=url or server.url,
        tool=tool,
        arguments=arguments,
        headers=headers,
    )
    path = tmp_path / "wf.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def _inspect(cli: Cli, run_id: str) -> Any:
    done = cli("--output", "json", "inspect", run_id)
    assert done.rc == 0, done.stderr
    return done.data


def test_mcp_call_returns_the_tool_result_and_replay_calls_nothing(
    cli: Cli, tmp_path: Path, server: NotesServer
) -> None:
    _workflow(tmp_path, server)
    done = cli("--output", "json", "run", "wf.yaml")
    assert done.rc == 0, done.stderr
    run_id = done.data["runId"]
    output = done.data["output"]["count"]
    assert output["structuredContent"] == {"words": 4}
    assert output["isError"] is False and output["tool"] == "word_count"
    assert server.calls() == ["word_count"]

    seen = _inspect(cli, run_id)
    [session] = seen["protocolSessions"]
    assert (session["protocol"], session["peer"], session["endpoint"]) == (
        "mcp",
        "notes",
        server.url,
    )
    assert session["protocolVersion"] == "2025-11-25"
    assert session["remoteSessionId"]  # the Mcp-Session-Id the server assigned
    calls = [(c["method"], c["target"], c["status"]) for c in seen["protocolCalls"]]
    assert calls == [("initialize", None, "succeeded"), ("tools/call", "word_count", "succeeded")]
    assert all(
        c["remoteId"] and c["sessionId"] == session["sessionId"] for c in seen["protocolCalls"]
    )
    [effect] = seen["effects"]
    assert (effect["operation"], effect["status"]) == ("mcp.call", "succeeded")
    # word_count is annotated idempotentHint by the server; only the workflow's word counts.
    assert effect["idempotency"] == "unknown"

    replayed = cli("--output", "json", "replay", run_id)
    assert replayed.rc == 0, replayed.stderr
    assert replayed.data["output"]["count"]["structuredContent"] == {"words": 4}
    assert server.calls() == ["word_count"]  # the replay called nothing


def test_an_answer_over_one_mib_is_taken_up_to_max_response_bytes(
    cli: Cli, tmp_path: Path, server: NotesServer
) -> None:
    """The SDK's own 1 MiB cap on one SSE event does not apply: the answer is bounded by
    policy.network.maxResponseBytes (8 MiB by default) as every peer's is; above it the call
    fails (the tool ran: uncertain)."""
    _workflow(tmp_path, server, tool="repeat", arguments="{ text: abcd, times: 400000 }")
    done = cli("--output", "json", "run", "wf.yaml")
    assert done.rc == 0, done.stderr
    assert len(json.dumps(done.data["output"])) > 1_600_000
    assert server.calls() == ["repeat"]
    tight = (
        (tmp_path / "wf.yaml")
        .read_text()
        .replace("allowPrivate: true", "allowPrivate: true, maxResponseBytes: 1048576")
    )
    (tmp_path / "wf.yaml").write_text(tight)
    capped = cli("--output", "json", "run", "wf.yaml")
    assert capped.rc == 4, capped.stderr
    seen = _inspect(cli, capped.error["error"]["runId"])
    assert [e["status"] for e in seen["effects"]] == ["uncertain"]
    assert "maxResponseBytes" in json.dumps(seen["tasks"]) + json.dumps(seen["effects"])


def test_an_empty_allowed_ports_list_permits_the_url_s_own_port(
    cli: Cli, tmp_path: Path, server: NotesServer
) -> None:
    """The original's reference: an empty ``allowedPorts`` "permits the scheme's known or
    explicit port" — its own MCP example names 127.0.0.1:8765 with no ``allowedPorts``."""
    wf = _workflow(tmp_path, server)
    text = wf.read_text(encoding="utf-8")
    wf.write_text(text.replace(f", allowedPorts: [{server.port}]", ""), encoding="utf-8")
    assert "allowedPorts" not in wf.read_text(encoding="utf-8")
    done = cli("--output", "json", "run", "wf.yaml")
    assert done.rc == 0, done.stderr
    assert done.data["output"]["count"]["structuredContent"] == {"words": 4}
    assert server.calls() == ["word_count"]


def test_an_agent_uses_an_mcp_tool_in_a_turn(cli: Cli, tmp_path: Path, server: NotesServer) -> None:
    text = AGENT.format(port=server.port, url=server.url, tool_input='{ text: "a b c" }')
    (tmp_path / "wf.yaml").write_text(text, encoding="utf-8")
    done = cli("--output", "json", "run", "wf.yaml")
    assert done.rc == 0, done.stderr
    assert done.data["output"]["agent"]["text"] == "counted"
    assert server.calls() == ["word_count"]

    seen = _inspect(cli, done.data["runId"])
    operations = [(e["operation"], e["status"]) for e in seen["effects"]]
    assert operations == [
        ("mcp.list_tools", "succeeded"),
        ("fake", "succeeded"),
        ("mcp.call", "succeeded"),
        ("fake", "succeeded"),
    ]
    tool_effect = seen["effects"][2]
    assert tool_effect["idempotency"] == "idempotent"  # declared by the workflow
    [listed] = cli("--output", "json", "effects", "inspect", seen["effects"][0]["effectId"]).data[
        "effect"
    ]["result"]["tools"]
    assert listed["name"] == "word_count" and listed["inputSchema"]["required"] == ["text"]
    assert listed["annotations"]["idempotentHint"] is True  # recorded as a claim, not used
    [tool_call] = seen["toolCalls"]
    assert (tool_call["tool"], tool_call["status"]) == ("count_words", "succeeded")
    assert tool_call["output"]["structuredContent"] == {"words": 3}
    # The second model call saw the tool's result.
    second = cli("--output", "json", "effects", "inspect", seen["effects"][3]["effectId"])
    messages = second.data["effect"]["request"]["input"]["messages"]
    assert messages[-1]["role"] == "tool"
    assert messages[-1]["content"]["structuredContent"] == {"words": 3}

    replayed = cli("--output", "json", "replay", done.data["runId"])
    assert replayed.rc == 0, replayed.stderr
    assert server.calls() == ["word_count"]  # the replay called nothing


def test_an_agent_checks_tool_input_against_the_listed_schema(
    cli: Cli, tmp_path: Path, server: NotesServer
) -> None:
    # word_count's listed inputSchema wants a string `text`; the model sends a number.
    text = AGENT.format(port=server.port, url=server.url, tool_input="{ text: 5 }")
    (tmp_path / "wf.yaml").write_text(text, encoding="utf-8")
    done = cli("--output", "json", "run", "wf.yaml")
    assert done.rc == 4, (done.stdout, done.stderr)
    assert "tool count_words input is invalid" in done.error["error"]["message"]
    assert server.calls() == []


def test_a_tool_error_fails_the_call_with_the_servers_words(
    cli: Cli, tmp_path: Path, server: NotesServer
) -> None:
    _workflow(tmp_path, server, tool="no_such_tool", arguments="{}")
    done = cli("--output", "json", "run", "wf.yaml")
    assert done.rc == 4, (done.stdout, done.stderr)
    message = done.error["error"]["message"]
    assert "notes/no_such_tool reported an error" in message and "no_such_tool" in message
    seen = _inspect(cli, done.error["error"]["runId"])
    [effect] = seen["effects"]
    assert effect["status"] == "failed"
    assert [c["status"] for c in seen["protocolCalls"]] == ["succeeded", "failed"]


def _run_slow_call(
    start_cli: StartCli, tmp_path: Path, server: NotesServer
) -> subprocess.Popen[str]:
    """``agentctl run`` of a call the server takes a minute to answer, once it has arrived."""
    _workflow(tmp_path, server, tool="slow", arguments="{ seconds: 60 }")
    proc = start_cli("--output", "json", "run", "wf.yaml")
    server.wait_for_call("slow")
    return proc


def test_killing_the_server_mid_call_leaves_the_effect_uncertain(
    cli: Cli, start_cli: StartCli, tmp_path: Path, server: NotesServer
) -> None:
    proc = _run_slow_call(start_cli, tmp_path, server)
    server.kill()
    _out, err = proc.communicate(timeout=120)
    # The run stops with the effect uncertain (exit 4, resumable after reconciliation).
    assert proc.returncode == 4, err
    assert "Traceback" not in err and "Session termination" not in err
    error = json.loads(err.strip().splitlines()[-1])["error"]
    assert "uncertain" in error["message"]
    run_id = error["runId"]
    seen = _inspect(cli, run_id)
    [effect] = seen["effects"]
    assert effect["status"] == "uncertain"
    call = seen["protocolCalls"][-1]
    assert (call["method"], call["target"], call["status"]) == ("tools/call", "slow", "uncertain")

    # Even with the server back, resume refuses to guess and sends nothing again.
    again = start_server(tmp_path / "server2")
    try:
        resumed = cli("--output", "json", "resume", run_id)
        assert resumed.rc == 3, resumed.stderr
        assert effect["effectId"] in resumed.error["error"]["message"]
        assert again.calls() == []
    finally:
        again.kill()
    assert server.calls() == ["slow"]


class _Listener:
    """A TCP listener on 127.0.0.1 that counts the connections it accepts."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        self.sock.close()


def test_a_host_outside_the_allowlist_is_refused_before_the_run_exists(
    cli: Cli, tmp_path: Path
) -> None:
    listener = _Listener()
    try:
        url = f"http://localhost:{listener.port}/mcp"  # networkAllowlist holds 127.0.0.1 only
        text = WORKFLOW.format(
            port=listener.port, url=url, tool="word_count", arguments="{}", headers=""
        )
        (tmp_path / "wf.yaml").write_text(text, encoding="utf-8")
        done = cli("--output", "json", "run", "wf.yaml")
    finally:
        listener.close()
    assert done.rc == 3, (done.stdout, done.stderr)
    message = done.error["error"]["message"]
    assert "MCP server notes" in message and "networkAllowlist" in message
    assert done.error["error"]["runId"] is None  # refused before any state:
    assert not list(tmp_path.rglob("*.db"))  # not even a database
    assert listener.accepted == 0


def test_an_allowed_name_resolving_to_loopback_is_refused_before_any_request(
    cli: Cli, tmp_path: Path
) -> None:
    listener = _Listener()
    try:
        url = f"http://127.0.0.1:{listener.port}/mcp"
        text = WORKFLOW.format(
            port=listener.port, url=url, tool="word_count", arguments="{}", headers=""
        ).replace("allowPrivate: true", "allowPrivate: false")
        (tmp_path / "wf.yaml").write_text(text, encoding="utf-8")
        done = cli("--output", "json", "run", "wf.yaml")
    finally:
        listener.close()
    # The pre-flight resolves the name before any state exists (the worker would again).
    assert done.rc == 3, (done.stdout, done.stderr)
    assert "allowPrivate" in done.error["error"]["message"]
    assert done.error["error"]["runId"] is None
    assert not list(tmp_path.rglob("*.db"))
    assert listener.accepted == 0


def test_headers_come_from_allowlisted_env_and_are_never_recorded(
    cli: Cli, ledger_target: LedgerTarget, tmp_path: Path
) -> None:
    guarded = start_server(tmp_path / "server", token=True)
    try:
        headers = ", headers: { X-Notes-Token: { env: NOTES_TOKEN } }"
        _workflow(tmp_path, guarded, headers=headers)
        refused = cli("--output", "json", "run", "wf.yaml", env={"NOTES_TOKEN": "wrong"})
        assert refused.rc == 4, refused.stderr
        assert "HTTP 401" in refused.error["error"]["message"]
        # A failed initialize still records its session (one per effect), as docs say.
        wire = _inspect(cli, refused.error["error"]["runId"])
        [session] = wire["protocolSessions"]
        assert session["protocol"] == "mcp" and session["protocolVersion"] is None, session
        assert [(c["method"], c["status"], c["sessionId"]) for c in wire["protocolCalls"]] == [
            ("initialize", "failed", session["sessionId"])
        ]
        done = cli("--output", "json", "run", "wf.yaml", env={"NOTES_TOKEN": TOKEN})
        assert done.rc == 0, done.stderr
        assert guarded.calls() == ["word_count"]
    finally:
        guarded.kill()
    seen = _inspect(cli, done.data["runId"])
    recorded = seen["effects"][0]["request"]["input"]["headers"]["X-Notes-Token"]
    assert recorded["source"] == "env:NOTES_TOKEN" and len(recorded["sha256"]) == 64
    ledger = ledger_target.contents(tmp_path / ".agentctl" / "runtime.db")
    assert done.data["runId"] in ledger and TOKEN not in ledger


def test_sigterm_during_a_call_is_uncertain_too(
    cli: Cli, start_cli: StartCli, tmp_path: Path, server: NotesServer
) -> None:
    proc = _run_slow_call(start_cli, tmp_path, server)
    os.kill(proc.pid, signal.SIGTERM)
    proc.communicate(timeout=120)
    assert proc.returncode == 130
    run_id = cli("--output", "json", "runs", "list").data["runs"][0]["runId"]
    [effect] = _inspect(cli, run_id)["effects"]
    assert effect["status"] == "uncertain"
    assert server.calls() == ["slow"]


CHECKED = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: { name: mcp-check }
spec:
  mcpServers:
    notes: { url: "https://notes.example/mcp" }
  providers: { sim: { kind: fake } }
  actions:
    call: { kind: mcp.call }
  tools:
    remote: { kind: mcp.tool, server: notes, tool: word_count }
  agents:
    a: { provider: sim, model: m, instructions: go, tools: [remote] }
  tasks:
    - { id: t, uses: action:call, with: { server: notes, tool: word_count, arguments: {} } }
    - { id: u, uses: agent:a }
"""


@pytest.mark.parametrize(
    ("edit", "code", "needle"),
    [
        (("", ""), None, None),
        (
            ("server: notes, tool: word_count }", "tool: word_count }"),
            "schema_violation",
            "needs `server`",
        ),
        (
            (
                "tool: word_count }\n  agents",
                "tool: word_count, inputSchema: { type: object, additionalProperties: false } }\n  agents",
            ),
            "schema_violation",
            "inputSchema from the server",
        ),
        (  # a non-strict schema: the kind rule, not the strictness rule, is the reason
            (
                "tool: word_count }\n  agents",
                "tool: word_count, inputSchema: { type: object } }\n  agents",
            ),
            "schema_violation",
            "a mcp.tool tool takes its inputSchema from the server",
        ),
        (
            (
                "remote: { kind: mcp.tool, server: notes,",
                "remote: { kind: builtin.echo, server: notes,",
            ),
            "schema_violation",
            "may not declare `server`",
        ),
        (
            ("{ kind: mcp.tool, server: notes", "{ kind: mcp.tool, server: elsewhere"),
            "missing_reference",
            "unknown MCP server `elsewhere`",
        ),
        (
            ("with: { server: notes,", "with: { server: nowhere,"),
            "missing_reference",
            "unknown MCP server `nowhere`",
        ),
        (("arguments: {} }", "arguments: {}, extra: 1 }"), "schema_violation", "with.extra"),
        (("tool: word_count, arguments", "arguments"), "schema_violation", "needs `with.tool`"),
        # Literal values the task would be refused for when it runs are refused by check.
        (
            ("arguments: {} }", "arguments: [1] }"),
            "schema_violation",
            "`with.arguments` must be an object, got [1]",
        ),
        (
            ("tool: word_count, arguments", 'tool: "", arguments'),
            "schema_violation",
            "`with.tool` must be a non-empty string",
        ),
        (
            ('mcp" }', 'mcp", protocolVersion: "2024-11-05" }'),
            "unsupported_capability",
            "MCP protocol '2024-11-05'",
        ),
        (
            ('"https://notes.example/mcp"', "./notes_server.py"),  # a stdio server's script
            "schema_violation",
            "MCP server url './notes_server.py' is not an absolute http(s) URL",
        ),
    ],
)
def test_check_judges_mcp_declarations(  # type: ignore[no-untyped-def]
    cli: Cli, tmp_path: Path, edit, code, needle
) -> None:
    assert_check_edit(cli, tmp_path, CHECKED, edit, code, needle)


def test_a_resumed_agent_reuses_its_recorded_tool_listing(
    cli: Cli, tmp_path: Path, server: NotesServer
) -> None:
    text = AGENT.format(port=server.port, url=server.url, tool_input='{ text: "a b c" }')
    (tmp_path / "wf.yaml").write_text(text, encoding="utf-8")
    # The coordinator dies right after the listing's outcome became durable.
    crash = {"AGENTCTL_CRASH_AT": "coordinator.after_outcome", "AGENTCTL_CRASH_HIT": "1"}
    crashed = cli("--output", "json", "run", "wf.yaml", env=crash)
    assert crashed.rc == -signal.SIGKILL, crashed.stderr
    run_id = cli("--output", "json", "runs", "list").data["runs"][0]["runId"]
    listed = [e for e in _inspect(cli, run_id)["effects"] if e["operation"] == "mcp.list_tools"]
    assert [e["status"] for e in listed] == ["succeeded"]
    assert server.calls() == []

    resumed = cli("--output", "json", "resume", run_id)
    assert resumed.rc == 0, resumed.stderr
    seen = _inspect(cli, run_id)
    operations = [e["operation"] for e in seen["effects"]]
    assert operations == ["mcp.list_tools", "fake", "mcp.call", "fake"]
    assert seen["effects"][0]["effectId"] == listed[0]["effectId"]  # reused, not listed again
    assert len(seen["protocolSessions"]) == 2  # the listing's session and the call's
    assert server.calls() == ["word_count"]


def test_an_uncertain_tool_listing_is_reconciled_under_a_tools_allow_list(
    cli: Cli, tmp_path: Path, server: NotesServer
) -> None:
    # toolsAllow names the agent's tool, not the listing, which the run admits because it
    # serves that allowed tool; reconciling the listing is not judged by the name lists
    # either: otherwise the run could never be resumed.
    text = AGENT.format(port=server.port, url=server.url, tool_input='{ text: "a b c" }')
    allowed = "    approval: never\n    toolsAllow: [count_words]\n"
    (tmp_path / "wf.yaml").write_text(text.replace("    approval: never\n", allowed, 1))
    crash = {"AGENTCTL_CRASH_AT": "coordinator.after_started", "AGENTCTL_CRASH_HIT": "1"}
    crashed = cli("--output", "json", "run", "wf.yaml", env=crash)
    assert crashed.rc == -signal.SIGKILL, crashed.stderr
    run_id = cli("--output", "json", "runs", "list").data["runs"][0]["runId"]
    assert cli("resume", run_id).rc == 3
    [listing] = _inspect(cli, run_id)["effects"]
    assert (listing["operation"], listing["status"]) == ("mcp.list_tools", "uncertain")
    args = ("effects", "reconcile", listing["effectId"], "--status", "not-applied")
    done = cli("--output", "json", *args, "--reason", "nothing was listed")
    assert done.rc == 0, done.stderr
    assert done.data["authorization"]["kind"] == "policy_allow"
    resumed = cli("--output", "json", "resume", run_id)
    assert resumed.rc == 0, resumed.stderr
    assert resumed.data["output"]["agent"]["text"] == "counted"
    assert server.calls() == ["word_count"]


def test_each_tool_call_is_reserved_against_max_tool_calls(
    cli: Cli, tmp_path: Path, server: NotesServer
) -> None:
    path = _workflow(tmp_path, server)
    text = path.read_text(encoding="utf-8")
    text = text.replace("  actions:", "  runtime: { budgets: { maxToolCalls: 1 } }\n  actions:")
    second = "    - { id: again, uses: action:call, needs: [count], with: { server: notes, tool: word_count, arguments: { text: x } } }\n"
    path.write_text(text + second, encoding="utf-8")
    done = cli("--output", "json", "run", "wf.yaml")
    assert done.rc == 4, (done.stdout, done.stderr)
    assert "budget exceeded" in done.error["error"]["message"]
    assert server.calls() == ["word_count"]  # the second call never reached the server
    budget = _inspect(cli, done.error["error"]["runId"])["budget"]
    assert budget["usage"]["toolCalls"] == 1
    assert budget["exceeded"]["dimension"] == "toolCalls"


def test_a_timeout_after_dispatch_is_uncertain_and_never_resent(
    cli: Cli, tmp_path: Path, server: NotesServer
) -> None:
    path = _workflow(tmp_path, server, tool="slow", arguments="{ seconds: 30 }")
    path.write_text(path.read_text().replace("timeoutSeconds: 60", "timeoutSeconds: 3"))
    done = cli("--output", "json", "run", "wf.yaml")
    assert done.rc == 4, (done.stdout, done.stderr)
    seen = _inspect(cli, done.error["error"]["runId"])
    [effect] = seen["effects"]
    assert effect["status"] == "uncertain"
    call = seen["protocolCalls"][-1]
    assert (call["method"], call["status"]) == ("tools/call", "uncertain")
    assert "timed out" in call["detail"]
    assert server.calls() == ["slow"]


def test_an_agent_tool_call_is_bounded_by_the_tools_own_timeout(
    cli: Cli, tmp_path: Path, server: NotesServer
) -> None:
    # The tool declares 1 s; its server allows 60 s and the agent 120 s per call: the tool's
    # own bound ends the 20 s call, which was sent, so its outcome is unknown (uncertain).
    text = AGENT.format(port=server.port, url=server.url, tool_input="{ seconds: 20 }")
    text = text.replace(f'url: "{server.url}"', f'url: "{server.url}", timeoutSeconds: 60')
    text = text.replace(
        "tool: word_count, idempotency: idempotent", "tool: slow, timeoutSeconds: 1"
    )
    (tmp_path / "wf.yaml").write_text(text, encoding="utf-8")
    done = cli("--output", "json", "run", "wf.yaml")
    assert done.rc == 4, (done.stdout, done.stderr)
    seen = _inspect(cli, done.error["error"]["runId"])
    operations = [(e["operation"], e["status"]) for e in seen["effects"]]
    assert operations == [
        ("mcp.list_tools", "succeeded"),
        ("fake", "succeeded"),
        ("mcp.call", "uncertain"),
    ]
    assert seen["effects"][2]["error"] == "MCP server notes: effect timed out after 1 s"
    assert server.calls() == ["slow"]
