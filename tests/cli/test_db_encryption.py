"""``agentctl db encryption`` from the outside: a secret in a run's output never reaches the
database bytes once encryption is on, the key is needed to open the database at all (exit 5,
nothing changed), and ``rotate`` keeps every run readable under the new key only."""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import sqlite3
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, Cli, CliResult

pytestmark = pytest.mark.sqlite_only(
    reason="column encryption is a SQLite-file feature: key files, raw bytes of the file"
)

SECRET_BEFORE = "sk-live-BEFOREENABLE0123456789"
SECRET_AFTER = "sk-live-AFTERENABLE9876543210"

WORKFLOW = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: { name: token }
spec:
  policy: { approval: never }
  inputs:
    token: { type: string }
  actions:
    echo: { kind: builtin.assign }
  outputs:
    said: "${{ tasks.say.output.output.line }}"
  tasks:
    - id: say
      uses: action:echo
      with: { line: "the token is ${{ inputs.token }}" }
"""


def _key() -> str:
    return base64.b64encode(os.urandom(32)).decode()


class Ledger:
    """The CLI against one database in ``tmp_path``, with the keys a test chooses to pass."""

    def __init__(self, cli: Cli, tmp_path: Path) -> None:
        self.cli, self.tmp = cli, tmp_path
        self.db = tmp_path / ".agentctl" / "runtime.db"
        self.keys = {"K1": _key(), "K2": _key()}
        (tmp_path / "token.yaml").write_text(WORKFLOW)
        shutil.copy(EXAMPLES / "e6-approval.yaml", tmp_path / "approval.yaml")

    def __call__(self, *args: str, env: dict[str, str] | None = None) -> CliResult:
        chosen = self.keys if env is None else env
        return self.cli("--output", "json", *args, "--db", str(self.db), env=chosen)

    def run(self, *args: str, env: dict[str, str] | None = None) -> CliResult:
        return self("run", *args, "--workspace", str(self.tmp), env=env)

    def files(self) -> list[Path]:
        return [p for p in (self.db, Path(f"{self.db}-wal")) if p.exists()]

    def digest(self) -> str:
        return hashlib.sha256(b"".join(p.read_bytes() for p in self.files())).hexdigest()

    def holds(self, text: str) -> bool:
        return any(text.encode() in p.read_bytes() for p in self.files())

    def checkpoint(self) -> None:
        conn = sqlite3.connect(self.db)
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            conn.close()


@pytest.fixture
def ledger(cli: Cli, tmp_path: Path) -> Ledger:
    return Ledger(cli, tmp_path)


def _ok(done: CliResult, rc: int = 0) -> CliResult:
    assert done.rc == rc, done.stderr
    return done


def _columns(done: CliResult) -> list[dict[str, object]]:
    columns = done.data["columns"]
    assert isinstance(columns, list)
    return columns


def _enabled(ledger: Ledger) -> tuple[str, str]:
    """A plain database with a finished run carrying a secret and a paused one, then enabled."""
    before = _ok(ledger.run(str(ledger.tmp / "token.yaml"), "--input", f"token={SECRET_BEFORE}"))
    paused = _ok(ledger.run(str(ledger.tmp / "approval.yaml")), rc=3)
    assert ledger.holds(SECRET_BEFORE)  # plaintext until enabled
    _ok(ledger("db", "encryption", "enable", "--key-id", "k1", "--key-env", "K1"))
    return str(before.data["runId"]), str(paused.data["runId"])


def test_dry_run_counts_and_changes_nothing(ledger: Ledger) -> None:
    _ok(ledger.run(str(ledger.tmp / "token.yaml"), "--input", f"token={SECRET_BEFORE}"))
    ledger.checkpoint()
    digest = ledger.digest()
    done = _ok(
        ledger("db", "encryption", "enable", "--key-id", "k1", "--key-env", "K1", "--dry-run")
    )
    assert done.data["dryRun"] is True and done.data["changed"] > 0
    assert done.data["encrypted"] is False
    assert ledger.digest() == digest and ledger.holds(SECRET_BEFORE)


def test_secrets_never_reach_the_database_bytes(ledger: Ledger) -> None:
    before, _ = _enabled(ledger)
    assert not ledger.holds(SECRET_BEFORE)  # enable resealed the existing rows
    after = _ok(ledger.run(str(ledger.tmp / "token.yaml"), "--input", f"token={SECRET_AFTER}"))
    assert not ledger.holds(SECRET_AFTER) and not ledger.holds(SECRET_BEFORE)  # WAL as written
    ledger.checkpoint()
    assert not ledger.holds(SECRET_AFTER) and not ledger.holds(SECRET_BEFORE)
    inventory = _ok(ledger("db", "encryption", "inventory"))
    assert inventory.data["keyId"] == "k1" and inventory.data["keyEnv"] == "K1"
    assert all(c["plaintext"] == 0 for c in _columns(inventory))
    assert any(c["encrypted"] for c in _columns(inventory))
    # With the key, the stored values read back whole.
    for run, secret in ((before, SECRET_BEFORE), (str(after.data["runId"]), SECRET_AFTER)):
        assert secret in _ok(ledger("inspect", run)).stdout


def test_without_the_right_key_the_database_does_not_open(ledger: Ledger) -> None:
    run, _ = _enabled(ledger)
    ledger.checkpoint()
    digest = ledger.digest()
    missing = ledger("inspect", run, env={})
    assert missing.rc == 5
    assert "'k1'" in missing.error["error"]["message"]
    assert "K1" in missing.error["error"]["message"]
    wrong = ledger("inspect", run, env={"K1": _key()})
    assert wrong.rc == 5 and "wrong key" in wrong.error["error"]["message"]
    refused = ledger.run(str(ledger.tmp / "token.yaml"), "--input", "token=x", env={})
    assert refused.rc == 5
    assert ledger.digest() == digest  # nothing was written by any of them


def test_rotate_keeps_every_run_readable_under_the_new_key_only(ledger: Ledger) -> None:
    done_run, paused_run = _enabled(ledger)
    rotated = _ok(ledger("db", "encryption", "rotate", "--key-id", "k2", "--key-env", "K2"))
    assert rotated.data["keyId"] == "k2" and rotated.data["changed"] > 0
    columns = _columns(_ok(ledger("db", "encryption", "inventory", env={"K2": ledger.keys["K2"]})))
    assert all(c["plaintext"] == 0 and set(c["encrypted"]) <= {"k2"} for c in columns)
    only_new = {"K2": ledger.keys["K2"]}
    assert SECRET_BEFORE in _ok(ledger("inspect", done_run, env=only_new)).stdout
    replayed = _ok(ledger("replay", done_run, env=only_new))
    assert SECRET_BEFORE in replayed.stdout
    approval = _ok(ledger("approvals", "list", paused_run, env=only_new))
    approval_id = approval.data["approvals"][0]["approvalId"]
    _ok(ledger("approvals", "approve", approval_id, "--reason", "fine", env=only_new))
    resumed = _ok(ledger("resume", paused_run, "--workspace", str(ledger.tmp), env=only_new))
    assert resumed.data["state"] == "succeeded"
    assert (ledger.tmp / "out" / "a.txt").read_text() == "hello"
    # The old key opens nothing any more, whichever variable holds it.
    old = ledger("runs", "list", env={"K1": ledger.keys["K1"], "AGENTCTL_DB_KEY_ENV": "K1"})
    assert old.rc == 5 and "wrong key" in old.error["error"]["message"]
    assert ledger("runs", "list", env={"K1": ledger.keys["K1"]}).rc == 5


def test_enable_and_rotate_refuse_what_does_not_apply(ledger: Ledger) -> None:
    _ok(ledger("db", "migrate"))
    not_yet = ledger("db", "encryption", "rotate", "--key-id", "k2", "--key-env", "K2")
    assert not_yet.rc == 2
    unset = ledger("db", "encryption", "enable", "--key-id", "k1", "--key-env", "NOT_SET")
    assert unset.rc == 2 and "NOT_SET" in unset.error["error"]["message"]
    bad_id = ledger("db", "encryption", "enable", "--key-id", "k 1", "--key-env", "K1")
    assert bad_id.rc == 2
    _ok(ledger("db", "encryption", "enable", "--key-id", "k1", "--key-env", "K1"))
    again = ledger("db", "encryption", "enable", "--key-id", "k2", "--key-env", "K2")
    assert again.rc == 2 and "rotate" in again.error["error"]["message"]
    # A new id for the current key's bytes: the "old" key would still open the database.
    same = {**ledger.keys, "K3": ledger.keys["K1"]}
    reused = ledger("db", "encryption", "rotate", "--key-id", "k3", "--key-env", "K3", env=same)
    assert reused.rc == 2 and "is the current key 'k1'" in reused.error["error"]["message"]
    assert _ok(ledger("db", "encryption", "inventory")).data["keyId"] == "k1"


def test_a_malformed_new_key_is_bad_input_and_changes_nothing(ledger: Ledger) -> None:
    """The key ``enable``/``rotate`` introduce is the operator's input, as its variable's name
    is: not base64 of 32 bytes is exit 2 (an unset variable already was), never the exit 5 of
    a database that cannot be opened; an empty ``--key-env`` names no variable."""
    run, _ = _enabled(ledger)
    ledger.checkpoint()
    digest = ledger.digest()
    bad = {**ledger.keys, "SHORT": base64.b64encode(b"short").decode(), "JUNK": "not base64!"}
    for env in ("SHORT", "JUNK", ""):
        refused = ledger("db", "encryption", "rotate", "--key-id", "k2", "--key-env", env, env=bad)
        assert refused.rc == 2, refused.stderr
        message = refused.error["error"]["message"]
        assert ("base64 of 32 bytes" if env else "--key-env") in message, message
    assert ledger.digest() == digest  # nothing was written
    assert _ok(ledger("inspect", run)).data["run"]["runId"] == run  # still under k1
    (ledger.tmp / "fresh").mkdir()
    fresh = Ledger(ledger.cli, ledger.tmp / "fresh")
    _ok(fresh("db", "migrate"))
    refused = fresh("db", "encryption", "enable", "--key-id", "k1", "--key-env", "SHORT", env=bad)
    assert refused.rc == 2, refused.stderr
    assert _ok(fresh("db", "encryption", "inventory")).data["encrypted"] is False


@pytest.mark.sqlite_only(reason="a missing SQLite file; a PostgreSQL database is not a path")
def test_no_encryption_command_creates_a_ledger(ledger: Ledger) -> None:
    # Bad input first (exit 2), then a ledger that is not there (exit 5): in neither case is
    # a database, its directory or its lock left behind.
    unset = ledger("db", "encryption", "enable", "--key-id", "k1", "--key-env", "NOPE")
    assert unset.rc == 2 and "NOPE, which is not set" in unset.error["error"]["message"]
    empty = ledger(
        "db", "encryption", "enable", "--key-id", "k1", "--key-env", "NOPE", env={"NOPE": ""}
    )
    assert empty.rc == 2 and "NOPE, which is set but empty" in empty.error["error"]["message"]
    for action in ("enable", "rotate"):  # a bad id with a good key: also input (it was 5 here)
        for dry_run in ([], ["--dry-run"]):
            args = ("db", "encryption", action, "--key-id", "bad id", "--key-env", "K1")
            bad_id = ledger(*args, *dry_run)
            assert bad_id.rc == 2, bad_id.stderr
            assert "key id 'bad id' must be" in bad_id.error["error"]["message"]
    for args in (
        ["enable", "--key-id", "k1", "--key-env", "K1"],
        ["rotate", "--key-id", "k2", "--key-env", "K2"],
        ["inventory"],
    ):
        refused = ledger("db", "encryption", *args)
        assert refused.rc == 5, refused.stderr
        assert refused.error["error"]["message"].startswith("no ledger at ")
    assert not ledger.db.parent.exists()
