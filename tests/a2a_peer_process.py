"""The example A2A peer (``examples/peers/a2a_peer.py``, a2a-sdk's server parts) in a subprocess
on 127.0.0.1, with the logs tests count: messages received and HTTP requests served."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import EXAMPLES

PEER_SCRIPT = EXAMPLES / "peers" / "a2a_peer.py"


@dataclass
class Peer:
    port: int
    received: Path  # one JSON line per message: {"messageId": ...}
    requests: Path  # one JSON line per HTTP request: {"method": ..., "path": ...}
    release: Path  # tasks complete only once this file exists (with ``hold``)

    def let_tasks_finish(self) -> None:
        self.release.touch()

    @staticmethod
    def lines(path: Path) -> list[dict[str, str]]:
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines()]


@contextmanager
def running_peer(
    folder: Path,
    delay: float,
    script: Path = PEER_SCRIPT,
    *,
    hold: bool = False,
    port: int = 0,
) -> Iterator[Peer]:
    """The peer on a free port (or ``port``: a peer restarted where the last one listened,
    its in-memory tasks forgotten); each task it starts completes after ``delay`` seconds —
    and, with ``hold``, not before ``Peer.let_tasks_finish``."""
    received, requests = folder / "received.jsonl", folder / "requests.jsonl"
    release = folder / "release-tasks"
    argv = [sys.executable, str(script), "--port", str(port), "--delay", str(delay)]
    argv += ["--received", str(received), "--requests", str(requests)]
    argv += ["--release", str(release)] if hold else []
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())  # printed once it listens
        yield Peer(port, received, requests, release)
    finally:
        proc.kill()
        proc.wait()
