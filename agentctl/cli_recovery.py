"""Recovery commands: ``retry``, ``repair`` and ``compensate``.

Planning is effect-free: ``--plan`` prints the plan and creates nothing, and a blocked plan is
printed (with exit 3) even without ``--plan`` — no run is created for it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from agentctl.cli_commands import Continuation, InputFlags, carry_on, interactive_for
from agentctl.cli_options import (
    DbOpt,
    DiffOpt,
    InputPairsOpt,
    InputsFileOpt,
    InputsOpt,
    InteractiveOpt,
    RunWorkspaceOpt,
    TimeoutOpt,
    VarOpt,
    VarsFileOpt,
    WorkspaceOpt,
)
from agentctl.cli_planview import recovery_view
from agentctl.clikit import (
    DEFAULT_DB,
    deliver,
    name_db_in_text,
    path_parser,
    statement,
    task_names,
    warning_errors,
)
from agentctl.core.jsonvalue import JsonObject
from agentctl.errors import ValidationError
from agentctl.render import Outcome, Settings

if TYPE_CHECKING:
    from agentctl.coordinator.remedy import Envelope

FileArg = Annotated[
    Path, typer.Argument(parser=path_parser("workflow file"), help="The target workflow file.")
]
SourceArg = Annotated[str, typer.Argument(help="The source run id (or a unique prefix).")]
FromOpt = Annotated[
    list[str] | None, typer.Option("--from", help="A repair/retry root task; repeatable.")
]
PlanOpt = Annotated[bool, typer.Option("--plan", help="Print the plan; create nothing.")]
RestartOpt = Annotated[
    bool, typer.Option("--restart-successful", help="Allow succeeded tasks as roots.")
]
ReasonOpt = Annotated[str | None, typer.Option("--reason", help="Why (recorded on the run).")]


# A derived run is driven without a live view or streamed text (as ``recover`` drives it),
# also when ``--interactive`` carries it on after the answers.
_QUIET = Settings(output="json")


def register(app: typer.Typer) -> None:
    app.command("retry")(retry_cmd)
    app.command("repair")(repair_cmd)
    app.command("compensate")(compensate_cmd)


@dataclass(frozen=True)
class _Recovery:
    """What ``retry`` and ``repair`` were asked for, as given on the command line."""

    kind: str
    file: Path
    source: str
    roots: list[str]
    failed: bool
    plan: bool
    restart: bool
    reason: str | None
    db: str
    workspace: Path | None
    timeout: float | None
    interactive: bool = False
    diff: bool = False
    given: InputFlags = field(default_factory=InputFlags)
    vars_files: list[Path] | None = None
    var_pairs: list[str] | None = None


def _recover(req: _Recovery) -> None:
    from agentctl.cli_vars import compile_with_vars

    if req.reason is not None:  # recorded on the new run: blank says nothing (exit 2)
        statement(req.reason, "--reason")
    task_names(req.roots, "--from")

    # spec/cli.md §1: the workspace of run, retry and repair defaults to the workflow file's
    # directory (resume, fork and compensate reuse the source run's own).
    where = str(req.workspace or req.file.resolve().parent)
    asking = _asking(req.interactive, req.kind, Continuation(req.db, where, req.timeout, req.diff))
    # The target is compiled as ``run`` compiles it — its var files and then the CLI layer
    # (``--vars-file``, ``--var``) — so the same flags give the source's task definitions.
    loaded, target = compile_with_vars(
        req.file, req.vars_files, req.var_pairs, workspace=req.workspace
    )
    with warning_errors(loaded.warnings):
        # Checked as ``run`` checks them, against the target, before the ledger is opened:
        # bad input flags create nothing. Laid over the source's inputs in ``recover``.
        given = req.given.resolve(loaded.document, target, base={}) if req.given.given else None
        name, data, code = _recovered(req, loaded.document, target, where, given)
        if asking is not None and data.get("state") == "paused":
            data, code = _carried_on(asking, data, req.db)
    human = _named_db(recovery_view(name, data), req.db)
    deliver(Outcome(name, data, exit_code=code, diagnostics=list(loaded.warnings), human=human))


def _recovered(
    req: _Recovery, document: dict[str, Any], target: Any, where: str, given: JsonObject | None
) -> Envelope:
    from agentctl.coordinator.remedy import recover
    from agentctl.core.compiler import plan_to_json

    return recover(
        req.kind,
        document=document,
        target=target,
        plan_json=plan_to_json(target),
        source_ref=req.source,
        db=req.db,
        roots=req.roots,
        failed_only=req.failed,
        plan_only=req.plan,
        restart_successful=req.restart,
        reason=req.reason,
        workspace=where,
        timeout_s=req.timeout,
        interactive=req.interactive,
        diff=req.diff,
        inputs=given,
    )


def _asking(interactive: bool, command: str, how: Continuation) -> Any:
    """The ``Interactive`` of ``--interactive`` (refused here without a terminal), or None."""
    return interactive_for(how, _QUIET, command) if interactive else None


def _carried_on(asking: Any, data: JsonObject, db: str) -> tuple[JsonObject, int]:
    """A derived run that paused for approvals, asked about and resumed (``--interactive``)."""
    from agentctl.coordinator.remedy import continued
    from agentctl.coordinator.service import RunOutcome

    paused = RunOutcome(str(data["runId"]), str(data["traceId"]), "paused", data.get("output"))
    return continued(data, carry_on(_QUIET, asking, paused), db)


def retry_cmd(
    file: FileArg,
    source: SourceArg,
    failed: Annotated[bool, typer.Option("--failed", help="Retry every failed task.")] = False,
    roots: FromOpt = None,
    plan: PlanOpt = False,
    restart_successful: RestartOpt = False,
    reason: ReasonOpt = None,
    db: DbOpt = DEFAULT_DB,
    workspace: RunWorkspaceOpt = None,
    timeout_seconds: TimeoutOpt = None,
    interactive: InteractiveOpt = False,
    diff: DiffOpt = False,
    inputs: InputsOpt = None,
    inputs_file: InputsFileOpt = None,
    input_pairs: InputPairsOpt = None,
    var_pairs: VarOpt = None,
    vars_files: VarsFileOpt = None,
) -> None:
    """Re-run failed (or chosen) tasks and their dependants for an identical workflow.

    Inputs: the source run's, with --inputs/--inputs-file/--input laid over them. Variables:
    the workflow's, under --vars-file and --var, as on run (give the source run's)."""
    if failed == bool(roots):
        raise ValidationError("retry needs exactly one of --failed or --from TASK")
    _recover(
        _Recovery(
            kind="retry",
            file=file,
            source=source,
            roots=roots or [],
            failed=failed,
            plan=plan,
            restart=restart_successful,
            reason=reason,
            db=db,
            workspace=workspace,
            timeout=timeout_seconds,
            interactive=interactive,
            diff=diff,
            given=InputFlags(inputs, inputs_file, input_pairs),
            vars_files=vars_files,
            var_pairs=var_pairs,
        )
    )


def repair_cmd(
    file: FileArg,
    source: SourceArg,
    roots: FromOpt = None,
    plan: PlanOpt = False,
    restart_successful: RestartOpt = False,
    reason: ReasonOpt = None,
    db: DbOpt = DEFAULT_DB,
    workspace: RunWorkspaceOpt = None,
    timeout_seconds: TimeoutOpt = None,
    interactive: InteractiveOpt = False,
    diff: DiffOpt = False,
    inputs: InputsOpt = None,
    inputs_file: InputsFileOpt = None,
    input_pairs: InputPairsOpt = None,
    var_pairs: VarOpt = None,
    vars_files: VarsFileOpt = None,
) -> None:
    """Run a corrected workflow from chosen roots, reusing every compatible earlier result.

    Inputs: the source run's, with --inputs/--inputs-file/--input laid over them. Variables:
    the workflow's, under --vars-file and --var, as on run (give the source run's)."""
    if not roots:
        raise ValidationError("repair needs at least one --from TASK")
    _recover(
        _Recovery(
            kind="repair",
            file=file,
            source=source,
            roots=roots,
            failed=False,
            plan=plan,
            restart=restart_successful,
            reason=reason,
            db=db,
            workspace=workspace,
            timeout=timeout_seconds,
            interactive=interactive,
            diff=diff,
            given=InputFlags(inputs, inputs_file, input_pairs),
            vars_files=vars_files,
            var_pairs=var_pairs,
        )
    )


def compensate_cmd(
    source: SourceArg,
    task: Annotated[
        list[str] | None, typer.Option("--task", help="Only this source task; repeatable.")
    ] = None,
    plan: PlanOpt = False,
    db: DbOpt = DEFAULT_DB,
    workspace: WorkspaceOpt = None,
    timeout_seconds: TimeoutOpt = None,
    interactive: InteractiveOpt = False,
    diff: DiffOpt = False,
) -> None:
    """Run the declared inverse actions of a run's confirmed mutations, newest first."""
    from agentctl.coordinator.remedy import compensate

    task_names(task, "--task")
    # ``--interactive`` is refused without a terminal; with one, a compensation run held for
    # approval (spec.compensation.approval) is asked about and carried on, as retry/repair.
    asking = _asking(interactive, "compensate", Continuation(db, None, timeout_seconds, diff))
    name, data, code = compensate(
        source,
        db=db,
        tasks_filter=task,
        plan_only=plan,
        workspace=str(workspace) if workspace else None,
        timeout_s=timeout_seconds,
        diff=diff,
    )
    if asking is not None and name == "CompensationOutcome" and data.get("state") == "paused":
        data, code = _compensation_carried_on(asking, data, db)
    deliver(Outcome(name, data, exit_code=code, human=_named_db(recovery_view(name, data), db)))


def _named_db(view: Callable[[Settings], str], db: str) -> Callable[[Settings], str]:
    """``view`` with ``--db`` in the commands a plan's blocks suggest (their reasons come from
    the core, which does not know the database), so each runs as printed."""
    return lambda settings: name_db_in_text(view(settings), db)


def _compensation_carried_on(asking: Any, data: JsonObject, db: str) -> tuple[JsonObject, int]:
    """A compensation run that paused for approvals, asked about and resumed."""
    from agentctl.coordinator.remedy import compensation_continued
    from agentctl.coordinator.service import RunOutcome

    paused = RunOutcome(str(data["runId"]), str(data["traceId"]), "paused", data.get("output"))
    return compensation_continued(data, carry_on(_QUIET, asking, paused), db)
