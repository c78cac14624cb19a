"""Which HTTP status an MCP error reports, through the CLI, against a bare Streamable HTTP
server on 127.0.0.1 (in this process) that refuses the SDK's GET stream with 405, as servers
without server-initiated messages may.

Only the status of the POST that carried the failing request belongs in the error: the GET's
405 used to be appended to whatever failed next (a JSON-RPC error answered at HTTP 200, or
a tools/call answered 500), varying between runs with the order the two exchanges ended in.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Cli

WORKFLOW = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {{ name: mcp-errors }}
spec:
  policy:
    approval: never
    networkAllowlist: [127.0.0.1]
    network: {{ allowPrivate: true, allowedPorts: [{port}] }}
  mcpServers:
    notes: {{ url: "http://127.0.0.1:{port}/mcp", timeoutSeconds: 30 }}
  actions:
    call: {{ kind: mcp.call }}
  tasks:
    - {{ id: c, uses: action:call, with: {{ server: notes, tool: t, arguments: {{}} }} }}
"""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, *args: Any) -> None:
        pass

    def _answer(self, code: int, body: bytes = b"") -> None:
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Mcp-Session-Id", "session-1")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # the SDK's server-sent event stream: not offered
        self.server.gets.set()
        self._answer(405)

    def do_DELETE(self) -> None:
        self._answer(200)

    def do_POST(self) -> None:
        message = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if "id" not in message:  # a notification
            return self._answer(202)
        if message["method"] == "initialize":
            info = {"name": "bare", "version": "1"}
            result = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}}
            return self._reply(message, {**result, "serverInfo": info})
        # The SDK opens its GET stream once initialized: let its 405 come first.
        self.server.gets.wait(10)
        if self.server.mode == "http500":
            return self._answer(500, b"internal")
        error = {"code": -32602, "message": "Unknown tool: t"}
        body = {"jsonrpc": "2.0", "id": message["id"], "error": error}
        return self._answer(200, json.dumps(body).encode())

    def _reply(self, message: dict[str, Any], result: dict[str, Any]) -> None:
        body = {"jsonrpc": "2.0", "id": message["id"], "result": result}
        self._answer(200, json.dumps(body).encode())


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, mode: str) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.mode = mode
        self.gets = threading.Event()


@pytest.fixture(params=["http500", "rpc_error"])
def bare(request: pytest.FixtureRequest) -> Iterator[_Server]:
    server = _Server(request.param)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def test_an_error_reports_the_status_of_its_own_request(
    cli: Cli, tmp_path: Path, bare: _Server
) -> None:
    (tmp_path / "wf.yaml").write_text(WORKFLOW.format(port=bare.server_address[1]))
    done = cli("--output", "json", "run", "wf.yaml")
    assert done.rc == 4, (done.stdout, done.stderr)
    listed = cli("--output", "json", "effects", "list", done.error["error"]["runId"])
    [effect] = listed.data["effects"]
    assert bare.gets.is_set()  # the GET was refused before the call failed
    assert "HTTP 405" not in effect["error"], effect["error"]
    if bare.mode == "http500":
        assert "answered HTTP 500" in effect["error"], effect["error"]
    else:  # answered at HTTP 200: no status to report, only the server's words
        assert "Unknown tool: t" in effect["error"] and "HTTP" not in effect["error"]
