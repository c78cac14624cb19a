"""``effects reconcile`` refused by the store's rules exits 5 (spec/cli.md §4: "Rejections
exit 4 (runtime checks) or 5 (store rules)").

The store's rules are those of the effect's recorded history: which status a first record may
take (applied / not-applied for a started or uncertain effect, compensated for a confirmed
one), which a later record may take (the same again, or applied → compensated: anything else
is "contradictory"), and which effect may stand as the compensation. They were exit 4, the
runtime checks' code. Refused like an approval that is no longer pending (§9, exit 5): nothing
is recorded, and the error names the effect's run and this invocation's trace.

A run of ``echo`` then a ``sleep`` past its timeout leaves one confirmed effect and one
uncertain one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.conftest import Cli, CliResult

FLOW = """\
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: rules }
spec:
  policy: { approval: never, processAllowlist: [echo, sleep] }
  actions:
    hi: { kind: builtin.shell.exec, command: /bin/echo, args: [hi], timeoutSeconds: 5 }
    nap: { kind: builtin.shell.exec, command: /bin/sleep, args: ["30"], timeoutSeconds: 1 }
  tasks:
    - { id: hi, uses: "action:hi" }
    - { id: nap, uses: "action:nap", needs: [hi] }
"""
DB = ("--db", "s/r.db")


def _json(cli: Cli, *args: str) -> Any:
    got = cli("--output", "json", *args, *DB)
    assert got.rc == 0, got.stderr
    return got.data


def _park(cli: Cli, tmp_path: Path) -> tuple[str, str, str]:
    """Run FLOW until ``nap``'s effect is uncertain: run id, confirmed and uncertain effect."""
    (tmp_path / "wf.yaml").write_text(FLOW, encoding="utf-8")
    (tmp_path / "result.json").write_text('{"exitCode": 0}', encoding="utf-8")
    first = cli("--output", "json", "run", "wf.yaml", *DB)
    assert first.rc == 4, first.stderr
    run_id = first.error["error"]["runId"]
    effects = {e["taskId"]: e for e in _json(cli, "effects", "list", run_id)["effects"]}
    assert (effects["hi"]["status"], effects["nap"]["status"]) == ("succeeded", "uncertain")
    return run_id, effects["hi"]["effectId"], effects["nap"]["effectId"]


def _reconcile(cli: Cli, effect: str, status: str, *flags: str) -> CliResult:
    args = ("effects", "reconcile", effect, "--status", status, "--reason", "checked")
    return cli("--output", "json", *args, *flags, *DB)


def _refused(got: CliResult, run_id: str, words: str) -> None:
    assert got.rc == 5, got.stderr
    error = got.error["error"]
    assert words in error["message"] and error["exitCode"] == 5
    assert error["runId"] == run_id and error["traceId"].startswith("trace-")


def _history(cli: Cli, effect: str) -> list[str]:
    return [r["status"] for r in _json(cli, "effects", "inspect", effect)["reconciliations"]]


def test_a_contradictory_reconciliation_is_exit_5_and_records_nothing(
    cli: Cli, tmp_path: Path
) -> None:
    run_id, _done, open_ = _park(cli, tmp_path)
    assert _reconcile(cli, open_, "not-applied").rc == 0
    contrary = _reconcile(cli, open_, "applied", "--result-file", "result.json")
    _refused(contrary, run_id, "contradictory reconciliation")
    assert _history(cli, open_) == ["not_applied"]
    assert _reconcile(cli, open_, "not-applied").rc == 0  # the same conclusion again


def test_first_record_and_compensation_rules_are_exit_5(cli: Cli, tmp_path: Path) -> None:
    run_id, done, open_ = _park(cli, tmp_path)
    applied = _reconcile(cli, done, "applied", "--result-file", "result.json")
    _refused(applied, run_id, "only a started or uncertain effect")
    undone = _reconcile(cli, open_, "compensated", "--compensation-effect", done)
    _refused(undone, run_id, "only a succeeded, confirmed effect")
    itself = _reconcile(cli, done, "compensated", "--compensation-effect", done)
    _refused(itself, run_id, "other than itself")
    unsure = _reconcile(cli, done, "compensated", "--compensation-effect", open_)
    _refused(unsure, run_id, "neither confirmed nor reconciled applied")
    assert _history(cli, done) == [] and _history(cli, open_) == []
    # What the request itself lacks stays a runtime check (exit 4), as the spec's table says.
    assert _reconcile(cli, open_, "applied").rc == 4
