"""The typer option types shared by several commands (``--db``, ``--diff``, ``--timeout-seconds``,
``--workspace``, ``--var``/``--vars-file``; and the run options ``run`` and ``submit`` share).

Invariant: their checks are ``clikit``'s, so a value is refused with the same error whether
typer parsed the command line or ``cli_fast`` did.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from agentctl.clikit import check_db_path, check_timeout, check_workspace, path_parser


def completes_to(*choices: str) -> Callable[[str], list[str]]:
    """A shell's completion of an option that takes one of ``choices`` (its own check still
    refuses anything else)."""

    def complete(incomplete: str) -> list[str]:
        return [choice for choice in choices if choice.startswith(incomplete)]

    return complete


def _db_from(ctx: typer.Context, param: typer.CallbackParam, value: str) -> str:
    """``--db``'s check, naming where a refused value came from: the option, or
    ``$AGENTCTL_DB`` when the command line gave none (the refusal must point at what to fix)."""
    source = ctx.get_parameter_source(param.name or "")
    from_env = getattr(source, "name", None) == "ENVIRONMENT"  # typer's own click's enum
    return check_db_path(value, "$AGENTCTL_DB" if from_env else "--db")


DbOpt = Annotated[
    str,
    typer.Option(
        "--db",
        help="SQLite database file or postgresql:// URL (default .agentctl/runtime.db).",
        envvar="AGENTCTL_DB",
        show_envvar=True,
        callback=_db_from,
    ),
]
DiffOpt = Annotated[bool, typer.Option("--diff", help="Include unified diffs of file writes.")]
InteractiveOpt = Annotated[
    bool,
    typer.Option(
        "--interactive",
        help="Ask at the terminal about each approval the run needs, then carry it on "
        "(needs a terminal on stdin: exit 3 without one).",
    ),
]
TimeoutOpt = Annotated[
    float | None,
    typer.Option(
        "--timeout-seconds",
        min=0.001,
        help="Overall deadline; on expiry exit 130.",
        callback=check_timeout,
    ),
]


def _workspace_option(help: str) -> Any:
    """``--workspace``: one parse and one check (an existing directory) on every command."""
    return typer.Option(
        "--workspace",
        parser=path_parser("--workspace", file=False),
        help=help,
        callback=check_workspace,
    )


WorkspaceOpt = Annotated[Path | None, _workspace_option("Workspace root (default: the run's own).")]

VarOpt = Annotated[
    list[str] | None, typer.Option("--var", help="Variable NAME=JSON (highest layer); repeatable.")
]
VarsFileOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--vars-file",
        parser=path_parser("--vars-file"),
        help="YAML/JSON file of variables; repeatable.",
    ),
]
InputsOpt = Annotated[
    str | None,
    typer.Option(
        "--inputs", help="Run inputs as a JSON object; each key declared or read by the workflow."
    ),
]
InputsFileOpt = Annotated[
    Path | None,
    typer.Option(
        "--inputs-file",
        parser=path_parser("--inputs-file"),
        help="File holding the inputs JSON object (its keys checked as --inputs' are).",
    ),
]
InputPairsOpt = Annotated[
    list[str] | None, typer.Option("--input", help="KEY=VALUE (JSON, else text); repeatable.")
]
RunWorkspaceOpt = Annotated[
    Path | None,
    _workspace_option(
        "Workspace root; the workflow's var and instruction files must lie in it "
        "(default: the file's dir)."
    ),
]
# ``check``, ``plan``, ``providers inspect``: they run nothing, so the workspace only bounds
# the files the compile reads (the plan never holds it).
SourceWorkspaceOpt = Annotated[
    Path | None,
    _workspace_option(
        "Workspace the workflow's var and instruction files must lie in (default: the file's dir)."
    ),
]
CheckOpt = Annotated[
    bool, typer.Option("--check", help="Preview: run only pure and observe work; write nothing.")
]
