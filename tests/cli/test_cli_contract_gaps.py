"""Small gaps between our CLI and spec/cli.md that scripts written for the original hit.

- ``runs list --state S`` with an unknown state is a usage error (exit 2) naming the states,
  before any state is read or created; it used to list nothing and exit 0;
- ``version``'s ``Version`` carries every key the spec names (``rust`` is null: no Rust
  toolchain built this program), plus ``python``.
"""

from __future__ import annotations

import json
import platform
from pathlib import Path

import pytest

from tests.conftest import Cli

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
