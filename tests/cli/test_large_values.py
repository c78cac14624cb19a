"""Large content is stored once, in the artifact store, and every reader sees it whole.

Issue 18 item 4 / ADR 0008: a ``builtin.write`` of ~1 MiB used to add about four copies of it
to the database (effect request, result, task output, run output) besides the artifact. Now
the database grows by small rows only; the content is one blob, shared by every row and by the
written file's artifact, and inspect, templates after a crash, and replay all read it back.
"""

from __future__ import annotations

import hashlib
import json
import random
import string
from pathlib import Path

import pytest

from tests.clibackend import LedgerTarget
from tests.conftest import Cli

WF = """apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: big }
spec:
  inputs: { body: "" }
  policy: { approval: never, writableRoots: [out] }
  actions:
    save: { kind: builtin.write }
  tasks:
    - { id: save, uses: action:save, with: { path: out/big.txt, content: "${{ inputs.body }}" } }
    - id: copy
      uses: action:save
      needs: [save]
      with: { path: out/copy.txt, content: "${{ tasks.save.output.after }}" }
"""


def _body(size: int, seed: int) -> str:
    rng = random.Random(seed)
    return "".join(rng.choice(string.ascii_letters + "äö✓\n") for _ in range(size))


def _setup(tmp_path: Path, body: str) -> list[str]:
    (tmp_path / "wf.yaml").write_text(WF, encoding="utf-8")
    (tmp_path / "in.json").write_text(
        json.dumps({"body": body}, ensure_ascii=False), encoding="utf-8"
    )
    return ["run", "wf.yaml", "--db", "s/r.db", "--inputs-file", "in.json"]


def _blobs(tmp_path: Path) -> list[Path]:
    return sorted(p for p in (tmp_path / "s" / "artifacts" / "sha256").rglob("*") if p.is_file())


@pytest.mark.sqlite_only(reason="measures the growth of the SQLite file")
def test_a_large_write_grows_the_ledger_by_small_rows_only(cli: Cli, tmp_path: Path) -> None:
    small = _setup(tmp_path, "tiny")
    assert cli("--output", "json", *small).rc == 0
    before = (tmp_path / "s" / "r.db").stat().st_size

    body = _body(800 * 1024, seed=1)
    ran = cli("--output", "json", *_setup(tmp_path, body))
    assert ran.rc == 0, ran.stderr
    grown = (tmp_path / "s" / "r.db").stat().st_size - before
    encoded = body.encode("utf-8")
    assert grown < 64 * 1024 < len(encoded)  # formerly about 4 × the content

    (blob,) = [b for b in _blobs(tmp_path) if b.stat().st_size > 1024]
    assert blob.read_bytes() == encoded
    digest = "sha256:" + hashlib.sha256(encoded).hexdigest()
    listed = cli(
        "--output", "json", "artifacts", "list", "--run", ran.data["runId"], "--db", "s/r.db"
    )
    assert {a["path"]: a["digest"] for a in listed.data["references"]} == {
        "out/big.txt": digest,
        "out/copy.txt": digest,
    }

    shown = cli("--output", "json", "inspect", ran.data["runId"], "--db", "s/r.db")
    tasks = {t["taskId"]: t for t in shown.data["tasks"]}
    assert tasks["save"]["output"]["after"] == body
    assert shown.data["run"]["inputs"] == {"body": body}
    assert shown.data["run"]["output"]["copy"]["after"] == body
    effects = cli("--output", "json", "effects", "list", ran.data["runId"], "--db", "s/r.db")
    assert [e["request"]["input"]["content"] == body for e in effects.data["effects"]] == [
        True,
        True,
    ]


