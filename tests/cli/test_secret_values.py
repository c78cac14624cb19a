"""Resolved secret values as a user meets them through the CLI (spec/cli.md §12).

- A secret a process or model answers with *as an object key* is redacted there as in a value:
  it reaches neither stdout nor the database.
- A credential an HTTP header cannot carry (empty, whitespace around it, non-ASCII) is refused
  where it is resolved — exit 4, naming its reference and never its value, nothing sent, no
  retry — instead of failing at dispatch as a transport error retried under the task's policy.
  An empty secret file is missing, as an empty variable is: ``run`` refuses it before any
  state (exit 6) and ``doctor`` reports it.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Cli, CliResult
from tests.providers.agent_server import AgentServer

PYTHON = os.path.basename(sys.executable)
TOKEN = "hunter2-secret-value"

EXTENSION = """\
import json, os, sys
P = "agentctl.dev/process-extension/v1"
S = {"type": "object", "properties": {}, "additionalProperties": False}
if sys.argv[-1] == "--agentctl-handshake":
    print(json.dumps({"protocolVersion": P, "inputSchema": S, "outputSchema": {"type": "object"},
                      "capabilities": ["x"]}))
else:
    req = json.load(sys.stdin)
    tok = os.environ["TOK"]
    out = {"value": tok, tok: "key", "nested": {"at-" + tok: [tok]}}
    print(json.dumps({"protocolVersion": P, "effectId": req["effectId"], "output": out}))
"""

EXTENSION_WORKFLOW = f"""\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: {{ name: leak }}
spec:
  policy: {{ approval: never, processAllowlist: [{PYTHON}], environmentAllowlist: [TOK] }}
  actions:
    ext:
      kind: extension.process
      command: {sys.executable}
      args: [ext.py]
      env: {{ TOK: {{ env: TOK }} }}
      idempotency: idempotent
      protocolVersion: agentctl.dev/process-extension/v1
      inputSchema: {{ type: object, properties: {{}}, additionalProperties: false }}
      outputSchema: {{ type: object }}
      capabilities: [x]
  tasks:
    - {{ id: t, uses: "action:ext" }}
"""


def _state_files(root: Path) -> list[str]:
    """Every database file under ``root`` (none on PostgreSQL), as text."""
    return [p.read_bytes().decode("latin-1") for p in root.glob("r.db*") if p.is_file()]


def test_a_secret_an_extension_answers_with_as_a_key_is_redacted_from_output_and_state(
    cli: Cli, tmp_path: Path
) -> None:
    (tmp_path / "ext.py").write_text(EXTENSION, encoding="utf-8")
    (tmp_path / "wf.yaml").write_text(EXTENSION_WORKFLOW, encoding="utf-8")
    done = cli("--output", "json", "run", "wf.yaml", "--db", "r.db", env={"TOK": TOKEN})
    assert done.rc == 0, done.stderr
    assert done.data["output"]["t"] == {
        "value": "[REDACTED]",
        "[REDACTED]": "key",
        "nested": {"at-[REDACTED]": ["[REDACTED]"]},
    }
    seen = cli("--output", "json", "inspect", done.data["runId"], "--db", "r.db")
    events = cli("--output", "json", "effects", "list", done.data["runId"], "--db", "r.db")
    assert seen.rc == 0 and events.rc == 0, seen.stderr + events.stderr
    for shown in (done.stdout, done.stderr, seen.stdout, events.stdout, *_state_files(tmp_path)):
        assert "hunter2" not in shown


PROVIDER_WORKFLOW = f"""\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {{ name: creds }}
spec:
  policy:
    approval: never
    networkAllowlist: [127.0.0.1]
    network: {{ allowedPorts: [PORT], allowPrivate: true }}
    secretFileRoots: [keys]
    secretProcessAllowlist: [{PYTHON}]
  providers:
    main: {{ kind: openai, endpoint: "http://127.0.0.1:PORT/v1/responses"CREDENTIAL }}
  agents:
    a: {{ provider: main, model: m1, instructions: Answer. }}
  tasks:
    - {{ id: ask, uses: "agent:a", with: {{ prompt: hello }}, retry: {{ maxAttempts: 3 }} }}
