"""An explicit port 0 in an endpoint is refused, never read as the scheme's default port.

spec/dsl.md §7: `allowedPorts` holds no 0, and an empty list admits only the scheme's default
port (spec/cli.md §12). `https://host:0/` names port 0, which no rule admits: the pre-flight
refuses it like any other port outside the policy (exit 3, nothing created), where it used to
be judged as port 443 (or 80) because 0 is falsy.
"""

from __future__ import annotations

from pathlib import Path

import pytest

WORKFLOW = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: port-zero }
spec:
  policy:
    approval: never
    networkAllowlist: [127.0.0.1]
    network: { allowPrivate: true%s }
  providers: { main: { kind: openai, endpoint: "%s://127.0.0.1:0/v1/responses" } }
  agents: { a: { provider: main, model: m, instructions: hi, maxTurns: 1 } }
  tasks: [ { id: ask, uses: "agent:a", with: { prompt: hi } } ]
"""


@pytest.mark.parametrize("scheme", ["http", "https"])
@pytest.mark.parametrize("ports", ["", ", allowedPorts: [80, 443]"])
def test_port_zero_is_refused_before_any_state(  # type: ignore[no-untyped-def]
    scheme: str, ports: str, cli, write_workflow, tmp_path: Path
) -> None:
    wf = write_workflow(WORKFLOW % (ports, scheme))
    done = cli("--output", "json", "run", str(wf), env={"OPENAI_API_KEY": "sk-zero"})
    assert done.rc == 3, (done.stdout, done.stderr)
    error = done.error["error"]
    assert error["runId"] is None
    assert "port 0" in error["message"], error["message"]
    assert [p for p in tmp_path.rglob("*") if p.suffix in (".db", ".db-wal")] == []
