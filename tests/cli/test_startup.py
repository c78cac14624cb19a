"""A start-up that does only what the command needs (issue 15), seen from outside.

Which modules a command imports and which processes it starts are read from Python's own
import log (``PYTHONPROFILEIMPORTTIME``, inherited by every Python child, so a worker process
started by the run shows up in the same log). Timing goals live in
benchmarks/bench_check_startup.py, never here.
"""

from __future__ import annotations

import gc
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

from agentctl.clikit import collect_from_now
from agentctl.ledger.connection import open_database
from tests.conftest import cli_env

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PURE = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: { name: pure-pair }
spec:
  actions: { keep: { kind: builtin.assign } }
  tasks:
    - { id: first, uses: "action:keep", with: { n: 1 } }
    - { id: second, uses: "action:keep", needs: [first], with: { n: 2 } }
"""


def _imported(cwd: Path, *args: str) -> set[str]:
    """The modules imported by ``agentctl ARGS`` and by every Python process it started."""
    done = subprocess.run(
        [sys.executable, "-m", "agentctl", *args],
        cwd=cwd,
        env=cli_env({"PYTHONPROFILEIMPORTTIME": "1"}),
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return {
        line.rsplit("|", 1)[1].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }


def test_check_builds_only_the_commands_it_needs(tmp_path: Path) -> None:
    modules = _imported(tmp_path, "check", str(EXAMPLES / "hello.yaml"))
    assert "agentctl.core.dsl" in modules  # the check did run
    # The state command groups and the pack sources are not touched by a workflow without packs.
    for absent in ("agentctl.cli_inspect", "agentctl.cli_memory", "agentctl.packsource"):
        assert absent not in modules


def test_every_command_group_is_still_listed_and_reachable(tmp_path: Path) -> None:
    top = subprocess.run(
        [sys.executable, "-m", "agentctl", "--help"],
        cwd=tmp_path,
        env=cli_env(),
        capture_output=True,
        text=True,
        check=True,
    )
    for group in ("check", "runs", "memory", "approvals", "packs", "providers", "retry"):
        assert group in top.stdout
    listed = subprocess.run(
        [sys.executable, "-m", "agentctl", "--output", "json", "runs", "list"],
        cwd=tmp_path,
        env=cli_env(),
        capture_output=True,
        text=True,
    )
    # Dispatched to the command (which makes the default ledger, as the spec says), not
    # refused as unknown (exit 2).
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout)["data"] == {"runs": []}
    assert (tmp_path / ".agentctl" / "runtime.db").is_file()


def test_a_pure_run_starts_no_worker_and_an_effect_run_does(tmp_path: Path) -> None:
    pure = tmp_path / "pure"
    pure.mkdir()
    (pure / "pure.yaml").write_text(PURE, encoding="utf-8")
    pure_run = _imported(pure, "run", "pure.yaml")
    assert "agentctl.workers" not in pure_run
    # Nor does it open a worker pool, so neither the pool nor the wire it speaks is imported.
    wire = {
        "agentctl.coordinator.workerpool",
        "agentctl.mailbox.messages",
        "agentctl.core.protocols",
    }
    assert wire.isdisjoint(pure_run)
    # The lease owner's start time is read from /proc: psutil (~5 ms) only checks others.
    assert "psutil" not in pure_run
    hello = tmp_path / "hello"
    hello.mkdir()
    (hello / "hello.yaml").write_text((EXAMPLES / "hello.yaml").read_text(), encoding="utf-8")
    effect_run = _imported(hello, "run", "hello.yaml")
    assert "agentctl.workers" in effect_run
    assert wire <= effect_run


def test_commands_on_existing_state_never_build_the_workflow_models(tmp_path: Path) -> None:
    (tmp_path / "pure.yaml").write_text(PURE, encoding="utf-8")
    assert "agentctl.core.dsl" in _imported(tmp_path, "run", "pure.yaml")
    assert "agentctl.core.dsl" not in _imported(tmp_path, "runs", "list")
    assert "agentctl.core.dsl" not in _imported(tmp_path, "version")


def test_collecting_resumes_with_the_start_up_heap_frozen() -> None:
    frozen_before = gc.get_freeze_count()
    gc.disable()
    try:
        collect_from_now()
        assert gc.isenabled()
        assert gc.get_freeze_count() > frozen_before
    finally:
        gc.unfreeze()
        gc.enable()
    # A process that never turned the collector off is left alone.
    collect_from_now()
    assert gc.isenabled() and gc.get_freeze_count() == 0


def test_a_new_ledger_is_set_up_without_a_flush_per_step_but_runs_fully_synchronous(
    tmp_path: Path,
) -> None:
    db = open_database(tmp_path / "new" / "runtime.db")
    try:
        assert db.conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
        assert db.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        db.close()
    # The schema is all there for the next process to open.
    raw = sqlite3.connect(tmp_path / "new" / "runtime.db")
    try:
        tables = {r[0] for r in raw.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    finally:
        raw.close()
    assert {"runs", "task_states"} <= tables
    reopened = open_database(tmp_path / "new" / "runtime.db")
    try:
        assert reopened.migration.applied == ()
        assert reopened.conn.execute("PRAGMA synchronous").fetchone()[0] == 2
    finally:
        reopened.close()


COLLECTOR_PROBE = """\
import gc, json, sys
from pathlib import Path
from agentctl.coordinator import api

seen, into = {}, Path(sys.argv[1])
resolve, start = api.resolve_inputs, api.start_run


def resolving(*args, **options):
    seen["collector_on_after_compile"] = gc.isenabled()
    return resolve(*args, **options)


def starting(**options):
    plan = options["plan"]
    seen["collector_on_in_run"] = gc.isenabled()
    seen["plan_scanned_by_collections"] = any(o is plan for o in gc.get_objects())
    into.write_text(json.dumps(seen), encoding="utf-8")
    return start(**options)


api.resolve_inputs, api.start_run = resolving, starting
sys.argv = ["agentctl", "--output", "json", "run", "pure.yaml"]
from agentctl.entry import main

main()
"""


def test_a_run_compiles_with_the_collector_off_and_runs_with_its_plan_frozen(
    tmp_path: Path,
) -> None:
    (tmp_path / "pure.yaml").write_text(PURE, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-c", COLLECTOR_PROBE, str(tmp_path / "seen.json")],
        cwd=tmp_path,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads((tmp_path / "seen.json").read_text(encoding="utf-8"))
    # Off from start-up through the compile; on for the run, with the document and plan
    # frozen with the program (they live as long as the process): no collection scans them.
    assert seen == {
        "collector_on_after_compile": False,
        "collector_on_in_run": True,
        "plan_scanned_by_collections": False,
    }
