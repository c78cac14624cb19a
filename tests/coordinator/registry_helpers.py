"""Helpers for the in-process coordinator tests: compile YAML text, read effect rows."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from agentctl.coordinator import api
from agentctl.core.compiler import compile_workflow
from agentctl.core.dsl import load_workflow
from agentctl.core.plan import Plan

REPO = Path(__file__).resolve().parents[2]


def compile_text(text: str) -> tuple[Any, Plan]:
    loaded = load_workflow(text.encode("utf-8"), file="wf.yaml")
    return loaded.document, compile_workflow(loaded.document, file="wf.yaml")


def fetch_effects(db: Path) -> list[dict[str, Any]]:
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    try:
        rows = conn.execute(
            "SELECT * FROM effects ORDER BY requested_at, task_id, ordinal"
        ).fetchall()
    finally:
        conn.close()
    out = []
    for row in rows:
        item = dict(row)
        item["request"] = json.loads(row["request_json"])
        item["result"] = json.loads(row["result_json"]) if row["result_json"] else None
        out.append(item)
    return out


def start_text_run(tmp_path: Path, text: str) -> api.RunOutcome:
    """Compile ``text`` and run it in this process (real workers), its ledger in ``tmp_path``."""
    document, plan = compile_text(text)
    return api.start_run(
        document=document,
        plan=plan,
        inputs={},
        db=str(tmp_path / "runtime.db"),
        workspace=str(tmp_path),
        timeout_s=60,
    )
