"""An A2A peer that answers malformed, through the CLI: each error is one line in our words.

A bare peer on 127.0.0.1 (in this process) serves an Agent Card that is not JSON, or a valid
card and then a ``SendMessage`` answer the SDK cannot read: a task whose id is a number, an
HTTP 500, a task in a state A2A does not name. The effect keeps its outcome (failed before the
message left, uncertain after) and keeps its protocol rows; its error says what was wrong —
never "internal worker error", an SDK class name, httpx's doc links or a Python repr.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from tests.cli.localhttp import ModeServer, assert_plain, failed_run, serving
from tests.conftest import Cli

WORKFLOW = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {{ name: a2a-malformed }}
spec:
  policy:
    approval: never
    networkAllowlist: [127.0.0.1]
    network: {{ allowPrivate: true, allowedPorts: [{port}] }}
  a2aPeers:
    reviewer:
      cardUrl: "http://127.0.0.1:{port}/.well-known/agent-card.json"
      maxPolls: 2
      pollIntervalMs: 10
  actions:
    review: {{ kind: a2a.delegate }}
  tasks:
    - {{ id: ask, uses: action:review, with: {{ peer: reviewer, message: check }} }}
"""
WORKING = {"id": "task-1", "contextId": "ctx-1", "status": {"state": "TASK_STATE_WORKING"}}
EXPECTED = {
    "card_not_json": (
        "failed",
        "cannot read its Agent Card at http://127.0.0.1:{port}/.well-known/agent-card.json: "
        "the answer is not JSON",
    ),
    "task_id_a_number": (
        "uncertain",
        "SendMessage answered malformed: field id: expected string or bytes-like object, got 'int'",
    ),
    "http_500": ("uncertain", "SendMessage failed: HTTP 500"),
    "unknown_state": ("uncertain", "GetTask answered malformed: unknown task state 12"),
}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: ModeServer

    def log_message(self, *args: Any) -> None:
        pass

    def _answer(self, code: int, body: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.server.mode == "card_not_json":
            return self._answer(200, b"<html>no card</html>")
        url = f"http://127.0.0.1:{self.server.server_address[1]}/a2a"
        card = {
            "name": "reviewer",
            "description": "d",
            "version": "1.0.0",
            "supportedInterfaces": [
                {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
            ],
            "capabilities": {},
            "defaultInputModes": ["text/plain"],
            "defaultOutputModes": ["text/plain"],
            "skills": [],
        }
        return self._answer(200, json.dumps(card).encode())

    def do_POST(self) -> None:
        message = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        mode = self.server.mode
        if mode == "http_500":
            return self._answer(500, b"internal")
        result: Any = {"task": WORKING}
        if mode == "task_id_a_number":
            result = {"task": {**WORKING, "id": 5}}
        if message["method"] == "GetTask":
            result = {**WORKING, "status": {"state": 12}}
        body = {"jsonrpc": "2.0", "id": message["id"], "result": result}
        return self._answer(200, json.dumps(body).encode())


@pytest.fixture(params=sorted(EXPECTED))
def peer(request: pytest.FixtureRequest) -> Iterator[ModeServer]:
    server = ModeServer(_Handler, request.param)
    with serving(server):
        yield server


def test_a_malformed_answer_is_one_line_in_our_words(
    cli: Cli, tmp_path: Path, peer: ModeServer
) -> None:
    port = peer.port
    done, seen = failed_run(cli, tmp_path, WORKFLOW.format(port=port))
    [effect] = seen["effects"]
    status, said = EXPECTED[peer.mode]
    assert effect["status"] == status, effect
    assert said.format(port=port) in effect["error"], effect["error"]
    calls = seen["protocolCalls"]
    assert calls and calls[-1]["detail"] and said.format(port=port) in calls[-1]["detail"]
    shown = [done.error["error"]["message"], effect["error"], *(c["detail"] or "" for c in calls)]
    assert_plain(shown, ("internal worker error", "Error:", "Error(", "mozilla", "For more"))
