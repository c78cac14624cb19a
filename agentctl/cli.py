"""The ``agentctl`` command line: parse, make one call into the package, render.

Invariants:
- no traceback ever reaches a user: every failure becomes an error envelope (JSON mode) or an
  ``error: …`` block (human mode) with the exit code of spec/cli.md §2;
- ``--output``, ``--color`` and ``--verbose`` are accepted before or after the command, and
  ``--db`` on a command group or after its subcommand (argv is normalised before parsing);
- ``--output json`` is sniffed before parsing, so even a usage error is a JSON envelope;
- heavy modules (the workflow models and compiler — ``cli_vars`` —, the ledger, trio) are
  imported inside the commands that need them, so ``agentctl check`` starts fast and a
  command on existing state (``resume``, ``runs list``) never builds the workflow models;
- the ~110 commands of the state groups are built only when the command line may name one
  (``_needs_groups``).
"""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from agentctl import __version__
from agentctl.cli_argv import normalize_argv, sniff_output
from agentctl.clikit import (
    DEFAULT_DB,
    DbOpt,
    Delivered,
    DiffOpt,
    TimeoutOpt,
    WorkspaceOpt,
    check_workspace,
    collect_from_now,
    deliver,
    ignore_interrupts,
    read_cli_file,
    report_closed_stdout,
)
from agentctl.errors import AgentctlError, CancelledRunError, ValidationError, from_os_error
from agentctl.render import (
    Outcome,
    Settings,
    dump_json,
    emit_error,
    emit_outcome,
    stream_event_printer,
    write_jsonl_line,
)

app = typer.Typer(
    name="agentctl",
    help="A durable, declarative runtime for policy-constrained agent workflows.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog=(
        "Global options, accepted before or after the command: --output human|json|jsonl, "
        "--color auto|always|never, --verbose, --offline (no network pack sources), "
        "--locked (require agentctl.pack.lock, reject drift). State commands take --db PATH "
        "(default .agentctl/runtime.db). -V/--version prints the version."
    ),
)

SETTINGS = Settings()


# --------------------------------------------------------------------------- commands


@app.command("version")
def version_cmd() -> None:
    """Print the agentctl version."""
    data = {
        "version": __version__,
        "python": ".".join(str(p) for p in sys.version_info[:3]),
        "machineOutput": "agentctl.dev/cli/v1",
    }
    deliver(Outcome("Version", data, human=lambda _s: f"agentctl {__version__}"))


VarOpt = Annotated[
    list[str] | None, typer.Option("--var", help="Variable NAME=JSON (highest layer); repeatable.")
]
VarsFileOpt = Annotated[
    list[Path] | None,
    typer.Option("--vars-file", help="YAML/JSON file of variables; repeatable."),
]


@app.command("check")
def check_cmd(
    file: Annotated[Path, typer.Argument(help="Workflow YAML file to validate.")],
    var_pairs: VarOpt = None,
    vars_files: VarsFileOpt = None,
) -> None:
    """Validate and compile a workflow without creating any state."""
    from agentctl.cli_vars import compile_with_vars
    from agentctl.core.compiler import check_result_json

    loaded, plan = compile_with_vars(file, vars_files, var_pairs)
    data = check_result_json(plan)

    def human(_s: Settings) -> str:
        return (
            f"ok: {data['workflow']} is valid ({data['tasks']} tasks)\n"
            f"workflowDigest {data['workflowDigest']}\nplanDigest     {data['planDigest']}"
        )

    deliver(Outcome("CheckResult", data, diagnostics=list(loaded.warnings), human=human))


@app.command("plan")
def plan_cmd(
    file: Annotated[Path, typer.Argument(help="Workflow YAML file to plan.")],
    var_pairs: VarOpt = None,
    vars_files: VarsFileOpt = None,
) -> None:
    """Print the compiled task graph in execution order; creates no state."""
    from agentctl.cli_vars import compile_with_vars
    from agentctl.core.compiler import plan_to_json

    loaded, plan = compile_with_vars(file, vars_files, var_pairs)
    data = plan_to_json(plan)
    deliver(Outcome("Plan", data, diagnostics=list(loaded.warnings), human=_plan_human(data)))


