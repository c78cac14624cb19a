"""``agentctl doctor FILE``: is this machine ready to run this workflow? (spec/cli.md §1)

Invariants: creates no state (no database file, no directory — the database is only looked
at read-only, and only if it exists); contacts no network; reads no secret value. Prints the
whole ``DoctorResult`` either way and exits 0 when ready, 6 when a check is not available.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from agentctl.cli_options import DbOpt, RunWorkspaceOpt
from agentctl.clikit import DEFAULT_DB, deliver, path_parser
from agentctl.render import Outcome, Settings

NOT_READY_EXIT = 6  # spec/cli.md §2: "doctor not ready" is a provider/remote code


def doctor_cmd(
    file: Annotated[
        Path, typer.Argument(parser=path_parser("workflow file"), help="Workflow YAML file.")
    ],
    db: DbOpt = DEFAULT_DB,
    workspace: RunWorkspaceOpt = None,
    var_pairs: Annotated[
        list[str] | None, typer.Option("--var", help="Variable NAME=JSON; repeatable.")
    ] = None,
    vars_files: Annotated[
        list[Path] | None,
        typer.Option(
            "--vars-file", parser=path_parser("--vars-file"), help="YAML/JSON variables file."
        ),
    ] = None,
) -> None:
    """What this workflow needs here (engine, images, credentials, roots, programs, database);
    exit 0 when ready, 6 when not. Creates no state and makes no network request."""
    # Compiling imports the workflow models: only this command pays for them.
    from agentctl.cli_vars import compile_with_vars
    from agentctl.coordinator.doctor import diagnose
    from agentctl.core.compiler import check_result_json

    loaded, plan = compile_with_vars(file, vars_files, var_pairs, workspace=workspace)
    summary = check_result_json(plan)
    meta = (str(summary["workflow"]), str(summary["planDigest"]))
    where = str((workspace or file.resolve().parent).resolve())
    report = diagnose(plan, meta, where, db)
    data = report.to_json()
    code = 0 if report.ready else NOT_READY_EXIT
    warnings = list(loaded.warnings)
    deliver(Outcome("DoctorResult", data, code, diagnostics=warnings, human=_human(data)))


def _human(data: dict[str, Any]) -> Any:
    """One line per check (flag, status, what), its detail indented below: long image
    references and paths stay whole and copyable at any terminal width."""

    def human(_settings: Settings) -> str:
        verdict = "ready" if data["ready"] else "NOT ready"
        lines = [f"{data['workflow']}: {verdict} to run here", ""]
        for c in data["checks"]:
            flag = "ok" if c["available"] else "MISSING"
            lines.append(f"{flag:<8} {c['status']:<16} {c['check']}")
            lines.append(f"{'':<25} {c['detail']}")
        if data["unverified"]:
            lines += ["", "not verified (doctor makes no network request, runs no helper):"]
            lines += [f"  {u['what']}: {u['target']}" for u in data["unverified"]]
        return "\n".join(lines)

    return human


def register(main_app: typer.Typer) -> None:
    main_app.command("doctor")(doctor_cmd)
