"""Operator commands as a script written for the original agentctl calls them.

Each test runs the CLI as a subprocess in a fresh directory and checks what such a script
reads: the envelope ``kind`` spec/cli.md §1 names, the original's keys in ``data``, the exit
code, and that a command which should create nothing creates nothing.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import time
from pathlib import Path

import pytest

from tests.clibackend import LedgerTarget
from tests.conftest import Cli, CliResult, StartCli

WORKFLOW = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: ops }
spec:
  actions: { put: { kind: builtin.assign } }
  tasks:
    - { id: first, uses: "action:put", with: { note: kept } }
"""


def _run(cli: Cli, tmp_path: Path) -> str:
    (tmp_path / "wf.yaml").write_text(WORKFLOW)
    done = cli("--output", "json", "run", "wf.yaml")
    assert done.rc == 0, done.stderr
    return str(done.data["runId"])


def _kind(done: CliResult) -> str:
    return str(json.loads(done.stdout)["kind"])


def test_update_explains_the_upgrade_and_changes_nothing(cli: Cli, tmp_path: Path) -> None:
    done = cli("--output", "json", "update")
    assert done.rc == 0, done.stderr
    assert _kind(done) == "UpdateInfo"
    assert done.data["automaticUpdate"] is False
    version = cli("--output", "json", "version").data["version"]
    assert done.data["currentVersion"] == version and done.data["command"]
    human = cli("update")
    assert human.rc == 0 and "automatic update is disabled" in human.stdout
    assert list(tmp_path.iterdir()) == []


def test_runs_analyze_and_upgrade_use_the_kinds_the_spec_names(cli: Cli, tmp_path: Path) -> None:
    run = _run(cli, tmp_path)
    analyze = cli("--output", "json", "runs", "analyze", run)
    assert analyze.rc == 0, analyze.stderr
    assert _kind(analyze) == "LegacyRunUpgradeAnalysis"
    dry = cli("--output", "json", "runs", "upgrade", run, "--dry-run")
    assert dry.rc == 0 and _kind(dry) == "LegacyRunUpgradeAnalysis"  # dry-run == analyze
    assert dry.data["dryRun"] is True and dry.data["runId"] == run
    real = cli("--output", "json", "runs", "upgrade", run)
    assert real.rc == 0 and _kind(real) == "LegacyRunUpgrade"
    assert real.data["analysisAfter"]["runId"] == run
    assert real.data["analysisAfter"]["upgradeableTasks"] == real.data["upgradeableTasks"]


def test_migrate_carries_the_original_keys(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "wf.yaml").write_text(WORKFLOW)
    printed = cli("--output", "json", "migrate", "wf.yaml")
    assert printed.rc == 0, printed.stderr
    assert printed.data["migratedLegacy"] is False
    assert printed.data["workflow"]["apiVersion"] == "agentctl.dev/v1"
    assert printed.data["workflow"]["spec"]["tasks"][0]["id"] == "first"
    written = cli("--output", "json", "migrate", "wf.yaml", "--write", "out.yaml")
    assert written.rc == 0, written.stderr
    assert (written.data["source"], written.data["destination"]) == ("wf.yaml", "out.yaml")


def test_db_stats_carries_the_original_flat_counts(cli: Cli, tmp_path: Path) -> None:
    _run(cli, tmp_path)
    assert cli("--output", "json", "memory", "put", "ns", "k", '"v"').rc == 0
    done = cli("--output", "json", "db", "stats")
    assert done.rc == 0, done.stderr
    data = done.data
    assert (data["runs"], data["tasks"], data["longTermMemory"]) == (1, 1, 1)
    assert data["effects"] == data["approvals"] == data["artifactBlobs"] == 0
    assert data["auditEvents"] == data["counts"]["audit_events"] > 0
    assert data["checkpoints"] == data["counts"]["checkpoints"] > 0


def test_memory_put_acknowledges_the_write(cli: Cli, tmp_path: Path) -> None:
    done = cli("--output", "json", "memory", "put", "ns", "k", '{"a": 1}', "--retention-days", "3")
    assert done.rc == 0, done.stderr
    assert done.data["written"] is True and done.data["value"] == {"a": 1}
    assert done.data["expiresAt"] is not None


