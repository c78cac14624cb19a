"""A secret that straddles the cut of a quoted piece of output never leaks a part.

spec/cli.md §12: errors are redacted. A failed process's error quotes the end of its stderr,
a bad extension reply the start of its stdout, a provider's HTTP error the start of what it
answered (which may echo the key); each quote is cut from the redacted text,
so a secret that the cut splits is hidden whole, never shown as its own unmatched tail or
head — in the error envelope, in ``inspect`` or in the database.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.conftest import Cli
from tests.providers.fixtures import FixtureServer, Reply

PYTHON = os.path.basename(sys.executable)
SECRET = "Zq7xK9wPm3Rt5vLn2Bc8"

# Prints the secret then enough filler that the quoted end of stderr (400 characters) starts
# in the middle of it, and exits non-zero.
SHELL_SCRIPT = """\
import os, sys
sys.stderr.write(os.environ["TOK"] + "A" * 390)
sys.exit(3)
"""

# An extension whose reply is not JSON: the quoted start of stdout (200 characters) ends in
# the middle of the secret.
EXTENSION_SCRIPT = """\
import os, sys
if sys.argv[-1] == "--agentctl-handshake":
    sys.stdout.write("B" * 190 + os.environ["TOK"])
    sys.exit(0)
"""

HEAD = f"""\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: {{ name: cut }}
spec:
  policy: {{ approval: never, processAllowlist: [{PYTHON}], environmentAllowlist: [TOK] }}
"""

SHELL_WORKFLOW = (
    HEAD
    + f"""\
  actions:
    s: {{ kind: builtin.shell.exec, command: {sys.executable}, args: [s.py],
         env: {{ TOK: {{ env: TOK }} }} }}
  tasks: [ {{ id: t, uses: "action:s" }} ]
"""
)

EXTENSION_WORKFLOW = (
    HEAD
    + f"""\
  actions:
    ext:
      kind: extension.process
      command: {sys.executable}
      args: [ext.py]
      env: {{ TOK: {{ env: TOK }} }}
      idempotency: idempotent
      protocolVersion: agentctl.dev/process-extension/v1
      inputSchema: {{ type: object }}
      outputSchema: {{ type: object }}
      capabilities: [x]
  tasks: [ {{ id: t, uses: "action:ext" }} ]
"""
)


def _pieces(secret: str, size: int = 4) -> list[str]:
    return [secret[i : i + size] for i in range(len(secret) - size + 1)]


def _assert_no_piece(
    cli: Cli,
    tmp_path: Path,
    workflow: str,
    script: tuple[str, str],
    env: dict[str, str] | None = None,
) -> str:
    (tmp_path / script[0]).write_text(script[1], encoding="utf-8")
    (tmp_path / "wf.yaml").write_text(workflow, encoding="utf-8")
    done = cli("--output", "json", "run", "wf.yaml", "--db", "r.db", env=env or {"TOK": SECRET})
    assert done.rc == 4, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    run = done.error["error"]["runId"]
    seen = cli("--output", "json", "inspect", run, "--db", "r.db")
    assert seen.rc == 0, seen.stderr
    stored = [p.read_bytes().decode("latin-1") for p in tmp_path.glob("r.db*") if p.is_file()]
    for shown in (done.stdout, done.stderr, seen.stdout, *stored):
        leaked = [piece for piece in _pieces(SECRET) if piece in shown]
        assert not leaked, leaked
    message: str = done.error["error"]["message"]
    return message


def test_the_quoted_end_of_stderr_hides_a_secret_the_cut_splits(cli: Cli, tmp_path: Path) -> None:
    message = _assert_no_piece(cli, tmp_path, SHELL_WORKFLOW, ("s.py", SHELL_SCRIPT))
    assert message.startswith("run failed: t: process exited with code 3; stderr ends: ")
    assert message.endswith("A" * 390)


def test_the_quoted_start_of_a_bad_reply_hides_a_secret_the_cut_splits(
    cli: Cli, tmp_path: Path
) -> None:
    message = _assert_no_piece(cli, tmp_path, EXTENSION_WORKFLOW, ("ext.py", EXTENSION_SCRIPT))
    assert "its reply is not one JSON object; it said: 'BBBB" in message


PROVIDER_WORKFLOW = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: { name: cutkey }
spec:
  policy:
    approval: never
    networkAllowlist: [127.0.0.1]
    network: { allowedPorts: [PORT], allowPrivate: true }
  providers:
    main: { kind: openai, endpoint: "http://127.0.0.1:PORT/v1/responses" }
  agents:
    a: { provider: main, model: m1, instructions: Answer. }
  tasks:
    - { id: ask, uses: "agent:a", with: { prompt: hello } }
"""

# "provider main: HTTP 401: " is 25 characters: the message is cut at 2,000 and a body that
# is not JSON at 500, each in the middle of the key the answer echoes.
ECHOED = {
    "error-message": Reply(
        status=401, body={"error": {"message": "C" * (2000 - 25 - 10) + SECRET}}
    ),
    "page": Reply(status=401, raw=("D" * 490 + SECRET).encode(), content_type="text/html"),
}


@pytest.mark.parametrize("answer", sorted(ECHOED))
def test_a_provider_error_that_echoes_the_key_hides_it_where_the_cut_splits_it(
    answer: str, cli: Cli, tmp_path: Path
) -> None:
    server = FixtureServer()
    try:
        server.script(ECHOED[answer])
        text = PROVIDER_WORKFLOW.replace("PORT", str(server.port))
        message = _assert_no_piece(
            cli, tmp_path, text, ("unused.txt", ""), env={"OPENAI_API_KEY": SECRET}
        )
    finally:
        server.close()
    assert "provider main: HTTP 401: " in message
