"""Document commands (issue 14 item 4), through the CLI in a fresh directory.

``schema [--write P]`` prints the generated JSON Schema; ``migrate FILE [--write P]`` turns
every ``v1alpha1`` example (and a legacy playbook) into a ``v1`` document that ``check``
accepts with the same tasks; ``runs analyze|upgrade RUN`` prove and persist the reuse
metadata of a run recorded without it, after which ``retry`` can reuse its tasks.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from tests.clibackend import LedgerTarget
from tests.conftest import EXAMPLES, Cli

# Every bundled example still written against v1alpha1 (newer ones, like e10, are v1 already).
V1ALPHA1 = sorted(
    p.name
    for p in EXAMPLES.glob("*.yaml")
    if "apiVersion: agentctl.dev/v1alpha1" in p.read_text(encoding="utf-8")
)
assert len(V1ALPHA1) >= 10, V1ALPHA1


def test_schema_prints_and_writes_the_document_schema(cli: Cli, tmp_path: Path) -> None:
    printed = cli("--output", "json", "schema")
    assert printed.rc == 0, printed.stderr
    schema = printed.data["schema"]
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["properties"]["apiVersion"]["enum"] == [
        "agentctl.dev/v1alpha1",
        "agentctl.dev/v1",
    ]
    assert schema["additionalProperties"] is False and "spec" in schema["required"]
    assert "builtin.write" in schema["$defs"]["Action"]["properties"]["kind"]["enum"]
    assert "varsFiles" in schema["$defs"]["Task"]["properties"]
    written = cli("--output", "json", "schema", "--write", "schema.json")
    assert written.rc == 0 and written.data["written"] == "schema.json"
    assert json.loads((tmp_path / "schema.json").read_text()) == schema


def _plan_tasks(cli: Cli, path: Path) -> list[tuple[str, str]]:
    plan = cli("--output", "json", "plan", str(path))
    assert plan.rc == 0, plan.stderr
    return [(t, task["definitionFingerprint"]) for t, task in plan.data["tasks"].items()]


def test_write_goes_through_a_device_and_a_link_never_replacing_them(
    cli: Cli, tmp_path: Path
) -> None:
    # `--write /dev/null` as root renamed a file over the host's /dev/null. A device (a private
    # null device here) is written to like a plain write does, and stays a device; a symbolic
    # link stays a link and the file it names gets the text; a directory is refused (exit 2).
    if os.geteuid() != 0:
        pytest.skip("making a device node needs root")
    device = tmp_path / "null"
    os.mknod(device, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    written = cli("--output", "json", "schema", "--write", "null")
    assert written.rc == 0, written.stderr
    assert stat.S_ISCHR(device.lstat().st_mode) and device.lstat().st_rdev == os.makedev(1, 3)
    (tmp_path / "real.json").write_text("old")
    (tmp_path / "link.json").symlink_to("real.json")
    linked = cli("--output", "json", "schema", "--write", "link.json")
    assert linked.rc == 0, linked.stderr
    assert (tmp_path / "link.json").is_symlink()
    assert json.loads((tmp_path / "real.json").read_text())["$schema"].startswith("https://")
    (tmp_path / "dir").mkdir()
    refused = cli("--output", "json", "schema", "--write", "dir")
    assert refused.rc == 2 and "is a directory" in refused.stderr


@pytest.mark.parametrize("command", [["schema"], ["migrate", "hello.yaml"]])
def test_write_through_a_dangling_link_makes_no_directory_where_it_points(
    cli: Cli, tmp_path: Path, command: list[str]
) -> None:
    # `--write stale.json`, a link left pointing at a directory that is gone, created that
    # whole directory chain wherever the link pointed (`/nonexistent/…` as root). Parents
    # are made for the path as written; a link's target must have its directory, as a plain
    # write needs: exit 2, nothing created.
    (tmp_path / "hello.yaml").write_bytes((EXAMPLES / "hello.yaml").read_bytes())
    gone = tmp_path / "gone"
    (tmp_path / "stale.json").symlink_to(gone / "deeper" / "out.json")
    refused = cli("--output", "json", *command, "--write", "stale.json")
    assert refused.rc == 2, refused
    assert "stale.json" in refused.error["error"]["message"], refused
    assert not gone.exists()
    assert (tmp_path / "stale.json").is_symlink()


@pytest.mark.sqlite_only(reason="the ledger file overwritten here is a SQLite database")
@pytest.mark.parametrize("command", [["schema"], ["migrate", "hello.yaml"]])
def test_write_never_replaces_a_ledger(cli: Cli, tmp_path: Path, command: list[str]) -> None:
    # `--write .agentctl/runtime.db` (a mistyped destination in a script) replaced the ledger
    # with the document: every run's history gone, exit 0. A SQLite database, or its WAL, is
    # never a document to replace: exit 2, the ledger unchanged.
    (tmp_path / "hello.yaml").write_bytes((EXAMPLES / "hello.yaml").read_bytes())
    ran = cli("--output", "json", "run", "hello.yaml")
    assert ran.rc == 0, ran.stderr
    ledger = tmp_path / ".agentctl" / "runtime.db"
    for target in (ledger, tmp_path / "copy.db"):
        if target != ledger:
            target.write_bytes(ledger.read_bytes())
        before = target.read_bytes()
        refused = cli("--output", "json", *command, "--write", str(target))
        assert refused.rc == 2, refused
        assert "SQLite database" in refused.error["error"]["message"], refused
        assert target.read_bytes() == before
    listed = cli("--output", "json", "runs", "list")
    assert [r["runId"] for r in listed.data["runs"]] == [ran.data["runId"]], listed


@pytest.mark.parametrize("name", V1ALPHA1)
def test_migrate_every_example_to_v1(cli: Cli, tmp_path: Path, name: str) -> None:
    source = (EXAMPLES / name).read_text(encoding="utf-8")
    assert "apiVersion: agentctl.dev/v1alpha1" in source
    (tmp_path / name).write_text(source, encoding="utf-8")
    (tmp_path / "notes.txt").write_text("notes", encoding="utf-8")
    done = cli("--output", "json", "migrate", name, "--write", "v1.yaml")
    assert done.rc == 0, done.stderr
    assert done.data["changes"] == ["apiVersion agentctl.dev/v1alpha1 -> agentctl.dev/v1"]
    migrated = (tmp_path / "v1.yaml").read_text(encoding="utf-8")
    # Only the version changes: comments and layout survive.
    assert migrated == source.replace("agentctl.dev/v1alpha1", "agentctl.dev/v1", 1)
    assert cli("check", "v1.yaml").rc == 0
    assert _plan_tasks(cli, tmp_path / "v1.yaml") == _plan_tasks(cli, tmp_path / name)
    again = cli("--output", "json", "migrate", "v1.yaml")
    assert again.data["changes"] == [] and again.data["document"] == migrated


def test_migrate_a_legacy_playbook_and_refuse_bad_input(cli: Cli, tmp_path: Path) -> None:
    legacy = "playbook: old\nmodules: { put: { kind: builtin.assign } }\n"
    legacy += 'tasks:\n  - { id: a, uses: "module:put", with: { x: 1 } }\n'
    (tmp_path / "old.yaml").write_text(legacy, encoding="utf-8")
    done = cli("--output", "json", "migrate", "old.yaml")
    assert done.rc == 0, done.stderr
    assert done.data["sourceVersion"] == "legacy" and done.data["written"] is None
    (tmp_path / "new.yaml").write_text(done.data["document"], encoding="utf-8")
    checked = cli("--output", "json", "check", "new.yaml")
    assert checked.rc == 0 and checked.data["tasks"] == 1 and checked.stdout.count("warning") == 0
    (tmp_path / "bad.yaml").write_text(legacy.replace("id: a", "id: 1a"), encoding="utf-8")
    refused = cli("--output", "json", "migrate", "bad.yaml", "--write", "out.yaml")
    assert refused.rc == 2 and not (tmp_path / "out.yaml").exists()


LEGACY_CLASHES = {
    # The legacy key beside its new name: translating kept one and dropped the other.
    "spec.policy.approvalMode": (
        "playbook: old\nmodules: {save: {kind: builtin.write}}\n"
        "policy: {approval: always, approvalMode: never, writableRoots: [out]}\n"
        'tasks: [{id: a, uses: "module:save", with: {path: out/a.txt, content: hi}}]\n'
    ),
    "spec.modules": (
        "playbook: old\nmodules: {put: {kind: builtin.assign}}\n"
        'actions: {put2: {kind: builtin.assign}}\ntasks: [{id: a, uses: "module:put"}]\n'
    ),
}


@pytest.mark.parametrize("path", sorted(LEGACY_CLASHES))
def test_a_legacy_key_beside_its_new_name_is_refused(cli: Cli, tmp_path: Path, path: str) -> None:
    (tmp_path / "old.yaml").write_text(LEGACY_CLASHES[path], encoding="utf-8")
    for args in (("check",), ("migrate", "--write", "new.yaml"), ("run", "--db", "db.sqlite")):
        refused = cli("--output", "json", args[0], "old.yaml", *args[1:])
        assert refused.rc == 2, (args, refused.stdout)
        (diagnostic,) = refused.error["diagnostics"]
        assert diagnostic["path"] == path and "both are present" in diagnostic["message"]
        assert (diagnostic["line"], diagnostic["column"]) == (
            (3, 28) if "policy" in path else (2, 1)
        )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.yaml"]


def _forget_reuse_metadata(target: LedgerTarget, db: Path) -> None:
    """Make a run look like one recorded before these fields existed (schema v1)."""
    target.sql(
        db,
        "UPDATE task_states SET definition_fingerprint = NULL, output_digest = NULL,"
        " output_contract_fingerprint = NULL",
    )
    target.sql(db, "UPDATE run_documents SET compiled_plan_json = NULL, plan_parts = NULL")
    target.sql(db, "DELETE FROM run_plan_parts")  # schema v15


def _reused(cli: Cli, run_id: str) -> Any:
    # From the sub-workflow's own task: its boundary task before it may be reused (naming
    # ``wrap``, the task the user wrote, would make every expanded task a root).
    args = ("retry", str(EXAMPLES / "e5-subworkflow.yaml"), run_id, "--from", "wrap--echo")
    args += ("--plan",)
    got = cli("--output", "json", *args, "--db", "db.sqlite")
    # A successful root needs --restart-successful, so the plan itself is blocked (exit 3).
    assert got.rc == 3, got.stderr
    return got.data["reusedTasks"]


def test_runs_analyze_and_upgrade_a_legacy_run(
    cli: Cli, ledger_target: LedgerTarget, tmp_path: Path
) -> None:
    run = cli("--output", "json", "run", str(EXAMPLES / "e5-subworkflow.yaml"), "--db", "db.sqlite")
    run_id = run.data["runId"]
    _forget_reuse_metadata(ledger_target, tmp_path / "db.sqlite")
    assert _reused(cli, run_id) == []  # nothing provable, nothing reused
    analysis = cli("--output", "json", "runs", "analyze", run_id, "--db", "db.sqlite").data
    everything = ["wrap--inputs-a160ebeb", "wrap--echo", "wrap"]
    assert analysis["planProven"] is True and analysis["storedPlan"] is False
    assert analysis["upgradeableTasks"] == everything and analysis["unavailableTasks"] == []
    field = analysis["tasks"][1]["fields"]["definitionFingerprint"]
    assert field["status"] == "derived" and field["value"].startswith("sha256:v1:")
    dry = cli("--output", "json", "runs", "upgrade", run_id, "--dry-run", "--db", "db.sqlite")
    assert dry.data["upgradedTasks"] == [] and _reused(cli, run_id) == []
    done = cli("--output", "json", "runs", "upgrade", run_id, "--db", "db.sqlite")
    assert done.rc == 0 and done.data["upgradedTasks"] == everything
    assert done.data["storedPlan"] is True and done.data["upgradeableTasks"] == []
    assert _reused(cli, run_id) == ["wrap--inputs-a160ebeb"]
    # Recorded, derived or unavailable, a field has one shape (provenance null when recorded).
    after = cli("--output", "json", "runs", "analyze", run_id, "--db", "db.sqlite").data
    fields = [f for t in (*analysis["tasks"], *after["tasks"]) for f in t["fields"].values()]
    assert {f["status"] for f in fields} >= {"recorded", "derived"}
    assert all(set(f) == {"status", "value", "provenance"} for f in fields), fields
    audit = cli("--output", "json", "inspect", run_id, "--db", "db.sqlite").data["audit"]
    upgraded = [a for a in audit if a["eventType"] == "run.upgraded"]
    assert len(upgraded) == 1
    # The upgrade is named by an `upgrade-` id, printed and kept in its audit event.
    assert "upgradeId" not in dry.data and done.data["upgradeId"].startswith("upgrade-")
    assert upgraded[0]["payload"]["upgradeId"] == done.data["upgradeId"]
    assert "upgradeId" not in done.data["analysisAfter"]
    again = cli("--output", "json", "runs", "upgrade", run_id, "--db", "db.sqlite")
    assert again.rc == 0 and again.data["upgradedTasks"] == [] and again.data["upgradeId"] is None


def test_an_unprovable_plan_leaves_fields_unavailable(
    cli: Cli, ledger_target: LedgerTarget, tmp_path: Path
) -> None:
    run = cli("--output", "json", "run", str(EXAMPLES / "e1-dataflow.yaml"), "--db", "db.sqlite")
    _forget_reuse_metadata(ledger_target, tmp_path / "db.sqlite")
    ledger_target.sql(tmp_path / "db.sqlite", "UPDATE runs SET plan_digest = 'not-this-plan'")
    args = ("runs", "upgrade", run.data["runId"], "--db", "db.sqlite")
    done = cli("--output", "json", *args)
    assert done.rc == 0 and done.data["planProven"] is False and done.data["upgradedTasks"] == []
    assert [t["taskId"] for t in done.data["unavailableTasks"]] == ["stash", "gate"]
    assert done.data["recommendedRepairRoots"] == ["stash", "gate"]
    # The human views name them too: what to pass to `repair --from`, not only what is missing.
    for words in (cli("runs", "analyze", *args[2:]), cli(*args, "--dry-run"), cli(*args)):
        assert words.rc == 0, words.stderr
        assert "repair from: stash, gate (`repair --from` each)" in words.stdout, words.stdout


def test_runs_analyze_and_upgrade_read_as_words(
    cli: Cli, ledger_target: LedgerTarget, tmp_path: Path
) -> None:
    """The human views: yes/no rather than a language's booleans, and a dry run says what it
    would upgrade rather than that nothing was upgraded."""
    run = cli("--output", "json", "run", str(EXAMPLES / "e5-subworkflow.yaml"), "--db", "db.sqlite")
    _forget_reuse_metadata(ledger_target, tmp_path / "db.sqlite")
    args = ("runs", "upgrade", run.data["runId"], "--db", "db.sqlite")
    tasks = "wrap--inputs-a160ebeb, wrap--echo, wrap"
    analysis = cli("runs", "analyze", *args[2:])
    assert analysis.rc == 0 and "plan proven: yes" in analysis.stdout, analysis.stdout
    assert f"upgradeable: {tasks}" in analysis.stdout
    dry = cli(*args, "--dry-run")
    assert dry.rc == 0 and f"would upgrade: {tasks}" in dry.stdout, dry.stdout
    assert "upgraded:" not in dry.stdout and "True" not in dry.stdout
    done = cli(*args)
    assert done.rc == 0 and f"upgraded: {tasks}" in done.stdout, done.stdout
    assert "plan proven: yes" in done.stdout
    assert "repair from" not in analysis.stdout + done.stdout  # every task provable: none


@pytest.mark.parametrize("command", [["schema"], ["schema", "--events"], ["migrate", "hello.yaml"]])
def test_verbose_prints_a_printed_document_alone(
    cli: Cli, tmp_path: Path, command: list[str]
) -> None:
    """A schema or migrated workflow printed to stdout is a document to redirect to a file:
    `--verbose` must not append the JSON record after it (it does after `wrote P`)."""
    (tmp_path / "hello.yaml").write_text((EXAMPLES / "hello.yaml").read_text(encoding="utf-8"))
    plain = cli(*command)
    assert plain.rc == 0, plain.stderr
    verbose = cli("--verbose", *command)
    assert (verbose.rc, verbose.stdout) == (0, plain.stdout), verbose.stderr
    if command[0] == "schema":
        json.loads(verbose.stdout)
    written = cli("--verbose", *command, "--write", "out.txt")
    assert written.rc == 0, written.stderr
    record = json.loads(written.stdout.split("\n", 1)[1])
    assert record["written"] == "out.txt"
