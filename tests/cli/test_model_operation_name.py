"""A model call's effect operation is its provider kind (``fake``), as the original names it;
ledgers from before, which recorded ``model.<kind>``, keep working (CLI, temp dirs, SQLite).

The original's tutorial "Interrupted deployment" polls ``inspect`` until the effect with
operation ``fake`` is started: a new run's model effect is ``fake`` in ``effects list``,
``effects inspect`` and ``inspect``. A ledger written before holds ``model.fake`` effects whose
identity hashes that name (spec/cli.md §4), and stored plans naming it: such a run is made here
by rewriting a fresh one's rows as the earlier build wrote them (the operation, the identity
wherever it is referenced, the stored plan), then resumed or reconciled. Its recorded model
call must be found again under its recorded name, never sent a second time.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from agentctl.core.effects import effect_id

# A model call cut by its task's 1 s deadline (left uncertain); a tool call held for approval
# after a model call (the run pauses with that call recorded).
from tests.cli.test_agent_timeouts import WORKFLOW as SLOW
from tests.cli.test_agent_turn_approvals import FAKE as APPROVED_TOOL
from tests.conftest import Cli

DB = ("--db", "r.db")
REPLY = '{"finish":"complete","text":"from the operator","toolCalls":[],"usage":{}}'


def _json(cli: Cli, *args: str) -> Any:
    return cli("--output", "json", *args, *DB)


def _effects(cli: Cli, run_id: str) -> list[dict[str, Any]]:
    return list(_json(cli, "effects", "list", run_id).data["effects"])


def _legacy(db: Path, effect: dict[str, Any]) -> str:
    """Rewrite ``effect`` (a ``fake`` model call) and its run as the earlier build wrote them:
    operation ``model.fake``, the identity that name hashes to in every row naming the effect,
    and the stored plan's ``model.fake``. The legacy effect id."""
    old = str(effect["effectId"])
    with sqlite3.connect(db) as conn:
        digest = conn.execute(
            "SELECT input_digest FROM effects WHERE effect_id = ?", (old,)
        ).fetchone()[0]
        new = effect_id(
            effect["runId"],
            effect["taskId"],
            effect["attempt"],
            effect["ordinal"],
            "model.fake",
            digest,
        )
        conn.execute("PRAGMA foreign_keys = OFF")
        conn.execute(
            "UPDATE effects SET operation = 'model.fake', idempotency_key = ? WHERE effect_id = ?",
            (new, old),
        )
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        for table in tables:
            for col in [
                r[1] for r in conn.execute(f'PRAGMA table_info("{table}")') if r[2] == "TEXT"
            ]:
                conn.execute(
                    f'UPDATE "{table}" SET "{col}" = replace("{col}", ?, ?) WHERE instr("{col}", ?)',
                    (old, new, old),
                )
        for table, col in (
            ("run_documents", "compiled_plan_json"),
            ("run_plan_parts", "plan_text"),
        ):
            conn.execute(
                f'UPDATE {table} SET {col} = replace({col}, \'"operation":"fake"\', '
                '\'"operation":"model.fake"\')'
            )
        plans = "".join(
            text or ""
            for query in (
                "SELECT compiled_plan_json FROM run_documents",
                "SELECT plan_text FROM run_plan_parts",
            )
            for (text,) in conn.execute(query)
        )
        assert '"operation":"model.fake"' in plans  # the stored plan names it as before
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    return new


def test_a_fake_provider_model_call_is_recorded_as_operation_fake(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "wf.yaml").write_text(SLOW.replace("delayMs: 20000, ", ""), encoding="utf-8")
    done = _json(cli, "run", "wf.yaml")
    assert done.rc == 0, done.stderr
    run_id = str(done.data["runId"])
    [listed] = _effects(cli, run_id)
    assert (listed["operation"], listed["effectClass"]) == ("fake", "model")
    shown = _json(cli, "effects", "inspect", listed["effectId"]).data
    assert shown["effect"]["operation"] == "fake"
    [seen] = _json(cli, "inspect", run_id).data["effects"]
    assert (seen["operation"], seen["status"]) == ("fake", "succeeded")


@pytest.mark.sqlite_only(reason="rewrites the SQLite rows as an earlier build wrote them")
def test_a_legacy_model_call_is_reused_on_resume_never_sent_again(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "wf.yaml").write_text(APPROVED_TOOL, encoding="utf-8")
    paused = _json(cli, "run", "wf.yaml")
    assert paused.rc == 3, paused.stderr
    run_id = str(paused.data["runId"])
    model, held = _effects(cli, run_id)
    assert (model["operation"], held["status"]) == ("fake", "waiting_for_approval")
    legacy = _legacy(tmp_path / "r.db", model)
    [approval] = _json(cli, "approvals", "list", run_id).data["approvals"]
    assert _json(cli, "approvals", "approve", approval["approvalId"], "--reason", "ok").rc == 0

    done = _json(cli, "resume", run_id)
    assert done.rc == 0, done.stderr
    assert done.data["output"]["w"]["text"] == "done"
    assert (tmp_path / "out.txt").read_text() == "hello"
    after = _effects(cli, run_id)
    # The recorded call is the one used, under its recorded name and identity; only the
    # attempt's new call takes the current name.
    assert [(e["effectId"], e["operation"], e["status"]) for e in after[:1]] == [
        (legacy, "model.fake", "succeeded")
    ]
    assert after[0]["startedAt"] == model["startedAt"]
    assert [(e["ordinal"], e["operation"], e["status"]) for e in after[1:]] == [
        (1, "builtin.write", "succeeded"),
        (2, "fake", "succeeded"),
    ]
    seen = _json(cli, "inspect", run_id).data
    assert [e["operation"] for e in seen["effects"]] == ["model.fake", "builtin.write", "fake"]


@pytest.mark.sqlite_only(reason="rewrites the SQLite rows as an earlier build wrote them")
def test_a_legacy_uncertain_model_call_is_reconciled_as_a_model_call(
    cli: Cli, tmp_path: Path
) -> None:
    (tmp_path / "wf.yaml").write_text(SLOW, encoding="utf-8")
    stopped = _json(cli, "run", "wf.yaml")
    assert stopped.rc == 4, stopped.stderr
    run_id = str(stopped.error["error"]["runId"])
    [effect] = _effects(cli, run_id)
    assert (effect["operation"], effect["status"]) == ("fake", "uncertain")
    legacy = _legacy(tmp_path / "r.db", effect)

    def reconcile(result: str) -> Any:
        (tmp_path / "reply.json").write_text(result, encoding="utf-8")
        return _json(
            cli,
            "effects",
            "reconcile",
            legacy,
            "--status",
            "applied",
            "--reason",
            "seen in the provider console",
            "--result-file",
            "reply.json",
        )

    wrong = reconcile('{"text": "no finish"}')
    assert wrong.rc == 4, wrong.stderr
    assert "not a model answer" in wrong.error["error"]["message"]
    assert _json(cli, "effects", "inspect", legacy).data["reconciliations"] == []
    assert reconcile(REPLY).rc == 0
    done = _json(cli, "resume", run_id)
    assert done.rc == 0, done.stderr
    assert done.data["output"]["a"]["text"] == "from the operator"
    assert [(e["effectId"], e["operation"]) for e in _effects(cli, run_id)] == [
        (legacy, "model.fake")
    ]
