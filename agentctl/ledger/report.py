"""The read model of an operator's view of one run: its inspection, lineage and approvals.

``run_report`` feeds the human ``inspect`` and the HTML report (``agentctl inspect --html``).
It adds to ``stats.RunInspection`` what an operator needs around the run: every approval ever
asked (not only the pending ones) and the run's lineage — the runs it derives from (parent or
source, transitively) and the runs derived from it (transitively).

Invariants: read-only, inside the caller's one read snapshot; values are stored as written, so
the ledger's redaction (applied before anything is persisted) holds here too.
"""

from __future__ import annotations

from dataclasses import dataclass

from agentctl.core.jsonvalue import JsonObject
from agentctl.ledger.approvals import ApprovalRecord, list_approvals
from agentctl.ledger.audit import AuditEvent
from agentctl.ledger.leases import has_live_owner
from agentctl.ledger.rows import parse_ts
from agentctl.ledger.runs import run_mode_of, run_state_of
from agentctl.ledger.sql import Db, Row
from agentctl.ledger.stats import RunInspection, run_inspection

# Task audit events that end an attempt (``retry_scheduled``: another attempt follows).
_ATTEMPT_ENDS = frozenset({"succeeded", "failed", "cancelled", "skipped", "retry_scheduled"})
# A lineage longer than this is cut: a report stays readable and a read stays bounded.
MAX_LINEAGE = 200
_COLUMNS = (
    "run_id, state, mode, workflow_name, parent_run_id, source_run_id, created_at, updated_at"
)


@dataclass(frozen=True)
class LineageRun:
    """One run of a lineage, summarised; ``relation`` says how it relates to the report's run."""

    run_id: str
    state: str
    mode: str
    workflow: str
    parent_run_id: str | None
    source_run_id: str | None
    created_at: str
    updated_at: str
    relation: str  # self | ancestor | descendant

    @property
    def derived_from(self) -> str | None:
        """The run this one was made from (a fork/replay's parent, a retry/repair's source)."""
        return self.source_run_id or self.parent_run_id

    @property
    def duration_seconds(self) -> float:
        return (parse_ts(self.updated_at) - parse_ts(self.created_at)).total_seconds()

    def to_json(self) -> JsonObject:
        return {
            "runId": self.run_id,
            "state": self.state,
            "mode": self.mode,
            "workflow": self.workflow,
            "parentRunId": self.parent_run_id,
            "sourceRunId": self.source_run_id,
            "createdAt": self.created_at,
            "updatedAt": self.updated_at,
            "relation": self.relation,
        }


@dataclass(frozen=True)
class RunReport:
    """One run as an operator reads it: everything ``inspect`` stores, plus lineage and the
    full approval history, from one snapshot."""

    inspection: RunInspection
    lineage: tuple[LineageRun, ...]  # ancestors oldest first, the run, then descendants
    approval_history: tuple[ApprovalRecord, ...]
    driven: bool = False  # a live coordinator holds the run's lease right now
    # The unresolved effects whose reconciliation the run's policy gives only with --approved
    # (the coordinator judges it: policy is not the ledger's).
    approvals_to_reconcile: frozenset[str] = frozenset()

    def attempts(self) -> tuple[AttemptSpan, ...]:
        return attempt_spans(self.inspection.audit)

    def children(self) -> tuple[LineageRun, ...]:
        """The runs made directly from this one."""
        run_id = self.inspection.run.run_id
        return tuple(r for r in self.lineage if r.derived_from == run_id)


@dataclass(frozen=True)
class AttemptSpan:
    """One attempt of a task, from its first ``task.running`` to the event that ended it."""

    task_id: str
    attempt: int
    started_at: str
    ended_at: str | None  # None: still open (running, or waiting for an approval/effect)
    outcome: str  # the ending task state, or the last state seen while open

    @property
    def duration_seconds(self) -> float | None:
        if self.ended_at is None:
            return None
        return (parse_ts(self.ended_at) - parse_ts(self.started_at)).total_seconds()


def attempt_spans(audit: tuple[AuditEvent, ...]) -> tuple[AttemptSpan, ...]:
    """The attempts the audit log shows, in the order they started.

    A paused attempt (waiting for an approval) that runs again keeps its span: the attempt
    number only changes when a retry starts a new one.
    """
    spans: list[AttemptSpan] = []
    open_by_task: dict[str, int] = {}  # task id -> index in ``spans``
    for event in audit:
        kind, _, state = event.event_type.partition(".")
        if kind != "task" or event.task_id is None:
            continue
        index = open_by_task.get(event.task_id)
        if index is None and state == "running":
            payload = event.payload if isinstance(event.payload, dict) else {}
            number = payload.get("attempt")
            attempt = number if isinstance(number, int) else 1
            open_by_task[event.task_id] = len(spans)
            spans.append(AttemptSpan(event.task_id, attempt, event.created_at, None, state))
        elif index is not None:
            ended = event.created_at if state in _ATTEMPT_ENDS else None
            span = spans[index]
            spans[index] = AttemptSpan(span.task_id, span.attempt, span.started_at, ended, state)
            if ended is not None:
                del open_by_task[event.task_id]
    return tuple(spans)


def _lineage_row(row: Row, relation: str) -> LineageRun:
    return LineageRun(
        run_id=row["run_id"],
        state=run_state_of(row),
        mode=run_mode_of(row),
        workflow=row["workflow_name"],
        parent_run_id=row["parent_run_id"],
        source_run_id=row["source_run_id"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        relation=relation,
    )


def _ancestors(conn: Db, start: LineageRun) -> list[LineageRun]:
    found: list[LineageRun] = []
    seen = {start.run_id}
    current = start.derived_from
    while current is not None and current not in seen and len(found) < MAX_LINEAGE:
        row = conn.execute(f"SELECT {_COLUMNS} FROM runs WHERE run_id = ?", (current,)).fetchone()
        if row is None:  # the source was garbage-collected: the chain ends here
            break
        seen.add(current)
        found.append(_lineage_row(row, "ancestor"))
        current = found[-1].derived_from
    return found[::-1]


def _descendants(conn: Db, run_id: str) -> list[LineageRun]:
    """Breadth first, each generation in creation order."""
    found: list[LineageRun] = []
    seen = {run_id}
    frontier = [run_id]
    while frontier and len(found) < MAX_LINEAGE:
        marks = ",".join("?" * len(frontier))
        rows = conn.execute(
            f"SELECT {_COLUMNS} FROM runs WHERE parent_run_id IN ({marks})"
            f" OR source_run_id IN ({marks}) ORDER BY created_at, run_id",
            (*frontier, *frontier),
        ).fetchall()
        fresh = [_lineage_row(r, "descendant") for r in rows if r["run_id"] not in seen]
        seen.update(r.run_id for r in fresh)
        found.extend(fresh)
        frontier = [r.run_id for r in fresh]
    return found[:MAX_LINEAGE]


def run_report(conn: Db, run_id: str) -> RunReport:
    inspection = run_inspection(conn, run_id)
    row = conn.execute(f"SELECT {_COLUMNS} FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    me = _lineage_row(row, "self")
    lineage = (*_ancestors(conn, me), me, *_descendants(conn, run_id))
    history = tuple(list_approvals(conn, run_id, status=None))
    return RunReport(inspection, lineage, history, has_live_owner(conn, run_id))
