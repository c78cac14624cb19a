"""Document commands: ``schema``, ``migrate`` and ``runs analyze|upgrade`` (issue 14 item 4).

Invariants: ``schema`` and ``migrate`` create no state; ``--write P`` replaces P atomically
(temporary file + rename, parents created, the mode of a plain write) and never writes
anything else, nor over a SQLite database (a ledger) or its write-ahead log; ``migrate``
refuses to write a document that does not compile to the same tasks (order and definition
fingerprints) as its source. ``runs analyze`` and ``runs upgrade --dry-run`` only read the database.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from agentctl.cli_options import DbOpt
from agentctl.clikit import DEFAULT_DB, deliver, path_parser, read_cli_file
from agentctl.errors import ValidationError
from agentctl.filemode import plain_write_mode
from agentctl.render import Outcome, Settings

if TYPE_CHECKING:  # the command imports these lazily, to keep the other commands' start light
    from agentctl.core.dsl.migrate import Migration
    from agentctl.core.plan import Plan

WriteOpt = Annotated[
    Path | None,
    typer.Option("--write", parser=path_parser("--write"), help="Write the result to this file."),
]


def _write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` as a plain write would, but a file atomically.

    An existing device or FIFO (``--write /dev/null``) is written to, never replaced: renaming
    over it would replace the node itself (a FIFO with no reader blocks, as a plain write
    does). A symbolic link is followed: the file it names is replaced, the link stays (that
    file's directory must exist, ``_link_target``). A directory is refused, and so is a
    SQLite database (``_refuse_database``). Otherwise ``_replace``."""
    try:
        found = path.stat()
    except FileNotFoundError:
        found = None
    except OSError as exc:
        raise ValidationError(f"cannot write {path}: {exc.strerror or exc}") from exc
    if found is not None and stat.S_ISDIR(found.st_mode):
        raise ValidationError(f"cannot write {path}: it is a directory")
    if found is not None and stat.S_ISREG(found.st_mode):
        _refuse_database(path)
    if found is not None and not stat.S_ISREG(found.st_mode):
        try:
            with path.open("w", encoding="utf-8") as handle:
                handle.write(text)
        except OSError as exc:
            raise ValidationError(f"cannot write {path}: {exc.strerror or exc}") from exc
        return
    _replace(_link_target(path) if path.is_symlink() else path, text)


def _link_target(link: Path) -> Path:
    """The file a symbolic link names, replaced in the link's stead. Its directory must
    exist, as a plain write needs: ``_replace`` makes the parents of the path as written,
    never along where a link points (a stale link would make directories anywhere)."""
    target = link.resolve()
    if not target.parent.is_dir():
        raise ValidationError(
            f"cannot write {link}: it is a link to {target}, whose directory does not exist"
        )
    return target


# The first bytes of a SQLite database file and of its write-ahead log (both byte orders).
_SQLITE_MAGIC = (b"SQLite format 3\x00", b"\x37\x7f\x06\x82", b"\x37\x7f\x06\x83")


def _refuse_database(path: Path) -> None:
    """A SQLite database (a ledger: the default ``.agentctl/runtime.db`` or any ``--db``) or
    its WAL is never a document to replace: replacing it would erase every run it records.
    ``schema`` and ``migrate`` take no ``--db``, so the file's own first bytes tell."""
    try:
        with path.open("rb") as handle:
            head = handle.read(16)
    except OSError:
        return  # unreadable here (mode -w-): replacing needs no read, as before; not ours
    if head.startswith(_SQLITE_MAGIC):
        raise ValidationError(
            f"refusing to write to {path}: it is a SQLite database (an agentctl ledger, or its "
            "write-ahead log); replacing it would destroy what it records, so nothing was written"
        )