def _plan_human(data: dict[str, Any]) -> Any:
    from agentctl.render import table

    def human(settings: Settings) -> str:
        rows = []
        for i, task in enumerate(data.get("tasks", {}).values()):
            uses = task.get("uses") or {}
            shown = (
                f"{uses.get('kind')}:{uses.get('name')}" if uses.get("name") else uses.get("kind")
            )
            rows.append(
                [
                    str(i + 1),
                    str(task.get("id")),
                    str(task.get("kind")),
                    str(shown),
                    ", ".join(task.get("needs", [])),
                    str(task.get("predictability", "")),
                ]
            )
        head = (
            f"workflow {data.get('name')}  maxConcurrency {data.get('maxConcurrency')}\n"
            f"planDigest {data.get('planDigest')}\n"
        )
        cols = ["#", "task", "kind", "uses", "needs", "predictability"]
        return head + table("plan", cols, rows, settings)

    return human


# --------------------------------------------------------------------------- runs


def _drive(call: Callable[[Any, Any], Any], announce: str | None = None) -> NoReturn:
    """Run ``call(progress, on_created)`` under a live view (for a human at a terminal)."""
    collect_from_now()
    view = None
    if SETTINGS.output == "human" and sys.stderr.isatty():
        from agentctl.render import LiveProgress

        view = LiveProgress(color=SETTINGS.color != "never")
        if announce is not None:
            view.start(announce, "resumed")
    try:
        outcome = call(view.update if view else None, view.start if view else None)
    finally:
        if view is not None:
            view.stop()
    deliver(_outcome(outcome))


def _outcome(outcome: Any) -> Outcome:
    codes = {"succeeded": 0, "paused": 3, "cancelled": 130}
    data = outcome.to_json()

    def human(_s: Settings) -> str:
        text = f"run {data['runId']}: {data['state']}"
        if data.get("output") is not None:
            text += "\n" + dump_json(data["output"], indent=2)
        return text

    return Outcome("RunOutcome", data, exit_code=codes.get(outcome.state, 4), human=human)


InputsOpt = Annotated[str | None, typer.Option("--inputs", help="Run inputs as a JSON object.")]
InputsFileOpt = Annotated[
    Path | None, typer.Option("--inputs-file", help="File holding the inputs JSON object.")
]
InputPairsOpt = Annotated[
    list[str] | None, typer.Option("--input", help="KEY=VALUE (JSON, else text); repeatable.")
]
RunWorkspaceOpt = Annotated[
    Path | None,
    typer.Option(
        "--workspace", help="Workspace root (default: the file's dir).", callback=check_workspace
    ),
]
CheckOpt = Annotated[
    bool, typer.Option("--check", help="Preview: run only pure and observe work; write nothing.")
]


@app.command("run")
def run_cmd(
    file: Annotated[Path, typer.Argument(help="Workflow YAML file to run.")],
    db: DbOpt = DEFAULT_DB,
    inputs: InputsOpt = None,
    inputs_file: InputsFileOpt = None,
    input_pairs: InputPairsOpt = None,
    workspace: RunWorkspaceOpt = None,
    timeout_seconds: TimeoutOpt = None,
    check: CheckOpt = False,
    diff: DiffOpt = False,
    var_pairs: VarOpt = None,
    vars_files: VarsFileOpt = None,
) -> None:
    """Compile and run a workflow durably; prints the RunOutcome."""
    from agentctl.coordinator.workerstart import early_workers

    # A worker the file's kinds call for starts first: its start-up overlaps all that follows.
    with early_workers(file, preview=check) as early:
        from agentctl.coordinator import api

        variables = (vars_files, var_pairs)
        document, plan, resolved = _prepare_run(file, inputs, inputs_file, input_pairs, variables)
        _drive(
            lambda progress, created: api.start_run(
                document=document,
                plan=plan,
                inputs=resolved,
                db=db,
                workspace=str(workspace or file.resolve().parent),
                timeout_s=timeout_seconds,
                progress=progress,
                on_created=created,
                check_mode=check,
                diff=diff,
                on_stream=stream_event_printer(SETTINGS),
                early=early,
            )
        )


