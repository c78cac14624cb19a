"""The ``agentctl`` command line as typer commands: parse, make one call into the package.

Invariants:
- a usage error (click's) becomes a ``ValidationError`` (exit 2), rendered by ``cli_main``
  like every other failure; typer never prints;
- ``--db`` is accepted on a command group or after its subcommand (``cli_argv`` moves it);
- ``check`` and ``run`` keep their full typer definitions here (help, every option, every
  usage error); ``cli_fast`` parses only their plain forms without importing this module, and
  both call the same bodies (``cli_commands``);
- heavy modules (the workflow models and compiler — ``cli_vars`` —, the ledger, trio) are
  imported inside the commands that need them, so ``agentctl check`` starts fast and a
  command on existing state (``resume``, ``runs list``) never builds the workflow models;
- the ~110 commands of the state groups are built only when the command line may name one
  (``_needs_groups``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from agentctl import __version__
from agentctl.cli_commands import (
    Continuation,
    RunRequest,
    check_outcome,
    drive,
    interactive_for,
    outcome_of,
    run_outcome,
)
from agentctl.cli_guard import guard
from agentctl.cli_options import (
    CheckOpt,
    DbOpt,
    DiffOpt,
    InputPairsOpt,
    InputsFileOpt,
    InputsOpt,
    InteractiveOpt,
    RunWorkspaceOpt,
    SourceWorkspaceOpt,
    TimeoutOpt,
    VarOpt,
    VarsFileOpt,
    WorkspaceOpt,
)
from agentctl.clikit import (
    DEFAULT_DB,
    Delivered,
    collect_from_now,
    deliver,
    path_parser,
)
from agentctl.errors import ValidationError
from agentctl.render import Outcome, Settings, stream_event_printer

if TYPE_CHECKING:
    from agentctl.cli_interactive import Interactive

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
        "(default .agentctl/runtime.db). -V/--version prints the version; "
        "'agentctl help COMMAND…' is 'agentctl COMMAND… --help'."
    ),
)

SETTINGS = Settings()


# --------------------------------------------------------------------------- commands


@app.command("version")
def version_cmd() -> None:
    """Print the agentctl version."""
    data = {
        "version": __version__,
        # The original's ``Version`` names the Rust toolchain it was built with; scripts read
        # the key, and no Rust toolchain built this program, so it is present and null.
        "rust": None,
        "python": ".".join(str(p) for p in sys.version_info[:3]),
        "machineOutput": "agentctl.dev/cli/v1",
    }
    deliver(Outcome("Version", data, human=lambda _s: f"agentctl {__version__}"))


@app.command("check")
def check_cmd(
    file: Annotated[
        Path,
        typer.Argument(parser=path_parser("workflow file"), help="Workflow YAML file to validate."),
    ],
    workspace: SourceWorkspaceOpt = None,
    var_pairs: VarOpt = None,
    vars_files: VarsFileOpt = None,
) -> None:
    """Validate and compile a workflow without creating any state."""
    deliver(check_outcome(file, vars_files, var_pairs, workspace))


@app.command("plan")
def plan_cmd(
    file: Annotated[
        Path,
        typer.Argument(parser=path_parser("workflow file"), help="Workflow YAML file to plan."),
    ],
    workspace: SourceWorkspaceOpt = None,
    var_pairs: VarOpt = None,
    vars_files: VarsFileOpt = None,
) -> None:
    """Print the compiled task graph in execution order; creates no state."""
    from agentctl.cli_vars import compile_with_vars
    from agentctl.core.compiler import plan_to_json

    loaded, plan = compile_with_vars(file, vars_files, var_pairs, workspace=workspace)
    data = plan_to_json(plan)
    deliver(Outcome("Plan", data, diagnostics=list(loaded.warnings), human=_plan_human(data)))


def _plan_summary(data: dict[str, Any]) -> str:
    """The order, the effect count and the plan's predictability in the original's words
    (its getting-started guide: "task order `greet`, one effect, and `FullyPredictable`")."""
    effects = (data.get("requirements") or {}).get("effects") or []
    words = str(data.get("predictability", "")).split("_")
    camel = "".join(word.capitalize() for word in words)
    return f"order {', '.join(data.get('order') or [])}  effects {len(effects)}  {camel}"


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
            f"{_plan_summary(data)}\n"
            f"planDigest {data.get('planDigest')}\n"
        )
        cols = ["#", "task", "kind", "uses", "needs", "predictability"]
        return head + table("plan", cols, rows, settings)

    return human


# --------------------------------------------------------------------------- runs


@app.command("run")
def run_cmd(
    file: Annotated[
        Path, typer.Argument(parser=path_parser("workflow file"), help="Workflow YAML file to run.")
    ],
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
    interactive: InteractiveOpt = False,
) -> None:
    """Compile and run a workflow durably; prints the RunOutcome."""
    request = RunRequest(
        file=file,
        db=db,
        inputs=inputs,
        inputs_file=inputs_file,
        input_pairs=input_pairs,
        workspace=workspace,
        timeout_seconds=timeout_seconds,
        check=check,
        diff=diff,
        var_pairs=var_pairs,
        vars_files=vars_files,
        interactive=interactive,
    )
    deliver(run_outcome(request, SETTINGS))


@app.command("resume")
def resume_cmd(
    run: Annotated[str, typer.Argument(help="Run id (or a unique prefix).")],
    db: DbOpt = DEFAULT_DB,
    workspace: WorkspaceOpt = None,
    timeout_seconds: TimeoutOpt = None,
    diff: DiffOpt = False,
    interactive: InteractiveOpt = False,
) -> None:
    """Continue a running or paused run from its durable state."""
    from agentctl.coordinator import api

    where = str(workspace) if workspace else None
    asking = _asking(interactive, "resume", Continuation(db, where, timeout_seconds, diff))
    outcome = drive(
        SETTINGS,
        db,
        lambda progress, created: api.resume(
            run,
            db=db,
            workspace=where,
            timeout_s=timeout_seconds,
            progress=progress,
            diff=diff,
            on_stream=stream_event_printer(SETTINGS),
            interactive=interactive,
            on_created=created,
        ),
        interactive=asking,
    )
    deliver(outcome)


@app.command("replay")
def replay_cmd(
    run: Annotated[str, typer.Argument(help="A terminal run id (or a unique prefix).")],
    db: DbOpt = DEFAULT_DB,
) -> None:
    """Recorded replay: a new linked run built from stored outputs; executes nothing."""
    from agentctl.coordinator import api

    deliver(outcome_of(api.replay(run, db=db), db))


@app.command("fork")
def fork_cmd(
    run: Annotated[str, typer.Argument(help="Run id (or a unique prefix) to fork.")],
    db: DbOpt = DEFAULT_DB,
    workspace: WorkspaceOpt = None,
    timeout_seconds: TimeoutOpt = None,
    diff: DiffOpt = False,
    interactive: InteractiveOpt = False,
) -> None:
    """A new linked run of the same workflow and inputs that executes fresh effects."""
    from agentctl.coordinator import api

    where = str(workspace) if workspace else None
    asking = _asking(interactive, "fork", Continuation(db, where, timeout_seconds, diff))
    outcome = drive(
        SETTINGS,
        db,
        lambda progress, created: api.fork(
            run,
            db=db,
            workspace=where,
            timeout_s=timeout_seconds,
            progress=progress,
            on_created=created,
            diff=diff,
            interactive=interactive,
        ),
        interactive=asking,
    )
    deliver(outcome)


def _asking(interactive: bool, command: str, how: Continuation) -> Interactive | None:
    return interactive_for(how, SETTINGS, command) if interactive else None


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
        cli_explain,
        cli_housekeeping,
        cli_inspect,
        cli_packs,
        cli_providers,
        cli_queue,
        cli_recovery,
    )
    from agentctl.cli_memory import memory_app
    from agentctl.cli_state import approvals_app, artifacts_app, db_app

    cli_inspect.register(app)
    cli_recovery.register(app)
    cli_queue.register(app)
    cli_docs.register(app, cli_inspect.runs_app)
    cli_packs.register(app)
    cli_providers.register(app)
    cli_doctor.register(app)
    cli_explain.register(app)
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


def run_app(args: list[str], settings: Settings) -> Outcome | int:
    """The command's outcome (rendered later by ``cli_main``), or the exit code of a help page
    (``-h``/``--help``: 0; a missing command is a usage error, exit 2).

    ``args`` is the command line without its global flags, which ``settings`` holds.
    """
    global SETTINGS
    from typer._click import exceptions as click_exc

    SETTINGS = settings
    completing = "_AGENTCTL_COMPLETE" in os.environ  # a shell asks (`completion SHELL`)
    if completing:
        from agentctl.cli_completion import prepare_completion

        prepare_completion()
    if completing or _needs_groups(args):
        _register_state_groups()
    if args[:1] not in (["check"], ["plan"], ["run"], ["resume"], ["fork"]):
        collect_from_now()  # those do it once their own imports are done
    try:
        command = typer.main.get_command(app)
        args = _help_word(command, args)
        guard(command)  # cli_guard: the raw option tokens checked before click reads them
        result = command.main(args=args, prog_name="agentctl", standalone_mode=False)
    except Delivered as done:
        return done.outcome
    except click_exc.NoArgsIsHelpError as exc:
        raise _missing_command(exc.ctx, settings) from exc
    except click_exc.NoSuchOption as exc:
        if _group_db_only(exc):
            raise _missing_command(exc.ctx, settings) from exc
        raise ValidationError(_usage_message(exc, _dash_value_tip(exc, args))) from exc
    except click_exc.UsageError as exc:
        raise ValidationError(_usage_message(exc)) from exc
    except typer.Abort as exc:
        raise KeyboardInterrupt from exc
    if result == 130:  # typer swallows KeyboardInterrupt into a silent 130; our commands
        raise KeyboardInterrupt  # never return a code, so say that it was an interrupt
    return result if isinstance(result, int) else 0


def _help_word(command: Any, args: list[str]) -> list[str]:
    """The original's (clap's) ``help`` subcommand, which every command group has:
    ``agentctl help runs list`` and ``agentctl runs help list`` are ``agentctl runs list
    --help`` (exit 0). The words after ``help`` must name commands: an unknown one is left for
    click to refuse with its suggestion, a word after a command that has no subcommands is
    refused here (exit 2) rather than shown the help of the command before it."""
    path: list[str] = []
    for i, word in enumerate(args):
        subcommands = getattr(command, "commands", None)
        if not subcommands:
            return args  # a command's own words (``memory put help x``: the key "help")
        if word == "help" and "help" not in subcommands:
            return [*path, *_help_target(command, path, args[i + 1 :]), "--help"]
        command = subcommands.get(word)
        if command is None:
            return args
        path.append(word)
    return args


def _help_target(command: Any, path: list[str], rest: list[str]) -> list[str]:
    """``rest``, the words after ``help``, checked: each a subcommand of the one before."""
    for word in rest:
        if word.startswith("-"):
            break  # an option (``--db`` moved last by ``normalize_argv``): click reads it
        subcommands = getattr(command, "commands", None)
        if not subcommands:
            where = " ".join(["agentctl", *path])
            raise ValidationError(
                f"unrecognized subcommand '{word}': '{where}' has no subcommands"
                f" (see '{where} --help')"
            )
        command = subcommands.get(word)
        if command is None:
            break  # click refuses it, suggesting the closest name
        path = [*path, word]
    return rest


def _missing_command(ctx: Any, settings: Settings) -> ValidationError:
    """No command, or a group without its subcommand: a usage error (exit 2), as in the
    original, so a script that forgot a word fails instead of reading help as success.
    In human mode the usage page goes to stderr first; ``-h``/``--help`` stay exit 0."""
    path = ctx.command_path if ctx is not None else "agentctl"
    if settings.output == "human" and ctx is not None:
        sys.stderr.write(ctx.get_help() + "\n\n")
    return ValidationError(f"missing command: '{path}' needs one (see '{path} --help')")


def _group_db_only(exc: Any) -> bool:
    """``agentctl effects --db X``: ``normalize_argv`` moved ``--db`` to the end for the
    subcommand to read, but there is none, so the group itself saw it. That is the group with
    no subcommand (as ``agentctl effects``), not an unknown option of a group documented to
    take it (spec/cli.md §1)."""
    ctx = getattr(exc, "ctx", None)
    subcommands = getattr(getattr(ctx, "command", None), "commands", None)
    if exc.option_name != "--db" or not subcommands:
        return False
    return any("--db" in getattr(p, "opts", ()) for c in subcommands.values() for p in c.params)


def _usage_message(exc: Any, tip: str = "") -> str:
    message = str(exc.format_message()) + tip
    ctx = getattr(exc, "ctx", None)
    if ctx is not None:
        message += f" (see '{ctx.command_path} --help')"
    return message


def _dash_value_tip(exc: Any, args: list[str]) -> str:
    """How to pass a value that starts with ``-`` (``memory put NS KEY -5``: a JSON number)
    where click read an option it does not know: after ``--``, as the original (clap) tips.
    Only for a command that takes positional values and when click has no similar option
    name to suggest (``--retention-day`` is a typo, not a value). Click names the first
    short option of a cluster (``-1`` of ``-1.5``), so the tip names the whole word."""
    command = getattr(getattr(exc, "ctx", None), "command", None)
    if exc.possibilities or not any(
        getattr(p, "param_type_name", "") == "argument" for p in getattr(command, "params", ())
    ):
        return ""
    name = str(exc.option_name)
    words = args[: args.index("--")] if "--" in args else args
    for word in words:
        if (
            word == name
            or word.startswith(name + "=")
            or (not name.startswith("--") and word.startswith(name) and not word.startswith("--"))
        ):
            return f"; to pass '{word}' as a value, use '-- {word}'"
    return ""
