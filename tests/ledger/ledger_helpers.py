"""Helpers shared by the ledger tests: a deterministic clock and run creation."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from agentctl.ledger import NewRun
from agentctl.ledger.connection import Database
from agentctl.ledger.runs import create_run_txn

T0 = "2024-05-01T12:00:00.000Z"


def ts(second: int) -> str:
    """A deterministic clock reading ``second`` seconds after T0 (within the same hour)."""
    return f"2024-05-01T12:{second // 60:02d}:{second % 60:02d}.000Z"


def new_run(
    run_id: str = "run-1",
    *,
    limits: Mapping[str, int] | None = None,
    mode: str = "execute",
    source_run_id: str | None = None,
) -> NewRun:
    return NewRun(
        run_id=run_id,
        mode=mode,
        workflow_name="demo",
        workflow_digest="wd",
        plan_digest="pd",
        workflow={"metadata": {"name": "demo"}},
        plan={"order": ["a", "b", "c"]},
        inputs={"x": 1},
        working_memory={"count": 0},
        trace_id="trace-1",
        base_path="/tmp/ws",
        source_run_id=source_run_id,
        budget_limits=dict(limits or {}),
    )


def make_run(
    ledger: Database,
    run_id: str = "run-1",
    tasks: Sequence[str] = ("a", "b", "c"),
    *,
    limits: Mapping[str, int] | None = None,
    now: str = T0,
    mode: str = "execute",
    source_run_id: str | None = None,
) -> str:
    with ledger.transaction() as conn:
        create_run_txn(
            conn,
            new_run(run_id, limits=limits, mode=mode, source_run_id=source_run_id),
            tasks,
            now,
        )
    return run_id


def ledger_target(ledger: Any, db_path: Path) -> str:
    """What ``open_ledger`` takes for the ``ledger`` fixture's database: its URL or file."""
    return str(getattr(ledger, "url", db_path))
