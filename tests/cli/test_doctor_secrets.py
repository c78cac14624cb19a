"""``agentctl doctor FILE`` and the secret references a run resolves only as a task starts:
an action's ``env`` and ``policy.network.customCa`` (presence only, never a value, no helper)."""

from __future__ import annotations

import os
from pathlib import Path

from tests.conftest import Cli

TOKEN, EMPTY, CA = "DOCTOR_TEST_TOKEN", "DOCTOR_TEST_EMPTY", "DOCTOR_TEST_CA"
assert not any(os.environ.get(name) for name in (TOKEN, EMPTY, CA)), "set in this environment"

ACTION_ENV = f"""\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {{ name: action-env }}
spec:
  policy:
    approval: never
    processAllowlist: [sh]
    environmentAllowlist: [{TOKEN}, {EMPTY}, DOCTOR_TEST_UNUSED]
    secretFileRoots: [secrets]
    secretProcessAllowlist: [helper.sh]
  actions:
    show:
      kind: builtin.shell.exec
      command: /bin/sh
      args: ["-c", "echo ${{#TOKEN}}"]
      env:
        TOKEN: {{ env: {TOKEN} }}
        BLANK: {{ env: {EMPTY} }}
        FILED: {{ file: secrets/token.txt }}
        HELPED: {{ process: {{ command: HELPER }} }}
    spare:
      kind: builtin.shell.exec
      command: /bin/sh
      env: {{ OTHER: {{ env: DOCTOR_TEST_UNUSED }} }}
  tasks:
    - {{ id: first, uses: "action:show" }}
    - {{ id: second, uses: "action:show" }}
"""


def _checks(data: dict[str, object]) -> dict[str, dict[str, object]]:
    checks = data["checks"]
    assert isinstance(checks, list)
    return {str(c["check"]): c for c in checks if str(c["check"]).startswith("credential ")}


def test_an_actions_env_references_are_checked_by_presence(cli: Cli, tmp_path: Path) -> None:
    """A missing variable or file an action's ``env`` names is not ready (exit 6) before any
    state: without doctor it would fail the task once the run and its database exist."""
    marker = tmp_path / "helper-ran"
    helper = tmp_path / "helper.sh"
    helper.write_text(f"#!/bin/sh\ntouch {marker}\necho value\n")
    helper.chmod(0o755)
    wf = tmp_path / "wf.yaml"
    wf.write_text(ACTION_ENV.replace("HELPER", str(helper)))
    empty_only = {EMPTY: ""}  # set but empty: the task passes it on as it is
    done = cli("--output", "json", "doctor", str(wf), env=empty_only)
    assert done.rc == 6, done.stderr
    checks = _checks(done.data)
    assert checks == {
        "credential action show env.BLANK": {
            "check": "credential action show env.BLANK",
            "available": True,
            "status": "present",
            "detail": f"env {EMPTY}",
        },
        "credential action show env.FILED": {
            "check": "credential action show env.FILED",
            "available": False,
            "status": "missing",
            "detail": "file secrets/token.txt",
        },
        "credential action show env.TOKEN": {
            "check": "credential action show env.TOKEN",
            "available": False,
            "status": "missing",
            "detail": f"env {TOKEN}",
        },
    }
    helpers = [u for u in done.data["unverified"] if u["what"] == "credential helper"]
    assert helpers == [
        {
            "what": "credential helper",
            "target": f"process {helper}",
            "reason": "a {process} helper runs only when the run needs the value",
        }
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["helper.sh", "wf.yaml"]
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "token.txt").write_text("from-a-file\n")
    ready = cli("--output", "json", "doctor", str(wf), env={**empty_only, TOKEN: "tok-SECRET"})
    assert ready.rc == 0, ready.stdout
    assert all(c["available"] for c in _checks(ready.data).values())
    assert "tok-SECRET" not in ready.stdout and "from-a-file" not in ready.stdout
    assert not marker.exists()  # the helper never ran


CUSTOM_CA = f"""\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {{ name: custom-ca }}
spec:
  policy:
    approval: never
    environmentAllowlist: [{CA}, {TOKEN}]
    network: {{ customCa: {{ env: {CA} }} }}
  providers:
    local: {{ kind: fake }}
    remote:
      kind: openai
      endpoint: "https://api.example.test/v1"
      credential: {{ env: {TOKEN} }}
  agents:
    offline: {{ provider: local, model: m, instructions: hi }}
    online: {{ provider: remote, model: m, instructions: hi }}
  tasks:
    - {{ id: ask, uses: "agent:AGENT" }}
"""


def test_custom_ca_is_checked_when_a_task_calls_an_endpoint(cli: Cli, tmp_path: Path) -> None:
    """Every TLS connection of a provider, MCP server or A2A peer needs ``customCa``; a fake
    provider makes none, so a plan of only fake calls does not need it."""
    wf = tmp_path / "wf.yaml"
    wf.write_text(CUSTOM_CA.replace("AGENT", "online"))
    done = cli("--output", "json", "doctor", str(wf), env={TOKEN: "k"})
    assert done.rc == 6, done.stderr
    assert _checks(done.data)["credential policy.network customCa"] == {
        "check": "credential policy.network customCa",
        "available": False,
        "status": "missing",
        "detail": f"env {CA}",
    }
    ready = cli("--output", "json", "doctor", str(wf), env={TOKEN: "k", CA: "pem"})
    assert ready.rc == 0, ready.stdout
    wf.write_text(CUSTOM_CA.replace("AGENT", "offline"))
    offline = cli("--output", "json", "doctor", str(wf))
    assert offline.rc == 0, offline.stdout
    assert _checks(offline.data) == {}
