"""An A2A peer whose Agent Card cannot be read, through the CLI: nothing is delegated, so the
task's ``retry`` may try again when a new attempt may find the card (no answer, HTTP 5xx),
not when the peer said it has none (another 4xx); the error is one line with the status.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.cli.localhttp import serving
from tests.conftest import Cli

WORKFLOW = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {{ name: a2a-card }}
spec:
  policy:
    approval: never
    networkAllowlist: [127.0.0.1]
    network: {{ allowPrivate: true, allowedPorts: [{port}] }}
  a2aPeers:
    reviewer: {{ cardUrl: "http://127.0.0.1:{port}/.well-known/agent-card.json" }}
  actions:
    review: {{ kind: a2a.delegate }}
  tasks:
    - id: ask
      uses: action:review
      with: {{ peer: reviewer, message: check the release notes }}
      retry: {{ maxAttempts: 2 }}
"""


class _Handler(BaseHTTPRequestHandler):
    server: _CardServer

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.server.fetches += 1
        body = b"no card here"
        self.send_response(self.server.status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class _CardServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, status: int) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.status = status
        self.fetches = 0


@pytest.fixture
def card_server(request: pytest.FixtureRequest) -> Iterator[_CardServer]:
    server = _CardServer(request.param)
    with serving(server):
        yield server


def _run(cli: Cli, tmp_path: Path, port: int) -> list[dict[str, Any]]:
    (tmp_path / "wf.yaml").write_text(WORKFLOW.format(port=port))
    done = cli("--output", "json", "run", "wf.yaml")
    assert done.rc == 4, (done.stdout, done.stderr)
    listed = cli("--output", "json", "effects", "list", done.error["error"]["runId"])
    assert listed.rc == 0, listed.stderr
    effects: list[dict[str, Any]] = listed.data["effects"]
    assert all(e["status"] == "failed" for e in effects), effects
    for effect in effects:  # one line, the status without httpx's "For more information…"
        assert "\n" not in effect["error"] and "mozilla" not in effect["error"], effect["error"]
    return effects


@pytest.mark.parametrize(
    ("card_server", "attempts"), [(503, 2), (404, 1)], indirect=["card_server"]
)
def test_a_card_answered_with_an_http_error(
    cli: Cli, tmp_path: Path, card_server: _CardServer, attempts: int
) -> None:
    effects = _run(cli, tmp_path, card_server.server_address[1])
    assert len(effects) == attempts == card_server.fetches  # 5xx retried, 404 not
    assert effects[0]["error"] == (
        f"A2A peer reviewer: cannot read its Agent Card at http://127.0.0.1:"
        f"{card_server.server_address[1]}/.well-known/agent-card.json: HTTP {card_server.status}"
    )


def test_a_refused_connection_to_the_card_is_retried(cli: Cli, tmp_path: Path) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    effects = _run(cli, tmp_path, port)
    assert len(effects) == 2  # nothing was delegated: the retry policy tries again
    assert "cannot read its Agent Card" in effects[0]["error"]
