"""A bare HTTP server on 127.0.0.1 in the test's own process, for peers that misbehave on
purpose (malformed answers, HTTP errors), and the checks their tests share."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.conftest import Cli, CliResult


class ModeServer(ThreadingHTTPServer):
    """A server whose handler answers as ``mode`` says (the test's parameter)."""

    daemon_threads = True

    def __init__(self, handler: type[BaseHTTPRequestHandler], mode: Any) -> None:
        super().__init__(("127.0.0.1", 0), handler)
        self.mode = mode

    @property
    def port(self) -> int:
        return int(self.server_address[1])


@contextlib.contextmanager
def serving(server: ThreadingHTTPServer) -> Iterator[None]:
    """``server`` answering on its own thread until the block ends, then closed."""
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()


def failed_run(cli: Cli, tmp_path: Path, workflow: str) -> tuple[CliResult, Any]:
    """``run`` of ``workflow`` failing (exit 4), and the ``inspect`` data of its run."""
    (tmp_path / "wf.yaml").write_text(workflow)
    done = cli("--output", "json", "run", "wf.yaml")
    assert done.rc == 4, (done.stdout, done.stderr)
    seen = cli("--output", "json", "inspect", done.error["error"]["runId"])
    assert seen.rc == 0, seen.stderr
    return done, seen.data


def assert_plain(texts: Iterable[str], internals: Iterable[str]) -> None:
    """Each text one line, naming none of ``internals`` (library class names, layouts)."""
    words = tuple(internals)
    for text in texts:
        assert "\n" not in text, text
        for internal in words:
            assert internal not in text, text
