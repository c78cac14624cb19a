"""An agent's MCP ``tools/list`` is decided by policy before anything reaches the server.

The listing (operation ``mcp.list_tools``) serves the agent's tools of one server: a deny list
naming it, or denying every one of those tools, denies it; ``approval: always`` holds it for an
approval like any effect. The server is the real example MCP server in a subprocess.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cli.mcp_server import NotesServer, start_server
from tests.cli.test_mcp import AGENT
from tests.conftest import Cli


@pytest.fixture
def server(tmp_path: Path) -> Iterator[NotesServer]:
    started = start_server(tmp_path / "server")
    yield started  # pytest finishes the fixture whatever the test did
    started.kill()


def _write(tmp_path: Path, server: NotesServer, policy: str) -> None:
    text = AGENT.format(port=server.port, url=server.url, tool_input='{ text: "a b c" }')
    text = text.replace("    approval: never\n", policy, 1)
    (tmp_path / "wf.yaml").write_text(text, encoding="utf-8")


def _seen(cli: Cli, run_id: str) -> Any:
    done = cli("--output", "json", "inspect", run_id)
    assert done.rc == 0, done.stderr
    return done.data


@pytest.mark.parametrize(
    ("deny", "needle"),
    [
        ("[count_words]", "every tool it lists for is denied"),
        ("[mcp.list_tools, mcp.call]", "'mcp.list_tools' is in policy.toolsDeny"),
    ],
)
def test_a_denied_listing_reaches_no_server(
    cli: Cli, tmp_path: Path, server: NotesServer, deny: str, needle: str
) -> None:
    _write(tmp_path, server, f"    approval: never\n    toolsDeny: {deny}\n")
    done = cli("--output", "json", "run", "wf.yaml")
    assert done.rc == 4, done.stderr
    assert needle in done.error["error"]["message"]
    seen = _seen(cli, done.error["error"]["runId"])
    assert (seen["effects"], seen["protocolCalls"]) == ([], [])  # nothing was sent
    assert server.calls() == []


def test_approval_always_holds_the_listing_before_it_is_sent(
    cli: Cli, tmp_path: Path, server: NotesServer
) -> None:
    _write(tmp_path, server, "    approval: always\n")
    paused = cli("--output", "json", "run", "wf.yaml")
    assert paused.rc == 3, paused.stderr
    run_id = paused.data["runId"]
    seen = _seen(cli, run_id)
    assert [(e["operation"], e["status"]) for e in seen["effects"]] == [
        ("mcp.list_tools", "waiting_for_approval")
    ]
    assert seen["protocolCalls"] == []  # not even initialize
    [pending] = cli("--output", "json", "approvals", "list", run_id).data["approvals"]
    assert pending["capability"] == "mcp.list_tools"
    assert cli("approvals", "approve", pending["approvalId"], "--reason", "ok").rc == 0
    # Listed once approved; the model call, the tool call and the answering model call are
    # then held in turn, as every call is under `always`.
    held = cli("--output", "json", "resume", run_id)
    assert held.rc == 3, held.stderr
    methods = [c["method"] for c in _seen(cli, run_id)["protocolCalls"]]
    assert methods.count("tools/list") == 1 and "tools/call" not in methods
    asked = []
    while held.rc == 3:
        [call] = cli("--output", "json", "approvals", "list", run_id).data["approvals"]
        asked.append(call["tool"] or "model")
        assert cli("approvals", "approve", call["approvalId"], "--reason", "ok").rc == 0
        held = cli("--output", "json", "resume", run_id)
    assert asked == ["model", "count_words", "model"]
    done = held
    assert done.rc == 0, done.stderr
    assert server.calls() == ["word_count"]
    methods = [c["method"] for c in _seen(cli, run_id)["protocolCalls"]]
    assert methods.count("tools/list") == 1  # the approved listing was reused, not resent
