"""The example MCP server (examples/mcp/notes_server.py) as a test fixture.

It runs as a real subprocess on 127.0.0.1 (a free port it picks itself and writes to a file)
and appends every ``tools/call`` it receives to ``calls.txt``, so tests count what reached it,
and each call's ``params._meta`` to ``meta.jsonl`` (``NotesServer.metas``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import EXAMPLES

SERVER = EXAMPLES / "mcp" / "notes_server.py"
TOKEN = "notes-s3cret-token"


@dataclass
class NotesServer:
    proc: subprocess.Popen[bytes]
    port: int
    calls_file: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def calls(self) -> list[str]:
        if not self.calls_file.exists():
            return []
        return self.calls_file.read_text(encoding="utf-8").split()

    def metas(self) -> list[dict[str, object]]:
        """Each ``word_count``/``append_note`` call's ``{"tool", "meta"}``, in order."""
        found = self.calls_file.with_name("meta.jsonl")
        if not found.exists():
            return []
        return [json.loads(line) for line in found.read_text(encoding="utf-8").splitlines()]

    def wait_for_call(self, tool: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while tool not in self.calls() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert tool in self.calls(), f"the server never received {tool}"

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()


def start_server(where: Path, *, token: bool = False) -> NotesServer:
    where.mkdir(parents=True, exist_ok=True)
    port_file, calls = where / "port", where / "calls.txt"
    argv = [sys.executable, str(SERVER), "--port-file", str(port_file), "--calls", str(calls)]
    argv += ["--meta", str(where / "meta.jsonl")]
    env = dict(os.environ)
    if token:
        argv += ["--token-env", "NOTES_TOKEN"]
        env["NOTES_TOKEN"] = TOKEN
    proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not port_file.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError("the MCP example server did not start")
        time.sleep(0.05)
    return NotesServer(proc, int(port_file.read_text(encoding="utf-8")), calls)
