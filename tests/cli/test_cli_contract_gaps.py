"""Small gaps between our CLI and spec/cli.md that scripts written for the original hit.

- ``runs list --state S`` with an unknown state is a usage error (exit 2) naming the states,
  before any state is read or created; it used to list nothing and exit 0;
- ``version``'s ``Version`` carries every key the spec names (``rust`` is null: no Rust
  toolchain built this program), plus ``python``;
- a workflow's ``varsFiles`` and ``instructionsFile`` stay in the workflow's directory: a
  ``..`` segment, an absolute path elsewhere or a symlink out is a ``policy_denied``
  diagnostic (exit 2) before anything is read (the original's docs/VARIABLES.md).
"""

from __future__ import annotations

import json
import platform
from pathlib import Path

import pytest

from tests.conftest import Cli, CliResult

PURE = """apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: pure }
spec:
  actions: { put: { kind: builtin.assign } }
  tasks:
    - { id: one, uses: "action:put", with: { v: 1 } }
"""
RUN_STATES = "queued, running, paused, succeeded, failed, cancelled"


def _run_pure(cli: Cli, tmp_path: Path) -> str:
    (tmp_path / "wf.yaml").write_text(PURE, encoding="utf-8")
    done = cli("--output", "json", "run", "wf.yaml")
    assert done.rc == 0, done.stderr
    return str(done.data["runId"])


@pytest.mark.parametrize("junk", ["bogus", "Succeeded", "succeeded ", ""])
def test_runs_list_refuses_an_unknown_state(cli: Cli, tmp_path: Path, junk: str) -> None:
    _run_pure(cli, tmp_path)
    done = cli("--output", "json", "runs", "list", "--state", junk)
    assert done.rc == 2, done.stdout
    assert done.stdout == ""
    assert done.error["error"]["exitCode"] == 2
    assert f"expected one of: {RUN_STATES}" in done.error["error"]["message"]


def test_runs_list_accepts_every_run_state(cli: Cli, tmp_path: Path) -> None:
    run_id = _run_pure(cli, tmp_path)
    for state in RUN_STATES.split(", "):
        done = cli("--output", "json", "runs", "list", "--state", state)
        assert done.rc == 0, done.stderr
        ids = [r["runId"] for r in done.data["runs"]]
        assert ids == ([run_id] if state == "succeeded" else [])


@pytest.mark.sqlite_only(reason="checks that no database file is created")
def test_an_unknown_state_is_refused_before_any_database_exists(cli: Cli, tmp_path: Path) -> None:
    done = cli("runs", "list", "--state", "bogus", "--db", "state/r.db")
    assert done.rc == 2
    assert "invalid value 'bogus' for --state" in done.stderr
    assert not (tmp_path / "state").exists()


def test_version_names_every_key_of_the_spec(cli: Cli) -> None:
    done = cli("--output", "json", "version")
    assert done.rc == 0, done.stderr
    envelope = json.loads(done.stdout)
    assert envelope["kind"] == "Version"
    assert envelope["data"] == {
        "version": envelope["data"]["version"],
        "rust": None,
        "python": platform.python_version(),
        "machineOutput": "agentctl.dev/cli/v1",
    }


VARS_WF = """apiVersion: agentctl.dev/v1
kind: Workflow
metadata: { name: confined }
spec:
  varsFiles: [VARS]
  actions: { put: { kind: builtin.assign } }
  tasks:
    - { id: one, uses: "action:put", with: { v: "${{ vars.a }}" } }
"""
AGENT_WF = """apiVersion: agentctl.dev/v1
kind: Workflow
metadata: { name: confined }
spec:
  providers: { sim: { kind: fake } }
  agents: { rev: { provider: sim, model: m, instructionsFile: INSTRUCTIONS } }
  tasks:
    - { id: one, uses: "agent:rev", with: { prompt: hi } }
"""


def _layout(tmp_path: Path) -> Path:
    """flows/ holds the workflow, in.yaml, sub/y.yaml and link.yaml → ../outside/x.yaml."""
    flows, outside = tmp_path / "flows", tmp_path / "outside"
    (flows / "sub").mkdir(parents=True)
    outside.mkdir()
    for path, text in (
        (outside / "x.yaml", "a: 1\n"),
        (outside / "x.md", "outside\n"),
        (flows / "in.yaml", "a: 2\n"),
        (flows / "sub" / "y.yaml", "a: 3\n"),
        (flows / "in.md", "inside\n"),
    ):
        path.write_text(text, encoding="utf-8")
    (flows / "link.yaml").symlink_to(outside / "x.yaml")
    (flows / "link.md").symlink_to(outside / "x.md")
    return flows


def _check(cli: Cli, flows: Path, text: str) -> CliResult:
    (flows / "wf.yaml").write_text(text, encoding="utf-8")
    return cli("--output", "json", "check", "flows/wf.yaml")


@pytest.mark.parametrize(
    "written", ["../outside/x.yaml", "OUTSIDE/x.yaml", "link.yaml", "sub/../in.yaml"]
)
def test_a_vars_file_outside_the_workflow_directory_is_refused(
    cli: Cli, tmp_path: Path, written: str
) -> None:
    flows = _layout(tmp_path)
    written = written.replace("OUTSIDE", str(tmp_path / "outside"))
    done = _check(cli, flows, VARS_WF.replace("VARS", written))
    assert done.rc == 2, done.stdout
    (diag,) = done.error["diagnostics"]
    assert diag["code"] == "policy_denied" and diag["path"] == "spec.varsFiles.0"
    assert diag["line"] == 5


@pytest.mark.parametrize("written", ["in.yaml", "sub/y.yaml", "FLOWS/in.yaml"])
def test_a_vars_file_inside_the_workflow_directory_is_read(
    cli: Cli, tmp_path: Path, written: str
) -> None:
    flows = _layout(tmp_path)
    done = _check(cli, flows, VARS_WF.replace("VARS", written.replace("FLOWS", str(flows))))
    assert done.rc == 0, done.stderr


def test_an_instructions_file_outside_the_workflow_directory_is_refused(
    cli: Cli, tmp_path: Path
) -> None:
    flows = _layout(tmp_path)
    assert _check(cli, flows, AGENT_WF.replace("INSTRUCTIONS", "in.md")).rc == 0
    for written in ("../outside/x.md", str(tmp_path / "outside" / "x.md"), "link.md"):
        done = _check(cli, flows, AGENT_WF.replace("INSTRUCTIONS", written))
        assert done.rc == 2, (written, done.stdout)
        (diag,) = done.error["diagnostics"]
        assert diag["code"] == "policy_denied"
        assert diag["path"] == "spec.agents.rev.instructionsFile"
