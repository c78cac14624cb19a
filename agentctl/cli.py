"""The ``agentctl`` command line: parse, make one call into the package, render.

Invariants:
- no traceback ever reaches a user: every failure becomes an error envelope (JSON mode) or an
  ``error: …`` block (human mode) with the exit code of spec/cli.md §2;
- ``--output``, ``--color`` and ``--verbose`` are accepted before or after the command, and
  ``--db`` on a command group or after its subcommand (argv is normalised before parsing);
- ``--output json`` is sniffed before parsing, so even a usage error is a JSON envelope;
- heavy modules (the compiler, the ledger, trio) are imported inside the commands that need
  them, so ``agentctl check`` starts fast.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from agentctl import __version__
from agentctl.errors import AgentctlError, ValidationError
from agentctl.render import Outcome, Settings, emit_error, emit_outcome

MAX_CLI_FILE_BYTES = 1_048_576

app = typer.Typer(
    name="agentctl",
    help="A durable, declarative runtime for policy-constrained agent workflows.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

SETTINGS = Settings()


class _Delivered(Exception):
    """Carries a finished command's outcome out of typer to ``main``."""

    def __init__(self, outcome: Outcome) -> None:
        super().__init__(outcome.kind)
        self.outcome = outcome


def deliver(outcome: Outcome) -> NoReturn:
    raise _Delivered(outcome)


# --------------------------------------------------------------------------- argv handling

_VALUE_FLAGS = {"--output": ("human", "json", "jsonl"), "--color": ("auto", "always", "never")}


def _sniff_output(argv: list[str]) -> str:
    for i, arg in enumerate(argv):
        if arg == "--":
            break
        if arg == "--output" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--output="):
            return arg.split("=", 1)[1]
    return "human"


def normalize_argv(argv: list[str]) -> tuple[Settings, list[str]]:
    """Pull the global flags out of ``argv`` wherever they stand; move ``--db`` to the end."""
    settings = Settings()
    rest: list[str] = []
    db: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            rest.extend(argv[i:])
            break
        name, eq, inline = arg.partition("=")
        if name in _VALUE_FLAGS or name == "--db":
            if eq:
                value = inline
            elif i + 1 < len(argv):
                value = argv[i + 1]
                i += 1
            else:
                raise ValidationError(f"option {name} requires a value")
            if name == "--db":
                db = ["--db", value]
            else:
                _apply_flag(settings, name, value)
        elif arg == "--verbose":
            settings.verbose = True
        else:
            rest.append(arg)
        i += 1
    if "--" in rest:
        cut = rest.index("--")
        return settings, rest[:cut] + db + rest[cut:]
    return settings, rest + db


def _apply_flag(settings: Settings, name: str, value: str) -> None:
    allowed = _VALUE_FLAGS[name]
    if value not in allowed:
        raise ValidationError(
            f"invalid value {value!r} for {name}; expected one of: {', '.join(allowed)}"
        )
    if name == "--output":
        settings.output = value  # type: ignore[assignment]
    else:
        settings.color = value  # type: ignore[assignment]


# --------------------------------------------------------------------------- shared helpers


def read_cli_file(path: Path, what: str = "file") -> bytes:
    """Read a user-named file of at most 1 MiB; a missing or oversize file is exit 2."""
    try:
        size = path.stat().st_size
        if size > MAX_CLI_FILE_BYTES:
            raise ValidationError(
                f"{what} {path} is {size} bytes; the limit is {MAX_CLI_FILE_BYTES} bytes"
            )
        with path.open("rb") as handle:
            data = handle.read(MAX_CLI_FILE_BYTES + 1)
    except FileNotFoundError as exc:
        raise ValidationError(f"{what} {path} does not exist") from exc
    except IsADirectoryError as exc:
        raise ValidationError(f"{what} {path} is a directory") from exc
    except PermissionError as exc:
        raise ValidationError(f"{what} {path} is not readable: permission denied") from exc
    if len(data) > MAX_CLI_FILE_BYTES:
        raise ValidationError(f"{what} {path} is larger than {MAX_CLI_FILE_BYTES} bytes")
    return data


def compile_file(path: Path) -> Any:
    """Load and compile a workflow file; returns (LoadedWorkflow, Plan)."""
    from agentctl.core.compiler import compile_workflow
    from agentctl.core.dsl import load_workflow

    source = read_cli_file(path, "workflow file")
    loaded = load_workflow(source, file=str(path))
    plan = compile_workflow(loaded.document, file=str(path), locate=loaded.locate)
    return loaded, plan


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


@app.command("check")
def check_cmd(
    file: Annotated[Path, typer.Argument(help="Workflow YAML file to validate.")],
) -> None:
    """Validate and compile a workflow without creating any state."""
    from agentctl.core.compiler import check_result_json

    loaded, plan = compile_file(file)
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
) -> None:
    """Print the compiled task graph in execution order; creates no state."""
    from agentctl.core.compiler import plan_to_json

    loaded, plan = compile_file(file)
    data = plan_to_json(plan)
    deliver(Outcome("Plan", data, diagnostics=list(loaded.warnings), human=_plan_human(data)))


def _plan_human(data: dict[str, Any]) -> Any:
    from agentctl.render import table

    def human(settings: Settings) -> str:
        rows = []
        for i, task in enumerate(data.get("tasks", [])):
            rows.append(
                [
                    str(i + 1),
                    str(task.get("id")),
                    str(task.get("kind")),
                    str(task.get("uses")),
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


# --------------------------------------------------------------------------- entry point


def _run_app(args: list[str]) -> int:
    from typer._click import exceptions as click_exc

    try:
        result = app(args=args, prog_name="agentctl", standalone_mode=False)
    except _Delivered as done:
        emit_outcome(done.outcome, SETTINGS)
        return done.outcome.exit_code
    except click_exc.NoArgsIsHelpError as exc:
        sys.stdout.write(exc.ctx.get_help() + "\n" if exc.ctx else "")
        return 0
    except click_exc.UsageError as exc:
        raise ValidationError(_usage_message(exc)) from exc
    except typer.Abort as exc:
        raise KeyboardInterrupt from exc
    return result if isinstance(result, int) else 0


def _usage_message(exc: Any) -> str:
    message = str(exc.format_message())
    ctx = getattr(exc, "ctx", None)
    if ctx is not None:
        message += f" (see '{ctx.command_path} --help')"
    return message


def main(argv: list[str] | None = None) -> NoReturn:
    """Console-script entry point; never lets a traceback reach the user."""
    global SETTINGS
    args = list(sys.argv[1:] if argv is None else argv)
    code: int
    try:
        SETTINGS, normalized = normalize_argv(args)
        code = _run_app(normalized)
    except AgentctlError as exc:
        if exc.exit_code == 2 and SETTINGS.output == "human":
            SETTINGS.output = _sniff_output(args)  # type: ignore[assignment]
        emit_error(exc, SETTINGS)
        code = exc.exit_code
    except KeyboardInterrupt:
        emit_error(AgentctlError("interrupted"), SETTINGS)
        code = 130
    except Exception as exc:  # the last line of defence: report, never show a traceback
        if os.environ.get("AGENTCTL_DEBUG"):
            raise
        emit_error(AgentctlError(f"internal error: {type(exc).__name__}: {exc}"), SETTINGS)
        code = 4
    sys.stdout.flush()
    sys.exit(code)