def _prepare_run(
    file: Path,
    inputs: str | None,
    inputs_file: Path | None,
    input_pairs: list[str] | None,
    variables: tuple[list[Path] | None, list[str] | None],
) -> tuple[Any, Any, dict[str, Any]]:
    """Compile, resolve the inputs and refuse what cannot run; returns (document, plan, inputs).

    ``variables``: the ``--vars-file`` paths and ``--var`` pairs (``cli_vars``).
    """
    from agentctl.cli_vars import compile_with_vars
    from agentctl.coordinator import api

    loaded, plan = compile_with_vars(file, *variables)
    file_text = None
    if inputs_file is not None:
        file_text = read_cli_file(inputs_file, "inputs file").decode("utf-8", "replace")
    document = loaded.document
    resolved = api.resolve_inputs(
        document["spec"].get("inputs") or {}, inputs, file_text, input_pairs or []
    )
    api.check_executable(plan, file=str(file), locate=loaded.locate)
    # The parsed models and position tables are no longer needed: free them before the run.
    # Their cycles are found by a full collection, worth its ~40 ms only for a large plan.
    del loaded
    if len(plan.tasks) >= _COLLECT_AFTER_COMPILE_TASKS:
        gc.collect()
    return document, plan, resolved


_COLLECT_AFTER_COMPILE_TASKS = 1000


@app.command("resume")
def resume_cmd(
    run: Annotated[str, typer.Argument(help="Run id (or a unique prefix).")],
    db: DbOpt = DEFAULT_DB,
    workspace: WorkspaceOpt = None,
    timeout_seconds: TimeoutOpt = None,
    diff: DiffOpt = False,
) -> None:
    """Continue a running or paused run from its durable state."""
    from agentctl.coordinator import api

    where = str(workspace) if workspace else None
    _drive(
        lambda progress, _created: api.resume(
            run,
            db=db,
            workspace=where,
            timeout_s=timeout_seconds,
            progress=progress,
            diff=diff,
            on_stream=stream_event_printer(SETTINGS),
        ),
        announce=run,
    )


@app.command("replay")
def replay_cmd(
    run: Annotated[str, typer.Argument(help="A terminal run id (or a unique prefix).")],
    db: DbOpt = DEFAULT_DB,
) -> None:
    """Recorded replay: a new linked run built from stored outputs; executes nothing."""
    from agentctl.coordinator import api

    deliver(_outcome(api.replay(run, db=db)))


@app.command("fork")
def fork_cmd(
    run: Annotated[str, typer.Argument(help="Run id (or a unique prefix) to fork.")],
    db: DbOpt = DEFAULT_DB,
    workspace: WorkspaceOpt = None,
    timeout_seconds: TimeoutOpt = None,
    diff: DiffOpt = False,
) -> None:
    """A new linked run of the same workflow and inputs that executes fresh effects."""
    from agentctl.coordinator import api

    where = str(workspace) if workspace else None
    _drive(
        lambda progress, created: api.fork(
            run,
            db=db,
            workspace=where,
            timeout_s=timeout_seconds,
            progress=progress,
            on_created=created,
            diff=diff,
        )
    )


# Built into the click group only when the command line may need them: building a typer
# command costs ~0.4 ms, and the groups hold ~110 of them — most of a short command's parse.
_CORE_COMMANDS = frozenset({"version", "check", "plan", "run", "resume", "replay", "fork"})
_groups_registered = False


def _register_state_groups() -> None:
    global _groups_registered
    if _groups_registered:
        return
    _groups_registered = True
    from agentctl import (
        cli_docs,
        cli_doctor,
        cli_encryption,
        cli_housekeeping,
        cli_inspect,
        cli_packs,
        cli_providers,
        cli_recovery,
    )
    from agentctl.cli_memory import memory_app
    from agentctl.cli_state import approvals_app, artifacts_app, db_app

    cli_inspect.register(app)
    cli_recovery.register(app)
    cli_docs.register(app, cli_inspect.runs_app)
    cli_packs.register(app)
    cli_providers.register(app)
    cli_doctor.register(app)
    cli_housekeeping.register(app)
    cli_encryption.register()

    app.add_typer(approvals_app, name="approvals")
    app.add_typer(artifacts_app, name="artifacts")
    app.add_typer(db_app, name="db")
    app.add_typer(memory_app, name="memory")


