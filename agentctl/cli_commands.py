"""What ``check`` and ``run`` do once their command line is parsed, and how a run is driven.

Invariants:
- nothing here imports typer: the same functions serve the typer commands of ``cli`` and the
  hand-parsed fast path of ``cli_fast``, so both give the same outcome and the same errors;
- each function returns the command's one ``Outcome`` (the caller delivers it); the workflow
  models, the compiler and the coordinator are imported inside, once a command needs them;
- a run's live view (``drive``) is shown only to a human at a terminal.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentctl.clikit import collect_from_now, name_db_in_text, read_cli_text, warning_errors
from agentctl.errors import Diagnostic, ValidationError
from agentctl.render import (
    Outcome,
    Settings,
    dump_json,
    paint_state,
    paused_line,
    stream_event_printer,
)

if TYPE_CHECKING:
    from agentctl.cli_interactive import Interactive
    from agentctl.coordinator.workerstart import Prestarted
    from agentctl.core.jsonvalue import JsonObject
    from agentctl.core.plan import Plan


def check_outcome(
    file: Path,
    vars_files: list[Path] | None,
    var_pairs: list[str] | None,
    workspace: Path | None = None,
) -> Outcome:
    """``agentctl check FILE``: validate and compile; creates no state."""
    from agentctl.cli_vars import compile_with_vars
    from agentctl.core.compiler import check_result_json
    from agentctl.core.egress_reach import provider_endpoint_diagnostics

    loaded, plan = compile_with_vars(file, vars_files, var_pairs, workspace=workspace)
    # An endpoint no call can reach is a refusal run would make before anything exists: check
    # says so now (provider capabilities are part of what it validates).
    refused = provider_endpoint_diagnostics(plan, file=str(file), locate=loaded.locate)
    if refused:
        message = refused[0].message if len(refused) == 1 else "provider endpoints refused"
        raise ValidationError(message, diagnostics=refused)
    data = check_result_json(plan)

    def human(_s: Settings) -> str:
        # The original's one line, which its getting-started guide shows and scripts match;
        # the digests are in --output json (and in --verbose, which adds the data).
        return f"valid: {data['workflow']} ({data['tasks']} tasks)"

    return Outcome("CheckResult", data, diagnostics=list(loaded.warnings), human=human)


@dataclass(frozen=True)
class RunRequest:
    """The parsed options of ``agentctl run`` (see ``cli.run_cmd`` for their help)."""

    file: Path
    db: str
    inputs: str | None = None
    inputs_file: Path | None = None
    input_pairs: list[str] | None = None
    workspace: Path | None = None
    timeout_seconds: float | None = None
    check: bool = False
    diff: bool = False
    var_pairs: list[str] | None = None
    vars_files: list[Path] | None = None
    interactive: bool = False


def run_outcome(request: RunRequest, settings: Settings) -> Outcome:
    """``agentctl run FILE``: compile, then run durably to an outcome."""
    from agentctl.coordinator.workerstart import early_workers

    asking = None
    if request.interactive:
        where = str(request.workspace) if request.workspace else None
        how = Continuation(request.db, where, request.timeout_seconds, request.diff)
        asking = interactive_for(how, settings)
    # A worker the file's kinds call for starts first: its start-up overlaps all that follows.
    with early_workers(request.file, preview=request.check) as early:
        # The collector stays as start-up left it (off, in the CLI) through the compile:
        # ``drive`` turns it on and freezes the program, document and plan with it, which
        # live until the process ends, so no collection of the run scans them.
        prepared = prepare_run(request, collect=False)
        with warning_errors(prepared.warnings):
            done = _drive_new_run(settings, request, prepared, early, asking)
    # the compile's warnings, as `check` shows them
    done.diagnostics = [*prepared.warnings, *done.diagnostics]
    return done


def _drive_new_run(
    settings: Settings,
    request: RunRequest,
    prepared: PreparedRun,
    early: Prestarted,
    asking: Interactive | None,
) -> Outcome:
    from agentctl.coordinator import api

    return drive(
        settings,
        request.db,
        lambda progress, created: api.start_run(
            document=prepared.document,
            plan=prepared.plan,
            inputs=prepared.inputs,
            db=request.db,
            workspace=str(request.workspace or request.file.resolve().parent),
            timeout_s=request.timeout_seconds,
            progress=progress,
            on_created=created,
            check_mode=request.check,
            diff=request.diff,
            on_stream=stream_event_printer(settings),
            early=early,
            interactive=request.interactive,
        ),
        interactive=asking,
    )


@dataclass(frozen=True)
class PreparedRun:
    """A workflow compiled for a run, with its inputs resolved and its compile's warnings."""

    document: dict[str, Any]
    plan: Plan
    inputs: dict[str, Any]
    warnings: tuple[Diagnostic, ...]


