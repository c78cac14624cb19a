"""A diagnostic's human form keeps its layout whatever the document quotes: a key holding a
line break is shown escaped, so it cannot split the header or fake a ``-->``/``help:`` line."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import Cli

WF = """apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: layout }
spec:
  actions: { put: { kind: builtin.assign } }
  tasks:
    - { id: a, uses: action:put, "x\\n  help: fake": 1 }
"""


def test_a_key_with_a_line_break_stays_on_the_diagnostic_s_lines(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "wf.yaml").write_text(WF, encoding="utf-8")
    before = sorted(p.name for p in tmp_path.iterdir())
    done = cli("check", "wf.yaml", "--color", "never")
    assert done.rc == 2
    lines = done.stderr.splitlines()
    assert (
        lines[0]
        == "error: invalid workflow (1 problem): unknown key `x\\n  help: fake` in `spec.tasks.0`"
    )
    assert lines[1].startswith("error[schema_violation]: unknown key `x\\n  help: fake`")
    assert lines[2].startswith("  --> wf.yaml:7:") and lines[2].endswith(
        "(spec.tasks.0.x\\n  help: fake)"
    )
    assert [line for line in lines if line.startswith("  help:")] == [lines[3]]
    assert "allowed keys" in lines[3] and len(lines) == 4
    # The JSON form keeps the key as written.
    data = cli("--output", "json", "check", "wf.yaml").error
    assert data["diagnostics"][0]["path"] == "spec.tasks.0.x\n  help: fake"
    assert sorted(p.name for p in tmp_path.iterdir()) == before