def _needs_groups(args: list[str]) -> bool:
    """Whether parsing ``args`` may touch a command outside cli.py: any command but the
    core ones, and every help or usage page (no command, top-level ``--help``)."""
    return not args or args[0] not in _CORE_COMMANDS


# --------------------------------------------------------------------------- entry point


def _run_app(args: list[str]) -> Outcome | int:
    """The command's outcome (rendered later by ``main``), or the exit code of a help page."""
    from typer._click import exceptions as click_exc

    completing = "_AGENTCTL_COMPLETE" in os.environ  # a shell asks (`completion SHELL`)
    if completing:
        from agentctl.cli_housekeeping import prepare_completion

        prepare_completion()
    if completing or _needs_groups(args):
        _register_state_groups()
    if args[:1] not in (["check"], ["plan"], ["run"], ["resume"], ["fork"]):
        collect_from_now()  # those do it once their own imports are done
    try:
        result = app(args=args, prog_name="agentctl", standalone_mode=False)
    except Delivered as done:
        return done.outcome
    except click_exc.NoArgsIsHelpError as exc:
        sys.stdout.write(exc.ctx.get_help() + "\n" if exc.ctx else "")
        return 0
    except click_exc.UsageError as exc:
        raise ValidationError(_usage_message(exc)) from exc
    except typer.Abort as exc:
        raise KeyboardInterrupt from exc
    if result == 130:  # typer swallows KeyboardInterrupt into a silent 130; our commands
        raise KeyboardInterrupt  # never return a code, so say that it was an interrupt
    return result if isinstance(result, int) else 0


def _usage_message(exc: Any) -> str:
    message = str(exc.format_message())
    ctx = getattr(exc, "ctx", None)
    if ctx is not None:
        message += f" (see '{ctx.command_path} --help')"
    return message


def _execute(args: list[str]) -> Outcome | AgentctlError | int:
    """Parse and run the command; every failure becomes the error a user should see."""
    global SETTINGS
    try:
        SETTINGS, normalized = normalize_argv(args)
        # Set on every call once loaded, so an earlier call in this process never leaks in.
        if SETTINGS.offline or SETTINGS.locked or "agentctl.packsource" in sys.modules:
            from agentctl import packsource

            packsource.MODE = packsource.PackMode(SETTINGS.offline, SETTINGS.locked)
        if normalized[:1] in (["-V"], ["--version"]):
            normalized = ["version", *normalized[1:]]
        if SETTINGS.output != "jsonl":
            return _run_app(normalized)
        from agentctl.coordinator.events import open_event_stream

        with open_event_stream(write_jsonl_line):  # the run commands' live event lines
            return _run_app(normalized)
    except AgentctlError as exc:
        if exc.exit_code == 2 and SETTINGS.output == "human":
            SETTINGS.output = sniff_output(args)  # type: ignore[assignment]
        return exc
    except KeyboardInterrupt:
        return CancelledRunError("interrupted (SIGINT) before the command finished")
    except OSError as exc:  # an OS failure no layer below classified: still a clear message
        return from_os_error(exc, str(exc.filename or "a file agentctl needed"))
    except Exception as exc:  # the last line of defence: report, never show a traceback
        if os.environ.get("AGENTCTL_DEBUG"):
            raise
        return AgentctlError(f"internal error: {type(exc).__name__}: {exc}")


def _render(result: Outcome | AgentctlError | int) -> int:
    """Write the one outcome or error; returns the exit code."""
    if isinstance(result, int):
        return result
    if isinstance(result, Outcome):
        emit_outcome(result, SETTINGS)
        return result.exit_code
    emit_error(result, SETTINGS)
    return result.exit_code


def main(argv: list[str] | None = None) -> NoReturn:
    """Console-script entry point; never lets a traceback reach the user.

    Once the outcome is decided SIGINT is ignored: an interrupt can no longer change the
    result or cut its rendering in half (an interrupt before that point is exit 130).
    """
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        result = _execute(args)
    except KeyboardInterrupt:  # landed between two statements of the handlers above
        result = CancelledRunError("interrupted (SIGINT) before the command finished")
    ignore_interrupts()
    try:
        code = _render(result)
        sys.stdout.flush()
    except BrokenPipeError:
        code = report_closed_stdout(SETTINGS)
    sys.exit(code)
