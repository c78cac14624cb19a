"""A run's file effects never read or write the ledger's own state.

The ledger is the run's database file, the files SQLite and agentctl keep beside it (``-wal``,
``-shm``, ``-journal``, ``.lock``, ``.workers/``) and the artifact store (spec/cli.md §8).
A ``builtin.write`` there would replace the database with the task's content (the run then
reported ``succeeded`` over a ledger no command could open) and a ``builtin.read`` would copy
ledger bytes into the ledger. Both are path denials (exit 4), whatever the spelling: a
symlink, a hard link, ``run --check``; nothing is written.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import Cli, CliResult

WriteWorkflow = Callable[..., Path]

WORKFLOW = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: ledger-state }
spec:
  policy: { approval: never, writableRoots: ["."] }
  actions: { act: { kind: %s } }
  tasks: [ { id: t, uses: "action:act", with: %s } ]
"""


def _write(path: str) -> str:
    return WORKFLOW % ("builtin.write", f"{{ path: {path}, content: x }}")


def _read(path: str) -> str:
    return WORKFLOW % ("builtin.read", f"{{ path: {path} }}")


def _first_run(cli: Cli, write_workflow: WriteWorkflow) -> None:
    """A run that creates the ledger (and its artifact store) under ``.agentctl/``."""
    made = cli("--output", "json", "run", str(write_workflow(_write("seed.txt"), "seed.yaml")))
    assert made.rc == 0, made.stderr


def _assert_denied(done: CliResult, path: str) -> None:
    assert done.rc == 4, done.stderr
    message = done.error["error"]["message"]
    assert f"path denied: {path!r} is agentctl's own ledger state" in message
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("kind", ["write", "read"])
def test_the_artifact_store_is_refused(
    kind: str, cli: Cli, write_workflow: WriteWorkflow, tmp_path: Path
) -> None:
    _first_run(cli, write_workflow)
    path = ".agentctl/artifacts/planted.txt"
    if kind == "read":
        (tmp_path / path).write_text("planted")
    text = _write(path) if kind == "write" else _read(path)
    done = cli("--output", "json", "run", str(write_workflow(text)))
    _assert_denied(done, path)
    if kind == "write":
        assert not (tmp_path / path).exists()
    shown = cli("--output", "json", "runs", "list")
    assert shown.rc == 0, shown.stderr
    assert {r["state"] for r in shown.data["runs"]} == {"succeeded", "failed"}


def test_check_mode_refuses_the_artifact_store(
    cli: Cli, write_workflow: WriteWorkflow, tmp_path: Path
) -> None:
    _first_run(cli, write_workflow)
    path = ".agentctl/artifacts/planted.txt"
    done = cli("--output", "json", "run", "--check", str(write_workflow(_write(path))))
    _assert_denied(done, path)


@pytest.mark.sqlite_only(reason="the database file and its companions are SQLite's")
@pytest.mark.parametrize(
    "path", [".agentctl/runtime.db", ".agentctl/runtime.db-wal", ".agentctl/runtime.db.lock"]
)
def test_a_write_over_the_database_is_refused(
    path: str, cli: Cli, write_workflow: WriteWorkflow, tmp_path: Path
) -> None:
    _first_run(cli, write_workflow)
    done = cli("--output", "json", "run", str(write_workflow(_write(path))))
    _assert_denied(done, path)
    assert (tmp_path / ".agentctl" / "runtime.db").stat().st_size > 1
    shown = cli("--output", "json", "runs", "list")
    assert shown.rc == 0, shown.stderr
    assert sorted(r["state"] for r in shown.data["runs"]) == ["failed", "succeeded"]


@pytest.mark.sqlite_only(reason="the database file is SQLite's")
def test_a_write_over_the_database_is_refused_in_check_mode(
    cli: Cli, write_workflow: WriteWorkflow, tmp_path: Path
) -> None:
    _first_run(cli, write_workflow)
    path = ".agentctl/runtime.db"
    done = cli("--output", "json", "run", "--check", str(write_workflow(_write(path))))
    _assert_denied(done, path)
    assert "SQLite format" not in done.stdout + done.stderr


@pytest.mark.sqlite_only(reason="the database file is SQLite's")
@pytest.mark.parametrize("how", ["symlink", "hardlink"])
def test_another_name_for_the_database_is_refused(
    how: str, cli: Cli, write_workflow: WriteWorkflow, tmp_path: Path
) -> None:
    _first_run(cli, write_workflow)
    database = tmp_path / ".agentctl" / "runtime.db"
    alias = tmp_path / "alias.db"
    if how == "symlink":
        alias.symlink_to(database)
    else:
        os.link(database, alias)
    done = cli("--output", "json", "run", str(write_workflow(_read("alias.db"))))
    _assert_denied(done, "alias.db")
    assert "SQLite format" not in done.stdout + done.stderr
    written = cli("--output", "json", "run", str(write_workflow(_write("alias.db"), "w.yaml")))
    _assert_denied(written, "alias.db")
    assert database.stat().st_size > 1
    assert cli("runs", "list").rc == 0
