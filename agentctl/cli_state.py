"""Command groups over stored state that need no coordinator: ``artifacts`` and ``db``.

Each command opens the ledger (which migrates it, or refuses a newer schema with exit 5 and
changes nothing), does one read or one guarded operation, and delivers one outcome.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from agentctl.cli_options import DbOpt
from agentctl.cli_stateview import (
    artifact_export_view,
    artifact_gc_view,
    artifact_inspection_view,
    artifact_verification_view,
    db_migration_view,
    db_stats_view,
)
from agentctl.clikit import DEFAULT_DB, command_line, deliver, path_parser, statement
from agentctl.errors import ValidationError
from agentctl.render import Outcome, Settings

if TYPE_CHECKING:
    from agentctl.ledger import RunLedger

artifacts_app = typer.Typer(
    help="List, verify, export and collect stored artifacts.", no_args_is_help=True
)
db_app = typer.Typer(
    help="Database statistics, migration and encryption at rest.", no_args_is_help=True
)


def _digest(value: str) -> str:
    """A digest argument (whole, or a prefix as ``artifacts list`` shows it), checked before
    the ledger is opened (opening a missing one would create it): a malformed one is bad input
    (exit 2) that changes nothing, not an artifact that could not be found."""
    from agentctl.ledger.artifacts.store import digest_ref_of

    return digest_ref_of(value)


def _now() -> str:
    from agentctl.coordinator.clock import Clock

    return Clock().now()


def _trace_id() -> str:
    from agentctl.coordinator.clock import Clock

    return Clock().new_id("trace")


def _ledger(db: str, *, verify: bool = True) -> AbstractContextManager[RunLedger]:
    """The ledger at ``db``, closed when the block ends; opening a missing one creates it and
    its parent directories (spec/cli.md: state commands' ``--db``, "parents created";
    opening migrates). ``verify=False`` for plain reads (no quick_check of a large file)."""
    from agentctl.ledger import open_ledger

    return open_ledger(db, verify=verify)


@artifacts_app.command("list")
def artifacts_list_cmd(
    db: DbOpt = DEFAULT_DB,
    run: Annotated[str | None, typer.Option("--run", help="Only this run's references.")] = None,
    task: Annotated[
        str | None,
        typer.Option(
            "--task", help="Only this task (needs --run); a task the run lacks is exit 5."
        ),
    ] = None,
) -> None:
    """Artifact references and the blobs they name."""
    if task is not None and run is None:
        raise ValidationError("artifacts list --task needs --run")
    with _ledger(db, verify=False) as ledger:
        data = ledger.list_artifacts(run, task).to_json()
    deliver(Outcome("ArtifactList", data, human=_list_human(data)))


def _list_human(data: dict[str, Any]) -> Any:
    from agentctl.render import table

    def human(settings: Settings) -> str:
        rows = [
            [
                r.get("runId", ""),
                r.get("taskId", ""),
                r["path"],
                r["digest"][:19],
                str(r["sizeBytes"]),
            ]
            for r in data["references"]
        ]
        return table("artifacts", ["run", "task", "path", "digest", "bytes"], rows, settings)

    return human


@artifacts_app.command("inspect")
def artifacts_inspect_cmd(
    digest: Annotated[str, typer.Argument(help="sha256:<64 hex> or a unique prefix (12+ hex)")],
    db: DbOpt = DEFAULT_DB,
) -> None:
    """One blob and every reference to it."""
    digest = _digest(digest)
    with _ledger(db, verify=False) as ledger:
        data = ledger.inspect_artifact(ledger.find_artifact_digest(digest)).to_json()
    deliver(Outcome("ArtifactInspection", data, human=artifact_inspection_view(data)))


@artifacts_app.command("verify")
def artifacts_verify_cmd(
    digest: Annotated[
        str | None,
        typer.Argument(help="sha256:<64 hex> or a unique prefix (12+ hex); omit with --all"),
    ] = None,
    all_: Annotated[bool, typer.Option("--all", help="Verify every blob.")] = False,
    db: DbOpt = DEFAULT_DB,
) -> None:
    """Re-hash stored blobs; any mismatch is exit 5."""
    if (digest is None) == (not all_):
        raise ValidationError("artifacts verify needs exactly one of DIGEST or --all")
    ref = _digest(digest) if digest is not None else None
    with _ledger(db) as ledger:
        digests = None if ref is None else [ledger.find_artifact_digest(ref)]
        data = ledger.verify_artifacts(_now(), digests)
    deliver(Outcome("ArtifactVerification", data, human=artifact_verification_view(data)))


@artifacts_app.command("export")
def artifacts_export_cmd(
    digest: Annotated[str, typer.Argument(help="sha256:<64 hex> or a unique prefix (12+ hex)")],
    dest: Annotated[Path, typer.Argument(parser=path_parser("DEST"), help="Destination file.")],
    overwrite: Annotated[
        bool, typer.Option("--overwrite", help="Replace an existing file.")
    ] = False,
    db: DbOpt = DEFAULT_DB,
) -> None:
    """Copy a verified blob to DEST atomically (never through a symlink)."""
    digest = _digest(digest)
    with _ledger(db) as ledger:
        data = ledger.export_artifact(ledger.find_artifact_digest(digest), dest, overwrite)
    deliver(Outcome("ArtifactExport", data, human=artifact_export_view(data)))


@artifacts_app.command("gc")
def artifacts_gc_cmd(
    older_than_days: Annotated[int, typer.Option("--older-than-days", min=0, max=36_500)] = 30,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Report, change nothing.")] = False,
    db: DbOpt = DEFAULT_DB,
) -> None:
    """Collect unreferenced, unleased blobs and stale temporary files."""
    from agentctl.ledger import GcRequest

    request = GcRequest(_now(), older_than_days=older_than_days, dry_run=dry_run)
    with _ledger(db) as ledger:
        data = ledger.collect_artifacts(request)
    report = data.get("report")
    if isinstance(report, dict):
        data = {**data, "report": {**report, **_original_gc_keys(report, dry_run)}}
    deliver(Outcome("ArtifactGarbageCollection", data, human=artifact_gc_view(data)))


def _original_gc_keys(report: dict[str, Any], dry_run: bool) -> dict[str, Any]:
    """The original's artifact-GC counters, derived from our report, for scripts that read
    ``.data.report.removed`` / ``reclaimedBytes``: ``removed`` lists the blobs actually
    collected (none on a dry run); the candidates are the blobs and the untracked files."""
    digests = [b["digest"] for b in report["blobs"]]
    tmp = len(report["tmpFiles"])
    return {
        "considered": len(digests) + len(report["untrackedFiles"]),
        "removed": [] if dry_run else digests,
        "reclaimedBytes": report["bytes"],
        "temporaryFilesConsidered": tmp,
        "temporaryFilesRemoved": 0 if dry_run else tmp,
    }


# The original's ``DatabaseStats`` keys (flat, camelCase) → the table each one counts. Scripts
# written for it read ``.data.runs``, ``.data.effects``…; ``counts`` keeps every table by name.
ORIGINAL_STAT_KEYS = {
    "runs": "runs",
    "tasks": "task_states",
    "effects": "effects",
    "approvals": "approvals",
    "checkpoints": "checkpoints",
    "auditEvents": "audit_events",
    "providerSessions": "provider_sessions",
    "toolCalls": "tool_calls",
    "longTermMemory": "long_term_memory",
    "artifactBlobs": "artifact_blobs",
    "artifactReferences": "artifact_refs",
    "artifactIngests": "artifact_ingests",
    "effectReconciliations": "effect_reconciliations",
}


@db_app.command("stats")
def db_stats_cmd(db: DbOpt = DEFAULT_DB) -> None:
    """Schema version, size on disk and row counts."""
    with _ledger(db) as ledger:
        stats = ledger.database_stats()
    data = stats.to_json()
    for key, table in ORIGINAL_STAT_KEYS.items():
        if table in stats.counts:
            data[key] = stats.counts[table]
    deliver(Outcome("DatabaseStats", data, human=db_stats_view(data)))


@db_app.command("migrate")
def db_migrate_cmd(db: DbOpt = DEFAULT_DB) -> None:
    """Create or migrate the database to the supported schema."""
    with _ledger(db) as ledger:
        data = ledger.migration().to_json()
    # The original reports {schemaVersion, migrated: true}; scripts read those two keys.
    data = {**data, "schemaVersion": data["to"], "migrated": True}
    deliver(Outcome("DatabaseMigration", data, human=db_migration_view(data)))


approvals_app = typer.Typer(
    help="List, approve and reject pending approvals.", no_args_is_help=True
)


@approvals_app.command("list")
def approvals_list_cmd(
    run: Annotated[str, typer.Argument(help="Run id (or a unique prefix).")],
    db: DbOpt = DEFAULT_DB,
) -> None:
    """The pending approvals of a run."""
    with _ledger(db, verify=False) as ledger:
        data = ledger.list_approvals(run).to_json()
    deliver(Outcome("ApprovalList", data, human=_approvals_human(data)))


def _capability(approval: dict[str, Any]) -> str:
    """What an approval's effect may do, as the run views show it: a model call has no
    capability (its reason names the provider)."""
    return str(approval.get("capability") or approval.get("tool") or "-")


def _approvals_human(data: dict[str, Any]) -> Any:
    from agentctl.render import table

    def human(settings: Settings) -> str:
        rows = [
            [a["approvalId"], a["taskId"], _capability(a), str(a.get("reason"))]
            for a in data["approvals"]
        ]
        if not rows:
            return f"no pending approvals for {data['runId']}"
        return table("pending approvals", ["approval", "task", "capability", "why"], rows, settings)

    return human


def _resolve(approval: str, approve: bool, reason: str, actor: str, db: str) -> None:
    from agentctl.ledger import ApprovalDecision

    reason, actor = statement(reason, "--reason"), statement(actor, "--actor")
    decision = ApprovalDecision(approval, approve, actor, reason, _now(), _trace_id())
    with _ledger(db) as ledger:
        record = ledger.resolve_approval(decision)
    data = {"approvalId": record.approval_id, "status": record.status, "runId": record.run_id}
    deliver(
        Outcome(
            "ApprovalResolution",
            data,
            human=lambda _s: (
                f"{record.approval_id} {record.status}; "
                f"continue with: {command_line('resume', record.run_id, db=db)}"
            ),
        )
    )


ReasonOpt = Annotated[str, typer.Option("--reason", help="Why (required, recorded).")]
ActorOpt = Annotated[str, typer.Option("--actor", help="Who decides (recorded).")]


@approvals_app.command("approve")
def approve_cmd(
    approval: Annotated[str, typer.Argument(help="Approval id (or a unique prefix).")],
    reason: ReasonOpt,
    actor: ActorOpt = "cli-user",
    db: DbOpt = DEFAULT_DB,
) -> None:
    """Approve a pending effect; `resume` then runs it exactly once."""
    _resolve(approval, True, reason, actor, db)


@approvals_app.command("reject")
def reject_cmd(
    approval: Annotated[str, typer.Argument(help="Approval id (or a unique prefix).")],
    reason: ReasonOpt,
    actor: ActorOpt = "cli-user",
    db: DbOpt = DEFAULT_DB,
) -> None:
    """Reject a pending effect; `resume` then fails its task and the run."""
    _resolve(approval, False, reason, actor, db)