def prepare_run(request: RunRequest, *, collect: bool = True) -> PreparedRun:
    """Compile, resolve the inputs and refuse what cannot run. ``collect``: as
    ``compile_with_vars``'s."""
    from agentctl.cli_vars import compile_with_vars
    from agentctl.coordinator import api

    file = request.file
    loaded, plan = compile_with_vars(
        file, request.vars_files, request.var_pairs, workspace=request.workspace, collect=collect
    )
    document, warnings = loaded.document, tuple(loaded.warnings)
    given = InputFlags(request.inputs, request.inputs_file, request.input_pairs)
    resolved = given.resolve(document, plan)
    api.check_executable(plan, file=str(file), locate=loaded.locate)
    # The position tables are no longer needed: freed (by reference counting) before the run.
    # No full collection here: the parsed models are let go before the compile
    # (``cli_vars.CompiledSource``) and what is left holds no cycle — one found nothing to free
    # after compiling 1,000 or 10,000 tasks and took 1.5 and 26 ms of their runs.
    del loaded
    return PreparedRun(document, plan, resolved, warnings)


@dataclass(frozen=True)
class InputFlags:
    """``--inputs`` / ``--inputs-file`` / ``--input``, as given (of ``run``, ``retry``,
    ``repair``): one parse, one validation and one set of errors for all of them."""

    inputs: str | None = None
    inputs_file: Path | None = None
    pairs: list[str] | None = None

    @property
    def given(self) -> bool:
        return self.inputs is not None or self.inputs_file is not None or bool(self.pairs)

    def resolve(
        self, document: dict[str, Any], plan: Plan, base: JsonObject | None = None
    ) -> JsonObject:
        """The flags laid over ``base`` (default: the workflow's ``spec.inputs``), checked
        against the workflow's declared and read input names (``api.resolve_inputs``; read:
        ``core.inputreads``, a sub-workflow's own ``inputs.`` being its invocation's)."""
        from agentctl.coordinator import api
        from agentctl.core.inputreads import plan_input_names, subworkflows_reading

        file_text, subworkflows = None, document["spec"].get("subworkflows") or {}
        if self.inputs is not None and self.inputs_file is not None:  # before reading the file
            raise ValidationError("--inputs and --inputs-file are mutually exclusive")
        if self.inputs_file is not None:
            file_text = read_cli_text(self.inputs_file, "inputs file")
        return api.resolve_inputs(
            document["spec"].get("inputs") or {},
            self.inputs,
            file_text,
            self.pairs or [],
            read_names=lambda: plan_input_names(plan),
            base=base,
            read_inside=lambda key: subworkflows_reading(subworkflows, key),
        )


@dataclass(frozen=True)
class Continuation:
    """How ``--interactive`` carries a paused run on after the answers: as the command that
    asked drove it (its database, ``--workspace``, ``--timeout-seconds`` for each part driven
    after an answer — time spent waiting for a person does not count — and ``--diff``)."""

    db: str
    workspace: str | None = None  # None: the run's own, as stored
    timeout_s: float | None = None
    diff: bool = False