"""

FILE_KEY = ", credential: { file: keys/k.txt }"
HELPER_KEY = f', credential: {{ process: {{ command: {sys.executable}, args: [-c, "print()"] }} }}'


@pytest.fixture
def server() -> Iterator[AgentServer]:
    srv = AgentServer()
    yield srv
    srv.close()


def _provider_run(
    cli: Cli, tmp_path: Path, server: AgentServer, credential: str, env: dict[str, str]
) -> CliResult:
    text = PROVIDER_WORKFLOW.replace("PORT", str(server.port)).replace("CREDENTIAL", credential)
    (tmp_path / "wf.yaml").write_text(text, encoding="utf-8")
    (tmp_path / "keys").mkdir(exist_ok=True)
    return cli("--output", "json", "run", "wf.yaml", "--db", "r.db", env=env)


@pytest.mark.parametrize(
    ("credential", "env", "file", "source", "why"),
    [
        (FILE_KEY, {}, "\n", "file:keys/k.txt", "is empty or only whitespace"),
        (FILE_KEY, {}, "  \n", "file:keys/k.txt", "is empty or only whitespace"),
        (HELPER_KEY, {}, None, f"process:{sys.executable}", "is empty or only whitespace"),
        ("", {"OPENAI_API_KEY": "sk-x-abcdef "}, None, "env:OPENAI_API_KEY", "ends with"),
        ("", {"OPENAI_API_KEY": " sk-x-abcdef"}, None, "env:OPENAI_API_KEY", "begins or"),
        ("", {"OPENAI_API_KEY": "sk-ééé-abcdef"}, None, "env:OPENAI_API_KEY", "outside ASCII"),
        ("", {"OPENAI_API_KEY": " "}, None, "env:OPENAI_API_KEY", "is empty or only whitespace"),
    ],
    ids=[
        "file-newline",
        "file-spaces",
        "helper-empty-line",
        "trailing",
        "leading",
        "non-ascii",
        "space",
    ],
)
def test_a_credential_no_header_can_carry_is_refused_where_resolved_and_never_sent(  # type: ignore[no-untyped-def]
    cli: Cli, tmp_path: Path, server: AgentServer, credential, env, file, source, why
) -> None:
    """Not a transport failure retried three times: exit 4 at once, the reference named, the
    value in no message and no state, and the message whole (a whitespace value redacted
    from it turned every space into ``[REDACTED]``)."""
    if file is not None:
        (tmp_path / "keys").mkdir()
        (tmp_path / "keys" / "k.txt").write_text(file, encoding="utf-8")
    done = _provider_run(cli, tmp_path, server, credential, env)
    assert done.rc == 4, (done.stdout, done.stderr)
    message = done.error["error"]["message"]
    assert source in message and why in message and "correct it at its source" in message
    assert "[REDACTED]" not in message and "task ask: main: credential:" in message, message
    assert "Error" not in message  # no LocalProtocolError, UnicodeEncodeError
    assert server.seen == []
    run_id = done.error["error"]["runId"]
    listed = cli("--output", "json", "effects", "list", run_id, "--db", "r.db")
    assert listed.rc == 0, listed.stderr
    assert [e for e in listed.data["effects"] if e["operation"] == "openai"] == []
    seen = cli("--output", "json", "inspect", run_id, "--db", "r.db")
    assert [(t["taskId"], t["attempt"]) for t in seen.data["tasks"]] == [("ask", 1)]  # no retry
    for shown in (done.stdout, done.stderr, *_state_files(tmp_path)):
        assert "abcdef" not in shown


def test_an_empty_secret_file_is_missing_before_any_state_and_in_doctor(
    cli: Cli, tmp_path: Path, server: AgentServer
) -> None:
    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / "k.txt").write_bytes(b"")
    done = _provider_run(cli, tmp_path, server, FILE_KEY, {})
    assert done.rc == 6, (done.stdout, done.stderr)
    message = done.error["error"]["message"]
    assert "provider main: credential (file keys/k.txt) is not available" in message
    assert "nothing was created" in message and done.error["error"]["runId"] is None
    assert not list(tmp_path.glob("r.db*")) and server.seen == []
    doctor = cli("--output", "json", "doctor", "wf.yaml")
    assert doctor.rc == 6, (doctor.stdout, doctor.stderr)
    [check] = [c for c in doctor.data["checks"] if c["check"] == "credential main"]
    assert (check["available"], check["status"], check["detail"]) == (
        False,
        "missing",
        "file keys/k.txt",
    )
    checked = cli("--output", "json", "auth", "check", "wf.yaml")  # a report: exit 0
    assert checked.rc == 0, checked.stderr
    assert checked.data[0]["credential"]["availability"] == "missing", json.dumps(checked.data)


SHELL_WORKFLOW = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: { name: pad }
spec:
  policy: { approval: never, processAllowlist: [sh], environmentAllowlist: [PAD] }
  actions:
    s:
      kind: builtin.shell.exec
      command: /bin/sh
      args: ["-c", "echo hi there; echo to err >&2; exit 3"]
      env: { PAD: { env: PAD } }
  tasks:
    - { id: t, uses: action:s }
"""


def test_a_whitespace_env_secret_does_not_garble_output_or_errors(cli: Cli, tmp_path: Path) -> None:
    """A process may be given a value of spaces; redacting it would turn every space of its
    output and of the run's error into ``[REDACTED]``."""
    (tmp_path / "wf.yaml").write_text(SHELL_WORKFLOW, encoding="utf-8")
    done = cli("--output", "json", "run", "wf.yaml", "--db", "r.db", env={"PAD": " "})
    assert done.rc == 4, (done.stdout, done.stderr)
    expected = "run failed: t: process exited with code 3; stderr ends: to err"
    assert done.error["error"]["message"] == expected
    seen = cli("--output", "json", "inspect", done.error["error"]["runId"], "--db", "r.db")
    [task] = seen.data["tasks"]
    assert (task["output"]["stdout"], task["output"]["stderr"]) == ("hi there\n", "to err\n")