def _replace(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` atomically (a reader sees the old or the new file).

    Missing parent directories are created, as the original's ``--write`` does. The file gets
    the mode a plain write would give it (an existing file keeps its mode, a new one is 0666
    minus the umask), not the temporary file's 0600: schemas and migrated workflows are meant
    to be shared. A failed write leaves no temporary file behind."""
    tmp: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        mode = plain_write_mode(path)
        fd, tmp = tempfile.mkstemp(dir=path.resolve().parent, prefix=f".{path.name}.")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
        tmp = None
    except OSError as exc:
        raise ValidationError(f"cannot write {path}: {exc.strerror or exc}") from exc
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


EventsOpt = Annotated[
    bool, typer.Option("--events", help="The schema of one --output jsonl event line instead.")
]


def schema_cmd(write: WriteOpt = None, events: EventsOpt = False) -> None:
    """Print (or write) the JSON Schema of the workflow document (or of an event line)."""
    if events:
        from agentctl.core.event_schema import EVENT_LINE_SCHEMA as schema
    else:
        from agentctl.core.dsl.schema import workflow_json_schema

        schema = workflow_json_schema()
    text = json.dumps(schema, indent=2, ensure_ascii=False) + "\n"
    if write is not None:
        _write(write, text)
    data = {"schema": schema, "written": str(write) if write else None}
    human = (lambda _s: f"wrote {write}") if write else (lambda _s: text.rstrip("\n"))
    deliver(Outcome("WorkflowSchema", data, human=human, document=write is None))


def _same_tasks(before: Any, after: Any) -> bool:
    def shape(plan: Any) -> list[tuple[str, str]]:
        return [(t.id, t.definition_fingerprint) for t in plan.tasks]

    return bool(shape(before) == shape(after) and before.order == after.order)


def migrate_cmd(
    file: Annotated[
        Path, typer.Argument(parser=path_parser("workflow file"), help="Workflow file to migrate.")
    ],
    write: WriteOpt = None,
) -> None:
    """Rewrite a workflow for apiVersion agentctl.dev/v1 (v1alpha1 or legacy playbook in)."""
    from agentctl.cli_vars import capture_vars, legacy_notes_on_refusal
    from agentctl.core.compiler import compile_workflow
    from agentctl.core.dsl import load_workflow
    from agentctl.core.dsl.migrate import migrate_source
    from agentctl.packsource import with_packs

    source = read_cli_file(file, "workflow file", diagnosed=True)
    loaded = with_packs(load_workflow(source, file=str(file)), file)
    with legacy_notes_on_refusal(loaded.warnings):
        captured = capture_vars(loaded, file, None, None)
        # Located as `check` locates them: a refusal names the line in the source migrated.
        before = compile_workflow(
            loaded.document, file=str(file), locate=loaded.locate, variables=captured
        )
    migration = migrate_source(source, file=str(file))
    migrated = with_packs(load_workflow(migration.text, file=str(file)), file)
    after = compile_workflow(migrated.document, variables=captured)
    if not _same_tasks(before, after):
        raise ValidationError(f"migrating {file} would change its tasks; nothing was written")
    if write is not None:
        _write(write, migration.text)
    data = _migration_data(file, write, migration, before, after, migrated.document)
    # The source's warnings (a legacy document's migration_required among them), as `check`
    # shows them: in human mode on stderr, so a printed document stays clean on stdout.
    human = _migrate_human(data, migration.text)
    warnings = list(loaded.warnings)
    deliver(Outcome("Migration", data, diagnostics=warnings, human=human, document=write is None))


def _migration_data(
    file: Path,
    write: Path | None,
    migration: Migration,
    before: Plan,
    after: Plan,
    document: dict[str, Any],
) -> dict[str, Any]:
    """The ``Migration`` data (``before``/``after``: the source's and the result's plans):
    ours, then the keys the original's carries."""
    data = {
        "file": str(file),
        "sourceVersion": migration.source_version,
        "targetVersion": migration.target_version,
        "changes": list(migration.changes),
        "written": str(write) if write else None,
        "document": None if write else migration.text,
        "sourcePlanDigest": before.plan_digest,
        "planDigest": after.plan_digest,
        "sameTasks": True,
    }
    return data | _original_migration_keys(file, write, migration.source_version, document)


def _original_migration_keys(
    file: Path, write: Path | None, source_version: str, document: dict[str, Any]
) -> dict[str, Any]:
    """The keys the original's ``Migration`` carries, for scripts written for it:
    ``migratedLegacy``, and ``source``/``destination`` when written, else ``workflow`` (the
    migrated document as an object)."""
    found: dict[str, Any] = {"migratedLegacy": source_version == "legacy"}
    if write is not None:
        return found | {"source": str(file), "destination": str(write)}
    return found | {"workflow": document}


def _migrate_human(data: dict[str, Any], text: str) -> Any:
    def human(_s: Settings) -> str:
        if data["written"] is None:
            return text.rstrip("\n")
        changes = "; ".join(data["changes"]) or "already current"
        return f"wrote {data['written']} ({changes})"

    return human


RunArg = Annotated[str, typer.Argument(help="Run id (or a unique prefix).")]


def runs_analyze_cmd(run: RunArg, db: DbOpt = DEFAULT_DB) -> None:
    """Which reuse metadata of a (legacy) run can be proven; changes nothing."""
    from agentctl.coordinator import upgrade

    data = upgrade.analyze(run, db=db)
    deliver(Outcome("LegacyRunUpgradeAnalysis", data, human=_runs_human(data)))


def runs_upgrade_cmd(
    run: RunArg,
    db: DbOpt = DEFAULT_DB,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Report only; write nothing.")] = False,
) -> None:
    """Persist every reuse field of a legacy run that its records prove (one transaction)."""
    from agentctl.coordinator import upgrade

    data = upgrade.upgrade(run, db=db, dry_run=dry_run)
    # spec/cli.md §1: a dry run is the analysis, so scripts see the analysis kind for it.
    kind = "LegacyRunUpgradeAnalysis" if dry_run else "LegacyRunUpgrade"
    if not dry_run:  # the original nests the analysis after the upgrade under this key
        after = {k: v for k, v in data.items() if k not in ("dryRun", "upgradedTasks", "upgradeId")}
        data = {**data, "analysisAfter": after}
    deliver(Outcome(kind, data, human=_runs_human(data)))


def _runs_human(data: dict[str, Any]) -> Any:
    def human(_s: Settings) -> str:
        proven = "yes" if data["planProven"] else "no"
        lines = [f"run {data['runId']}  plan proven: {proven}"]
        lines.append(f"upgradeable: {', '.join(data['upgradeableTasks']) or '-'}")
        missing = [t["taskId"] for t in data["unavailableTasks"]]
        lines.append(f"unavailable: {', '.join(missing) or '-'}")
        if data["recommendedRepairRoots"]:  # what the unprovable tasks leave to do
            roots = ", ".join(data["recommendedRepairRoots"])
            lines.append(f"repair from: {roots} (`repair --from` each)")
        if data.get("dryRun"):  # nothing is written: say what the upgrade would persist
            lines.append(f"would upgrade: {', '.join(data['upgradeableTasks']) or '-'}")
        elif "upgradedTasks" in data:
            lines.append(f"upgraded: {', '.join(data['upgradedTasks']) or '-'}")
        if data.get("upgradeId"):
            lines.append(f"upgrade: {data['upgradeId']}")
        return "\n".join(lines)

    return human


def register(main_app: typer.Typer, runs_app: typer.Typer) -> None:
    main_app.command("schema")(schema_cmd)
    main_app.command("migrate")(migrate_cmd)
    runs_app.command("analyze")(runs_analyze_cmd)
    runs_app.command("upgrade")(runs_upgrade_cmd)
