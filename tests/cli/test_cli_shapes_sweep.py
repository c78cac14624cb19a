"""Result shapes a script reads the same way whatever the outcome (spec/cli.md §1–§3).

Each test is a discrepancy the command-by-command sweep found, checked through the real CLI:

- a repair/retry plan refused before any task is looked at (another workflow's run, a run
  that is not finished) still carries ``freshEffectSummary`` and ``approvalSummary`` with
  their fields, zeroed — a script reads ``.freshEffectSummary.total`` without a guard;
- ``effects inspect`` of an id that is neither an effect nor a run says no effect has it
  (it said only "run … not found", from the older ``effects inspect RUN`` form); a missing
  database is still reported as such;
- a reconciliation record has ``authorization`` and ``resultSchema`` (null without
  ``--result-schema-file``) wherever it is shown — ``effects reconcile`` printed
  ``resultSchema`` only when a schema was given, and the records ``effects inspect``,
  ``effects list`` and ``inspect`` read back had neither (they live in the record's
  ``effect.reconciled`` audit event).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import Cli

FAILS = """apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: first }
spec:
  actions: { check: { kind: builtin.assert } }
  tasks: [{ id: gate, uses: "action:check", with: { that: false, message: boom } }]
"""

OTHER = FAILS.replace("name: first", "name: second")

DB = ("--db", "s/r.db")


def _failed_run(cli: Cli, tmp_path: Path) -> str:
    (tmp_path / "wf.yaml").write_text(FAILS, encoding="utf-8")
    (tmp_path / "other.yaml").write_text(OTHER, encoding="utf-8")
    done = cli("--output", "json", "run", "wf.yaml", *DB)
    assert done.rc == 4, (done.stdout, done.stderr)
    return str(done.error["error"]["runId"])


def test_a_refused_repair_plan_keeps_its_summary_fields(cli: Cli, tmp_path: Path) -> None:
    source = _failed_run(cli, tmp_path)
    # The same workflow's plan, for the shape a script expects.
    usual = cli("--output", "json", "repair", "wf.yaml", source, "--from", "gate", "--plan", *DB)
    assert usual.rc == 0, (usual.stdout, usual.stderr)
    refused = cli(
        "--output", "json", "repair", "other.yaml", source, "--from", "gate", "--plan", *DB
    )
    assert refused.rc == 3, (refused.stdout, refused.stderr)
    plan = refused.data
    assert plan["compatible"] is False
    assert plan["blockedReuse"][0]["rule"] == "workflow_identity_mismatch"
    for key in ("freshEffectSummary", "approvalSummary"):
        assert set(plan[key]) == set(usual.data[key]), key
    assert plan["freshEffectSummary"] == {"total": 0, "byClass": {}, "operations": []}
    assert plan["approvalSummary"] == {"approvalPossible": 0, "tasks": []}


def test_effects_inspect_of_an_unknown_id_says_effect(cli: Cli, tmp_path: Path) -> None:
    source = _failed_run(cli, tmp_path)
    missing = cli("--output", "json", "effects", "inspect", "effect-nope", *DB)
    assert missing.rc == 5, (missing.stdout, missing.stderr)
    assert missing.error["error"]["message"].startswith("effect effect-nope not found")
    # The older `effects inspect RUN` form still lists a run's effects.
    listed = cli("--output", "json", "effects", "inspect", source, *DB)
    assert listed.rc == 0 and listed.data["runId"] == source, (listed.stdout, listed.stderr)


@pytest.mark.sqlite_only(reason="a missing database file")
def test_effects_inspect_without_a_database_creates_it(cli: Cli, tmp_path: Path) -> None:
    # A state command's --db is opened as the spec says ("parents created", "opening
    # migrates"): the new, empty ledger has no such effect, which is exit 5.
    gone = cli("--output", "json", "effects", "inspect", "effect-nope", "--db", "no/such.db")
    assert gone.rc == 5, (gone.stdout, gone.stderr)
    assert gone.error["error"]["message"].startswith("effect effect-nope not found")
    assert (tmp_path / "no" / "such.db").is_file()


# A process that outlives its timeout: the effect ends `uncertain`, to reconcile.
SLOW = """apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: slow }
spec:
  policy: { approval: never, processAllowlist: [sh] }
  actions:
    nap: { kind: builtin.shell.exec, command: /bin/sh, args: ["-c", "sleep 5"], timeoutSeconds: 1 }
  tasks: [{ id: nap, uses: "action:nap" }]
"""


def test_a_reconciliation_record_has_the_same_keys_with_or_without_a_schema(
    cli: Cli, tmp_path: Path
) -> None:
    (tmp_path / "wf.yaml").write_text(SLOW, encoding="utf-8")
    ran = cli("--output", "json", "run", "wf.yaml", *DB)
    assert ran.rc == 4, (ran.stdout, ran.stderr)
    listed = cli("--output", "json", "effects", "list", ran.error["error"]["runId"], *DB)
    [effect] = listed.data["effects"]
    assert effect["status"] == "uncertain"
    reconcile = ("--output", "json", "effects", "reconcile", effect["effectId"], *DB)
    plain = cli(*reconcile, "--status", "not-applied", "--reason", "it never ran")
    assert plain.rc == 0, (plain.stdout, plain.stderr)
    (tmp_path / "schema.json").write_text('{"type": "object"}', encoding="utf-8")
    checked = cli(
        *reconcile, "--status", "not-applied", "--reason", "again",
        "--result-schema-file", "schema.json",
    )  # fmt: skip
    assert checked.rc == 0, (checked.stdout, checked.stderr)
    assert set(plain.data) == set(checked.data)
    assert plain.data["resultSchema"] is None
    assert checked.data["resultSchema"] == {"type": "object"}
    # Read back, every record has its authorization and schema, as the original documents
    # ("every record includes … optional result and schema, authorization"), and is the
    # record `reconcile` printed.
    run_id = effect["runId"]
    seen = cli("--output", "json", "effects", "inspect", effect["effectId"], *DB).data
    listed = cli("--output", "json", "effects", "list", run_id, *DB).data
    whole = cli("--output", "json", "inspect", run_id, *DB).data
    for records in (
        seen["reconciliations"],
        listed["reconciliations"],
        whole["effectReconciliations"],
    ):
        assert records == [plain.data, checked.data]
    assert seen["effectiveReconciliation"]["authorization"]["kind"] == "policy_allow"