def interactive_for(how: Continuation, settings: Settings, command: str = "run") -> Interactive:
    """What ``--interactive`` needs to carry a paused run on (refused without a terminal)."""
    from agentctl.cli_interactive import Interactive, require_terminal

    require_terminal(command)

    def resume(run_id: str, progress: Any, created: Any) -> Any:
        from agentctl.coordinator import api

        return api.resume(
            run_id,
            db=how.db,
            workspace=how.workspace,
            timeout_s=how.timeout_s,
            progress=progress,
            diff=how.diff,
            on_stream=stream_event_printer(settings),
            interactive=True,
            on_created=created,
        )

    return Interactive(db=how.db, resume=resume)


def drive(
    settings: Settings,
    db: str,
    call: Callable[[Any, Any], Any],
    interactive: Interactive | None = None,
) -> Outcome:
    """Run ``call(progress, on_created)`` on the database ``db`` under a live view (for a human
    at a terminal); with ``interactive``, a run that pauses for approvals is asked about and
    carried on."""
    collect_from_now()
    outcome = _watched(settings, call)
    if interactive is not None:
        outcome = carry_on(settings, interactive, outcome)
    return outcome_of(outcome, db)


def carry_on(settings: Settings, interactive: Interactive, outcome: Any) -> Any:
    """``outcome`` (a ``RunOutcome``) or, while its run is paused and the operator decides
    something, the outcome of resuming it after the answers (``cli_interactive``)."""
    while outcome.state == "paused":
        run_id = outcome.run_id
        if not _settled_at_prompt(interactive, run_id):
            break
        outcome = _watched(settings, functools.partial(_resumed, interactive, run_id))
    return outcome


def _settled_at_prompt(interactive: Interactive, run_id: str) -> bool:
    """``interactive.settle``; an interrupt at the prompt names the paused run (exit 130), so a
    script holding only the error can find the run to decide on and resume."""
    from agentctl.errors import CancelledRunError

    try:
        return interactive.settle(run_id)
    except KeyboardInterrupt:
        raise CancelledRunError(
            f"interrupted at the approval prompt; run {run_id} stays paused: decide with "
            "`agentctl approvals approve|reject`, then `agentctl resume`",
            run_id=run_id,
        ) from None


def _resumed(interactive: Interactive, run_id: str, progress: Any, created: Any) -> Any:
    return interactive.resume(run_id, progress, created)


def _watched(settings: Settings, call: Callable[[Any, Any], Any]) -> Any:
    """``call(progress, on_created)``; the view starts when the run is created or claimed, with
    the run's whole id and this invocation's trace."""
    view = None
    if settings.output == "human" and sys.stderr.isatty():
        from agentctl.render import LiveProgress

        view = LiveProgress(color=settings.color != "never")
    try:
        return call(view.update if view else None, view.start if view else None)
    finally:
        if view is not None:
            view.stop()


def outcome_of(outcome: Any, db: str) -> Outcome:
    """A finished run's ``RunOutcome`` envelope and its exit code (spec/cli.md §2); the human
    view of a paused run names what to run next on ``db``."""
    codes = {"succeeded": 0, "paused": 3, "cancelled": 130}
    data = outcome.to_json()

    # A failed outcome (a resume that met a rejected approval) says why, as an error would.
    failures = [f"  {task}: {error}" for task, error in outcome.errors.items() if error]

    def human(settings: Settings) -> str:
        state = paint_state(data["state"], settings.use_color(sys.stdout))
        text = f"run {data['runId']}: {state}"
        shown = data.get("output")
        # A failed run that ran to its end has what its outputs could render (docs/workflow-
        # language.md): shown when there is some; an empty one would only sit before the why.
        if shown is not None and (shown or data["state"] != "failed"):
            text += "\n" + dump_json(shown, indent=2)
        if data["state"] == "failed" and failures:
            text += "\n" + "\n".join(failures)
        if data["state"] == "paused":
            text += "\n" + name_db_in_text(paused_line(str(data["runId"])), db)
        return text

    return Outcome("RunOutcome", data, exit_code=codes.get(outcome.state, 4), human=human)
