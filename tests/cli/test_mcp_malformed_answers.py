"""An MCP server that answers malformed, through the CLI: each error is one line in our words.

The server is a bare Streamable HTTP endpoint on 127.0.0.1 (in this process) that answers
``initialize`` or ``tools/call`` with something the SDK cannot take: an initialize result of
the wrong shape, a tool result whose content is no list of content items, a body that is not
JSON, an answer cut mid-body. The effect keeps its outcome (failed before the call left,
uncertain after), and its error names what was wrong — which field, what was expected — never
the SDK's exception class or pydantic's error layout and documentation links.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from tests.cli.localhttp import ModeServer, assert_plain, failed_run, serving
from tests.cli.test_mcp_http_errors import WORKFLOW
from tests.conftest import Cli

INITIALIZED = {
    "protocolVersion": "2025-11-25",
    "capabilities": {"tools": {}},
    "serverInfo": {"name": "bad", "version": "1"},
}
# mode: (answer to initialize, answer to tools/call); a dict is a JSON-RPC result, bytes a
# raw body, "cut" a body that stops after 11 of its 500 announced bytes.
MODES: dict[str, tuple[Any, Any]] = {
    "initialize_shape": ({"protocolVersion": 5, "capabilities": "x"}, None),
    "content_not_a_list": (INITIALIZED, {"content": "hello"}),
    "content_item_unknown": (INITIALIZED, {"content": [{"type": "bogus"}]}),
    "result_not_an_object": (INITIALIZED, "hello"),
    "not_json": (INITIALIZED, b"garbage{"),
    "cut": (INITIALIZED, "cut"),
}
EXPECTED = {
    "initialize_shape": (
        "failed",
        "MCP server notes: the initialize answer is malformed: capabilities: should be an "
        "object; protocolVersion: should be a string; serverInfo: missing",
    ),
    "content_not_a_list": (
        "uncertain",
        "MCP server notes: tools/call was sent, then the tools/call answer is malformed: "
        "content: should be a list; it may have run",
    ),
    "content_item_unknown": (
        "uncertain",
        "MCP server notes: tools/call was sent, then the tools/call answer is malformed: "
        "content.0: matches none of the accepted shapes; it may have run",
    ),
    "result_not_an_object": (
        "uncertain",
        "MCP server notes: tools/call was sent, then the tools/call answer is not a JSON-RPC "
        "response: result: should be an object; it may have run",
    ),
    "not_json": (
        "uncertain",
        "MCP server notes: tools/call was sent, then the tools/call answer is not JSON; "
        "it may have run",
    ),
    "cut": (
        "uncertain",
        "MCP server notes: tools/call was sent, then the connection closed mid-answer "
        "(11 of 500 bytes received); it may have run",
    ),
}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: ModeServer

    def log_message(self, *args: Any) -> None:
        pass

    def _answer(self, code: int, body: bytes = b"", length: int | None = None) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Mcp-Session-Id", "session-1")
        self.send_header("Content-Length", str(len(body) if length is None else length))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._answer(405)

    def do_DELETE(self) -> None:
        self._answer(200)

    def do_POST(self) -> None:
        message = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if "id" not in message:
            return self._answer(202)
        init, call = MODES[self.server.mode]
        answer = init if message["method"] == "initialize" else call
        if answer == "cut":
            self._answer(200, b'{"jsonrpc":', length=500)
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
            return None
        if isinstance(answer, bytes):
            return self._answer(200, answer)
        body = {"jsonrpc": "2.0", "id": message["id"], "result": answer}
        return self._answer(200, json.dumps(body).encode())


@pytest.fixture(params=sorted(MODES))
def bad(request: pytest.FixtureRequest) -> Iterator[ModeServer]:
    server = ModeServer(_Handler, request.param)
    with serving(server):
        yield server


def test_a_malformed_answer_is_one_line_in_our_words(
    cli: Cli, tmp_path: Path, bad: ModeServer
) -> None:
    done, seen = failed_run(cli, tmp_path, WORKFLOW.format(port=bad.port))
    [effect] = seen["effects"]
    status, message = EXPECTED[bad.mode]
    assert (effect["status"], effect["error"]) == (status, message)
    details = [c["detail"] or "" for c in seen["protocolCalls"]]
    shown = [
        done.error["error"]["message"],
        *details,
        *(t["error"] or "" for t in seen["tasks"]),
    ]
    assert_plain(shown, ("MCPError", "ValidationError", "validation error", "pydantic", "[type="))
