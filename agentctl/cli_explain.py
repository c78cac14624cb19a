"""``agentctl explain FILE``: which source won each task's variables (spec/cli.md §1).

Invariants: prints names, layers and sources — never a variable's value or an instruction's
text (``core.compiler.varorigins``); creates no state (no database, no directory) and makes
no network request; an invalid workflow is refused as ``check`` refuses it (exit 2, the same
diagnostics). Like ``check`` and ``doctor`` it reads the source files as they are now.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from agentctl.cli_options import RunWorkspaceOpt, VarOpt, VarsFileOpt
from agentctl.clikit import deliver, path_parser
from agentctl.render import Outcome, Settings, table


def explain_cmd(
    file: Annotated[
        Path, typer.Argument(parser=path_parser("workflow file"), help="Workflow YAML file.")
    ],
    workspace: RunWorkspaceOpt = None,
    var_pairs: VarOpt = None,
    vars_files: VarsFileOpt = None,
) -> None:
    """Which layer and source won each task's variables, without their values; the
    workflow's variable layers and instruction sources. Creates no state."""
    # Compiling imports the workflow models: only this command pays for them.
    from agentctl.cli_vars import compile_with_vars
    from agentctl.core.compiler.varorigins import explain_variables

    # The workspace decides which declared files may be read, as for check and run. The
    # origins come from the very sources the plan was compiled from (read once).
    source, plan = compile_with_vars(file, vars_files, var_pairs, workspace=workspace)
    data = explain_variables(source.document, plan, source.variables).to_json()
    human = _human(data)
    deliver(Outcome("VariableExplanation", data, diagnostics=list(source.warnings), human=human))


def _human(data: dict[str, Any]) -> Any:
    """A header, one table per task that has variables (name, layer, source), then the
    instruction sources; tasks without variables are named on one line."""

    def human(settings: Settings) -> str:
        parts = [f"{data['workflow']}  plan {data['planDigest']}", ""]
        bare = []
        for task in data["tasks"]:
            if not task["variables"]:
                bare.append(task["taskId"])
                continue
            rows = [[n, o["layer"], o["source"]] for n, o in task["variables"].items()]
            agent = f" (agent {task['agent']})" if task["agent"] else ""
            title = f"task {task['taskId']}{agent}"
            parts.append(table(title, ["name", "layer", "source"], rows, settings))
        if bare:
            parts.append("no variables: " + ", ".join(bare))
        for item in data["instructions"]:
            digest = f" {item['digest']}" if item["digest"] else ""
            parts.append(f"instructions of agent {item['agent']}: {item['source']}{digest}")
        return "\n".join(parts)

    return human


def register(main_app: typer.Typer) -> None:
    main_app.command("explain")(explain_cmd)