def test_after_a_crash_templates_and_replay_see_the_stored_content(
    cli: Cli, ledger_target: LedgerTarget, tmp_path: Path
) -> None:
    body = _body(300 * 1024, seed=2)
    # Killed once `save` committed: its outcome and completion share one transaction with
    # `copy`'s start (the pipelined commit), so `copy` is started and never ran.
    crash = {"AGENTCTL_CRASH_AT": "coordinator.after_started", "AGENTCTL_CRASH_HIT": "2"}
    killed = cli("--output", "json", *_setup(tmp_path, body), env=crash)
    assert killed.rc != 0 and not (tmp_path / "out" / "copy.txt").exists()
    listed = cli("--output", "json", "runs", "list", "--db", "s/r.db")
    (run_id,) = [r["runId"] for r in listed.data["runs"]]
    query = "SELECT output_json FROM task_states WHERE task_id = 'save'"
    [(stored,)] = ledger_target.sql(tmp_path / "s" / "r.db", query)
    assert '"$artifact"' in stored and len(stored) < 1024  # what resume reads is the reference

    blocked = cli("--output", "json", "resume", run_id, "--db", "s/r.db")
    assert blocked.rc == 3, blocked.stderr
    listed = cli("--output", "json", "effects", "list", run_id, "--db", "s/r.db").data["effects"]
    (lost,) = [e["effectId"] for e in listed if e["status"] == "uncertain"]
    reason = ["--status", "not-applied", "--reason", "out/copy.txt does not exist"]
    assert cli("effects", "reconcile", lost, *reason, "--db", "s/r.db").rc == 0
    resumed = cli("--output", "json", "resume", run_id, "--db", "s/r.db")
    assert resumed.rc == 0, resumed.stderr
    # `copy` rendered its content from `save`'s output as read back from the ledger.
    assert (tmp_path / "out" / "copy.txt").read_text(encoding="utf-8") == body
    assert resumed.data["output"]["save"]["after"] == body
    effects = cli("--output", "json", "effects", "list", run_id, "--db", "s/r.db")
    assert [(e["taskId"], e["status"]) for e in effects.data["effects"]] == [
        ("save", "succeeded"),  # reused from the ledger, not written again
        ("copy", "uncertain"),  # the attempt the kill cut short, reconciled not-applied
        ("copy", "succeeded"),
    ]

    replayed = cli("--output", "json", "replay", run_id, "--db", "s/r.db")
    assert replayed.rc == 0, replayed.stderr
    assert replayed.data["output"] == resumed.data["output"]


def test_a_held_large_write_is_recreated_identically_on_resume(
    cli: Cli, ledger_target: LedgerTarget, tmp_path: Path
) -> None:
    """The approval holds the effect row; resume rebuilds it from inputs read back from the
    artifact store, and the identity (over the real content) must match the recorded one."""
    body = _body(200 * 1024, seed=3)
    args = _setup(tmp_path, body)
    wf = tmp_path / "wf.yaml"
    wf.write_text(WF.replace("approval: never", "approval: mutations"), encoding="utf-8")
    paused = cli("--output", "json", *args)
    assert paused.rc == 3 and paused.data["state"] == "paused", paused.stderr
    run_id = paused.data["runId"]
    (approval,) = cli("--output", "json", "approvals", "list", run_id, "--db", "s/r.db").data[
        "approvals"
    ]
    assert approval["redactedInput"]["content"] == body
    [(held,)] = ledger_target.sql(tmp_path / "s" / "r.db", "SELECT request_json FROM effects")
    assert '"$artifact"' in held and body not in held  # only the digest is in the row
    approve = ["approvals", "approve", approval["approvalId"], "--reason", "ok", "--db", "s/r.db"]
    assert cli("--output", "json", *approve).rc == 0

    resumed = cli("--output", "json", "resume", run_id, "--db", "s/r.db")
    assert resumed.rc == 3, resumed.stderr  # `copy` is a mutation too: the next approval
    assert (tmp_path / "out" / "big.txt").read_text(encoding="utf-8") == body
    (saved, *_) = cli("--output", "json", "effects", "list", run_id, "--db", "s/r.db").data[
        "effects"
    ]
    assert (saved["taskId"], saved["attempt"], saved["status"]) == ("save", 1, "succeeded")
