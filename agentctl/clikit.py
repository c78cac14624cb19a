"""Shared pieces of the command line: delivering an outcome, reading user files, common options.

Invariant: a command never prints by itself; it hands one ``Outcome`` to ``deliver`` and the
entry point renders it, so JSON mode always writes exactly one envelope.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from agentctl.errors import ValidationError
from agentctl.render import Outcome

MAX_CLI_FILE_BYTES = 1_048_576
DEFAULT_DB = ".agentctl/runtime.db"
DbOpt = Annotated[str, typer.Option("--db", help="SQLite database (default .agentctl/runtime.db).")]
DiffOpt = Annotated[bool, typer.Option("--diff", help="Include unified diffs of file writes.")]
TimeoutOpt = Annotated[
    float | None,
    typer.Option("--timeout-seconds", min=0.001, help="Overall deadline; on expiry exit 130."),
]
WorkspaceOpt = Annotated[
    Path | None, typer.Option("--workspace", help="Workspace root (default: the run's own).")
]


class Delivered(Exception):
    """Carries a finished command's outcome out of typer to ``main``."""

    def __init__(self, outcome: Outcome) -> None:
        super().__init__(outcome.kind)
        self.outcome = outcome


def deliver(outcome: Outcome) -> NoReturn:
    raise Delivered(outcome)


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


def json_file(path: Path, what: str) -> Any:
    try:
        return json.loads(read_cli_file(path, what))
    except json.JSONDecodeError as exc:
        raise ValidationError(f"{what} {path} is not valid JSON: {exc}") from exc


def compile_file(path: Path) -> Any:
    """Load and compile a workflow file; returns (LoadedWorkflow, Plan)."""
    from agentctl.core.compiler import compile_workflow
    from agentctl.core.dsl import load_workflow

    source = read_cli_file(path, "workflow file")
    loaded = load_workflow(source, file=str(path))
    plan = compile_workflow(loaded.document, file=str(path), locate=loaded.locate)
    return loaded, plan
