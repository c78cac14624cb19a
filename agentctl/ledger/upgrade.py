"""``runs upgrade``: persist the reuse metadata a legacy run can be proven to have, at once.

Runs written before schema v2 (or v4, for the stored compiled plan) lack the fields selective
reuse checks: a task's definition fingerprint, output digest and output-contract fingerprint,
and the run's compiled plan. The coordinator proves what it can (``coordinator/upgrade.py``);
this module writes it.

Invariants:
- one transaction: every task update, the stored plan, and the ``run.upgraded`` audit event
  commit together or not at all;
- only fields that are NULL are written (``COALESCE``): a recorded value is never replaced,
  and upgrading twice changes nothing the second time;
- outputs, effects, checkpoints and the stored workflow are never touched.
"""

from __future__ import annotations

from dataclasses import dataclass

from agentctl.core.jsonvalue import JsonObject
from agentctl.ledger.artifacts.values import spill_text
from agentctl.ledger.audit import append_audit_txn
from agentctl.ledger.sql import Db


@dataclass(frozen=True)
class TaskUpgrade:
    """The fields an upgrade writes for one succeeded task of an old run."""

    task_id: str
    definition_fingerprint: str | None
    output_digest: str | None
    output_contract_fingerprint: str | None


@dataclass(frozen=True)
class RunUpgrade:
    """Everything an upgrade writes for one old run, in one transaction."""

    run_id: str
    tasks: tuple[TaskUpgrade, ...]
    compiled_plan_json: str | None  # written only when the run has none
    summary: JsonObject  # the audit payload
    now: str
    trace_id: str | None = None  # the upgrading invocation's, named by its audit event


def upgrade_run_txn(conn: Db, up: RunUpgrade) -> None:
    for t in up.tasks:
        conn.execute(
            "UPDATE task_states SET"
            " definition_fingerprint = COALESCE(definition_fingerprint, ?),"
            " output_digest = COALESCE(output_digest, ?),"
            " output_contract_fingerprint = COALESCE(output_contract_fingerprint, ?)"
            " WHERE run_id = ? AND task_id = ?",
            (
                t.definition_fingerprint,
                t.output_digest,
                t.output_contract_fingerprint,
                up.run_id,
                t.task_id,
            ),
        )
    if up.compiled_plan_json is not None:
        conn.execute(
            "UPDATE run_documents SET compiled_plan_json = COALESCE(compiled_plan_json, ?)"
            " WHERE run_id = ? AND plan_parts IS NULL",
            (spill_text(conn, up.compiled_plan_json, up.now), up.run_id),
        )
    append_audit_txn(conn, up.run_id, "run.upgraded", up.summary, up.now, trace_id=up.trace_id)
