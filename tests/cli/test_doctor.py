"""``agentctl doctor FILE`` from the outside: what a workflow needs here, and no state created."""

from __future__ import annotations

import os
import sqlite3
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.cli.test_policy_and_sandbox import _podman_image
from tests.conftest import EXAMPLES, Cli

MISSING_IMAGE = "localhost/agentctl-doctor-absent@sha256:" + "b" * 64

NEEDS_MUCH = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: { name: needs-much }
spec:
  policy:
    approval: never
    processAllowlist: [sh, agentctl-no-such-program]
    writableRoots: [out, locked/inner]
  providers:
    main: { kind: openai, endpoint: "https://api.example.test/v1" }
  agents:
    writer: { provider: main, model: m, instructions: hi }
  actions:
    boxed:
      kind: builtin.shell.exec
      command: /bin/sh
      args: ["-c", "true"]
      isolation: container
      container: { image: "IMAGE", runtime: podman }
  tasks:
    - { id: boxed, uses: "action:boxed" }
    - { id: write, uses: "agent:writer" }
"""


Lock = Callable[[Path], None]


@pytest.fixture
def unwritable() -> Iterator[Lock]:
    """``unwritable(path)``: this user can no longer write ``path``, undone afterwards. Root
    writes through permission bits, not through ``chattr +i``; another user loses them."""
    locked: list[Path] = []

    def lock(path: Path) -> None:
        if os.geteuid() == 0:
            done = subprocess.run(["chattr", "+i", str(path)], capture_output=True, text=True)
            if done.returncode != 0:
                pytest.skip(f"chattr +i is not supported here: {done.stderr.strip()}")
        else:
            path.chmod(path.stat().st_mode & ~0o222)
        locked.append(path)

    yield lock
    for path in reversed(locked):
        if os.geteuid() == 0:
            subprocess.run(["chattr", "-i", str(path)], check=True)
        else:
            path.chmod(path.stat().st_mode | 0o200)


def _by_check(data: dict[str, object]) -> dict[str, dict[str, object]]:
    checks = data["checks"]
    assert isinstance(checks, list)
    return {str(c["check"]): c for c in checks}


def _setup(tmp_path: Path, image: str = MISSING_IMAGE) -> Path:
    wf = tmp_path / "wf.yaml"
    wf.write_text(NEEDS_MUCH.replace("IMAGE", image))
    (tmp_path / "locked").mkdir()
    (tmp_path / "locked").chmod(0o500)
    return wf


def test_missing_credential_and_image_are_named_exit_6_and_nothing_is_created(
    cli: Cli, backend: str, tmp_path: Path
) -> None:
    wf = _setup(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    if os.environ.get("OPENAI_API_KEY"):
        pytest.skip("OPENAI_API_KEY is set in this environment")
    done = cli("--output", "json", "doctor", str(wf))
    assert done.rc == 6, done.stderr
    data = done.data
    assert data["ready"] is False and data["workflow"] == "needs-much"
    checks = _by_check(data)
    image = checks[f"container image {MISSING_IMAGE}"]
    assert image["available"] is False and image["status"] == "missing"
    credential = checks["credential main"]
    assert credential == {
        "check": "credential main",
        "available": False,
        "status": "missing",
        "detail": "env OPENAI_API_KEY",
    }
    # The boxed /bin/sh is allowed; it is looked up in its image, when it runs (unverified).
    boxed = checks[f"process /bin/sh in image {MISSING_IMAGE}"]
    assert (boxed["available"], boxed["status"]) == (True, "allowed")
    # An allowlist entry no task uses is named, and is not what makes this not ready.
    unused = checks["process allowlist entry agentctl-no-such-program"]
    assert (unused["available"], unused["status"]) == (True, "unused")
    assert checks["writable root out"]["status"] == "creatable"
    if os.geteuid() != 0:  # root may write anywhere
        assert checks["writable root locked/inner"]["available"] is False
    [database] = [c for name, c in checks.items() if name.startswith("database ")]
    if backend == "sqlite":
        assert database["check"] == "database .agentctl/runtime.db"
    # A missing file, or an empty server database: `run` would set it up, doctor does not.
    assert database["status"] == {"sqlite": "absent", "postgresql": "needs_migration"}[backend]
    endpoints = [u["target"] for u in data["unverified"] if u["what"] == "endpoint"]
    assert endpoints == ["provider main https://api.example.test/v1"]
    assert {"what": "program", "target": f"process /bin/sh in image {MISSING_IMAGE}"} in [
        {"what": u["what"], "target": u["target"]} for u in data["unverified"]
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == before, "doctor created state"
    human = cli("doctor", str(wf))
    assert human.rc == 6
    assert "NOT ready" in human.stdout and MISSING_IMAGE in human.stdout
    assert "OPENAI_API_KEY" in human.stdout


def test_credential_present_is_reported_by_name_never_by_value(cli: Cli, tmp_path: Path) -> None:
    wf = _setup(tmp_path)
    done = cli("--output", "json", "doctor", str(wf), env={"OPENAI_API_KEY": "sk-SECRET-VALUE"})
    assert done.rc == 6  # the image is still missing
    assert _by_check(done.data)["credential main"]["status"] == "present"
    assert "SECRET" not in done.stdout + done.stderr


def test_ready_workflow_exits_0(cli: Cli, tmp_path: Path) -> None:
    done = cli("--output", "json", "doctor", str(EXAMPLES / "e9-process.yaml"))
    assert done.rc == 0, done.stdout + done.stderr
    assert done.data["ready"] is True
    assert _by_check(done.data)["process /bin/echo"]["detail"] == "/bin/echo (action hello)"
    assert not (tmp_path / ".agentctl").exists()


@pytest.mark.sqlite_only(reason="no -wal/-shm companions; the version is SQLite's user_version")
def test_existing_database_is_read_only_and_a_newer_one_is_not_ready(
    cli: Cli, tmp_path: Path
) -> None:
    db = tmp_path / "state" / "r.db"
    assert cli("db", "migrate", "--db", str(db)).rc == 0
    companions = sorted(p.name for p in db.parent.iterdir())
    wf = EXAMPLES / "hello.yaml"
    done = cli("--output", "json", "doctor", str(wf), "--db", str(db))
    assert done.rc == 0, done.stderr
    found = _by_check(done.data)[f"database {db}"]
    assert found["status"] == "ok" and "schema" in str(found["detail"])
    assert sorted(p.name for p in db.parent.iterdir()) == companions  # no -wal/-shm made
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA user_version = 999")
    newer = cli("--output", "json", "doctor", str(wf), "--db", str(db))
    assert newer.rc == 6
    assert "newer than supported" in str(_by_check(newer.data)[f"database {db}"]["detail"])


@pytest.mark.sqlite_only(reason="a database file and its directory's permissions")
def test_a_database_run_cannot_create_is_not_ready_and_nothing_is_created(
    cli: Cli, tmp_path: Path, unwritable: Lock
) -> None:
    # doctor said "absent … `run` creates it", ready, exit 0; `run` then failed with exit 5.
    state = tmp_path / "state"
    state.mkdir()
    unwritable(state)
    wf = str(EXAMPLES / "hello.yaml")
    for db in ("state/r.db", "state/sub/r.db"):  # the file, or the parent `run` would make
        done = cli("--output", "json", "doctor", wf, "--db", db)
        assert done.rc == 6, done.stdout + done.stderr
        found = _by_check(done.data)[f"database {db}"]
        assert (found["available"], found["status"]) == (False, "not_writable")
        assert f"cannot create it: directory {state} is not writable" in str(found["detail"])
        assert "MISSING  not_writable     database" in cli("doctor", wf, "--db", db).stdout
    assert list(state.iterdir()) == [], "doctor created state"
    assert cli("--output", "json", "run", wf, "--db", "state/r.db").rc == 5  # as doctor said


@pytest.mark.sqlite_only(reason="a database file and its directory's permissions")
@pytest.mark.parametrize("locked", ["file", "directory"])
def test_an_existing_database_run_cannot_write_is_not_ready(
    cli: Cli, tmp_path: Path, unwritable: Lock, locked: str
) -> None:
    # A readable ledger was "ok, schema N, current"; `run` cannot write it (or the -wal, -shm
    # and .lock files beside it) and exits 5.
    db = tmp_path / "state" / "r.db"
    assert cli("db", "migrate", "--db", str(db)).rc == 0
    unwritable(db if locked == "file" else db.parent)
    wf = str(EXAMPLES / "hello.yaml")
    done = cli("--output", "json", "doctor", wf, "--db", str(db))
    assert done.rc == 6, done.stdout + done.stderr
    found = _by_check(done.data)[f"database {db}"]
    assert (found["available"], found["status"]) == (False, "not_writable")
    detail = str(found["detail"])
    assert detail.startswith("schema ") and "`run` cannot write it: " in detail
    assert {"file": "the file is", "directory": f"directory {db.parent} is"}[locked] in detail
    assert cli("--output", "json", "run", wf, "--db", str(db)).rc == 5  # as doctor said


@pytest.mark.container
def test_present_image_is_available(cli: Cli, tmp_path: Path) -> None:
    image = _podman_image()
    if image is None:
        pytest.skip("podman or localhost/agentctl-test:1 missing (run scripts/setup-system.sh)")
    wf = _setup(tmp_path, image)
    done = cli("--output", "json", "doctor", str(wf), env={"OPENAI_API_KEY": "k"})
    assert _by_check(done.data)[f"container image {image}"]["status"] == "present"


@pytest.mark.parametrize(
    ("example", "endpoint"),
    [
        ("e11-mcp.yaml", "MCP server notes http://127.0.0.1:8765/mcp"),
        (
            "e12-a2a-delegate.yaml",
            "A2A peer reviewer http://127.0.0.1:8765/.well-known/agent-card.json",
        ),
    ],
)
def test_remote_endpoints_are_listed_unverified_without_a_request(
    cli: Cli, tmp_path: Path, example: str, endpoint: str
) -> None:
    # Nothing listens on 127.0.0.1:8765 here: a request would fail; doctor makes none.
    # e11's server header is a secret reference: doctor checks the variable's presence only.
    done = cli("--output", "json", "doctor", str(EXAMPLES / example), env={"NOTES_TOKEN": "t"})
    assert done.rc == 0, done.stdout + done.stderr
    assert [u["target"] for u in done.data["unverified"]] == [endpoint]
    assert done.data["scope"]["network"] == "not contacted"


def test_workspace_defaults_to_the_files_directory_as_its_help_says(
    cli: Cli, tmp_path: Path
) -> None:
    # doctor has no run: --workspace defaults to the workflow file's directory (as on `run`),
    # and its help page says so instead of resume's "the run's own".
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "hello.yaml").write_bytes((EXAMPLES / "hello.yaml").read_bytes())
    done = cli("--output", "json", "doctor", "sub/hello.yaml")
    assert done.rc == 0, done.stderr
    assert done.data["scope"]["workspace"] == str((tmp_path / "sub").resolve())
    helped = " ".join(cli("doctor", "--help").stdout.split())
    assert "default: the file's dir" in helped and "the run's own" not in helped
