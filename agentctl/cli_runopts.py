"""The options ``run`` and ``submit`` share, and compiling a workflow for a new run.

Invariant: ``prepare_run`` refuses (exit 2) a workflow or input that cannot run before any
state is opened, so a refused ``run`` or ``submit`` writes nothing.
"""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Annotated, Any

import typer

from agentctl.clikit import check_workspace, read_cli_file

VarOpt = Annotated[
    list[str] | None, typer.Option("--var", help="Variable NAME=JSON (highest layer); repeatable.")
]
VarsFileOpt = Annotated[
    list[Path] | None,
    typer.Option("--vars-file", help="YAML/JSON file of variables; repeatable."),
]


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


def prepare_run(
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