@pytest.mark.sqlite_only(reason="column encryption at rest is a SQLite ledger feature")
def test_encryption_reports_carry_the_original_keys(cli: Cli, tmp_path: Path) -> None:
    _run(cli, tmp_path)
    env = {"OPS_KEY": base64.b64encode(os.urandom(32)).decode()}
    before = cli("--output", "json", "db", "encryption", "inventory", env=env)
    assert before.rc == 0, before.stderr
    plain = before.data["plaintextValues"]
    assert before.data["enabled"] is False and plain > 0
    assert before.data["protectedValues"] == plain and before.data["encryptedValues"] == 0
    args = ("--output", "json", "db", "encryption", "enable", "--key-id", "k1", "--key-env")
    dry = cli(*args, "OPS_KEY", "--dry-run", env=env)
    assert dry.rc == 0, dry.stderr
    assert (dry.data["operation"], dry.data["valuesRewritten"]) == ("enable", 0)
    assert dry.data["valuesScanned"] == plain
    done = cli(*args, "OPS_KEY", env=env)
    assert done.rc == 0, done.stderr
    assert done.data["enabled"] is True and done.data["keyReference"] == "OPS_KEY"
    assert done.data["valuesRewritten"] == plain
    after = cli("--output", "json", "db", "encryption", "inventory", env=env)
    assert (after.data["encryptedValues"], after.data["plaintextValues"]) == (plain, 0)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def test_write_creates_parents_and_gives_a_plain_file_mode(cli: Cli, tmp_path: Path) -> None:
    done = cli("--output", "json", "schema", "--write", "build/schema/workflow.json")
    assert done.rc == 0, done.stderr
    written = tmp_path / "build" / "schema" / "workflow.json"
    assert json.loads(written.read_text())["$schema"]
    assert written.stat().st_mode & 0o777 == 0o666 & ~_umask()  # not the temp file's 0600
    (tmp_path / "wf.yaml").write_text(WORKFLOW)
    (tmp_path / "wf.yaml").chmod(0o640)
    again = cli("--output", "json", "migrate", "wf.yaml", "--write", "wf.yaml")
    assert again.rc == 0, again.stderr
    assert (tmp_path / "wf.yaml").stat().st_mode & 0o777 == 0o640  # an existing file keeps it
    assert "agentctl.dev/v1\n" in (tmp_path / "wf.yaml").read_text()
    assert not (tmp_path / ".agentctl").exists()


def test_a_refused_write_leaves_no_temporary_file(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "target").mkdir()
    done = cli("--output", "json", "schema", "--write", "target")
    assert done.rc == 2 and "cannot write target" in done.error["error"]["message"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["target"]


WRITER = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: writer }
spec:
  policy: { approval: never, writableRoots: ["."] }
  actions: { w: { kind: builtin.write } }
  tasks:
    - { id: w, uses: "action:w", with: { path: out.txt, content: hello } }
"""


def test_db_migrate_and_artifacts_gc_carry_the_original_keys(
    cli: Cli, tmp_path: Path, ledger_target: LedgerTarget
) -> None:
    migrated = cli("--output", "json", "db", "migrate", "--db", "state/ops.db")
    assert migrated.rc == 0, migrated.stderr
    assert migrated.data["migrated"] is True
    assert migrated.data["schemaVersion"] == migrated.data["to"] > 0
    (tmp_path / "wf.yaml").write_text(WRITER)
    assert cli("--output", "json", "run", "wf.yaml", "--db", "state/ops.db").rc == 0
    ledger_target.sql(tmp_path / "state" / "ops.db", "DELETE FROM artifact_refs")
    args = ("--output", "json", "artifacts", "gc", "--older-than-days", "0", "--db", "state/ops.db")
    dry = cli(*args, "--dry-run")
    assert dry.rc == 0, dry.stderr
    report = dry.data["report"]
    assert (report["considered"], report["removed"], report["reclaimedBytes"]) == (1, [], 5)
    done = cli(*args)
    assert done.rc == 0, done.stderr
    digest = done.data["report"]["blobs"][0]["digest"]
    assert done.data["report"]["removed"] == [digest] and digest.startswith("sha256:")
    assert cli("--output", "json", "artifacts", "inspect", digest, "--db", "state/ops.db").rc == 5


SLOW = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: slow }
spec:
  policy: { approval: never, processAllowlist: [sleep] }
  actions: { nap: { kind: builtin.shell.exec, command: sleep, args: ["30"] } }
  tasks:
    - { id: nap, uses: "action:nap" }
"""


def _running_run(cli: Cli) -> str:
    for _ in range(300):
        listed = cli("--output", "json", "runs", "list", "--state", "running")
        if listed.rc == 0 and listed.data["runs"]:
            return str(listed.data["runs"][0]["runId"])
        time.sleep(0.1)
    raise AssertionError("the run never started")


@pytest.mark.sqlite_only(reason="column encryption at rest is a SQLite ledger feature")
def test_encryption_is_refused_while_a_run_is_being_driven(
    cli: Cli, start_cli: StartCli, tmp_path: Path
) -> None:
    (tmp_path / "slow.yaml").write_text(SLOW)
    env = {"OPS_KEY": base64.b64encode(os.urandom(32)).decode()}
    driver = start_cli("--output", "json", "run", "slow.yaml", env=env)
    try:
        run = _running_run(cli)
        enable = ("--output", "json", "db", "encryption", "enable", "--key-id", "k1")
        refused = cli(*enable, "--key-env", "OPS_KEY", env=env)
        assert refused.rc == 5, refused.stdout
        assert f"run {run} is being driven" in refused.error["error"]["message"]
        inventory = cli("--output", "json", "db", "encryption", "inventory", env=env)
        assert inventory.data["encrypted"] is False  # nothing changed
        driver.send_signal(signal.SIGTERM)  # cuts the step (a `cancel` would let it end)
        out, err = driver.communicate(timeout=60)
    finally:
        if driver.poll() is None:
            driver.kill()
    # Without the refusal the driver died on its next write ("no such function:
    # agentctl_seal", exit 5) and left its finished effect uncertain.
    assert driver.returncode == 130, err
    assert json.loads(out)["data"]["state"] == "cancelled"
    assert cli(*enable, "--key-env", "OPS_KEY", env=env).rc == 0
