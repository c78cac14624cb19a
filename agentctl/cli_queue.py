"""The run queue's commands: ``submit`` (record a run as queued) and ``serve`` (drive them).

``submit`` validates and compiles exactly like ``run`` and refuses the same things before any
state exists; nothing executes. ``serve`` claims queued or orphaned runs and drives them
(``coordinator/serve.py``, docs/scale-out.md); any number of them may share one ledger.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated

import typer

from agentctl.cli_commands import RunRequest, prepare_run
from agentctl.cli_options import (
    DbOpt,
    InputPairsOpt,
    InputsFileOpt,
    InputsOpt,
    RunWorkspaceOpt,
    VarOpt,
    VarsFileOpt,
)
from agentctl.clikit import DEFAULT_DB, deliver, path_parser
from agentctl.errors import ValidationError
from agentctl.render import Outcome, Settings


def register(app: typer.Typer) -> None:
    app.command("submit")(submit_cmd)
    app.command("serve")(serve_cmd)


def submit_cmd(
    file: Annotated[
        Path,
        typer.Argument(parser=path_parser("workflow file"), help="Workflow YAML file to queue."),
    ],
    db: DbOpt = DEFAULT_DB,
    inputs: InputsOpt = None,
    inputs_file: InputsFileOpt = None,
    input_pairs: InputPairsOpt = None,
    workspace: RunWorkspaceOpt = None,
    var_pairs: VarOpt = None,
    vars_files: VarsFileOpt = None,
) -> None:
    """Validate and compile a workflow and record the run as queued for `serve`; prints its id."""
    from agentctl.coordinator import api

    request = RunRequest(
        file,
        db,
        inputs,
        inputs_file,
        input_pairs,
        workspace,
        var_pairs=var_pairs,
        vars_files=vars_files,
    )
    prepared = prepare_run(request)
    data = api.submit_run(
        document=prepared.document,
        plan=prepared.plan,
        inputs=prepared.inputs,
        db=db,
        workspace=str(workspace or file.resolve().parent),
    )
    queued = f"run {data['runId']}: queued"
    deliver(
        Outcome("Submission", data, diagnostics=list(prepared.warnings), human=lambda _s: queued)
    )


MAX_SECONDS = 86400.0  # a day: --lease-seconds and --poll-seconds beyond it are typos
# Drives one process holds at once, each with its own worker slot: far beyond a host's
# processes, a larger number is a typo (it would also mint that many traces every round).
MAX_RUNS = 1024

MaxRunsOpt = Annotated[int, typer.Option("--max-runs", help="Runs driven at once.")]
LeaseOpt = Annotated[
    float, typer.Option("--lease-seconds", help="Lease length; a heartbeat renews it.")
]
PollOpt = Annotated[float, typer.Option("--poll-seconds", help="Wait between claims when idle.")]
OnceOpt = Annotated[bool, typer.Option("--once", help="Claim once, drive those runs, exit.")]
IdleOpt = Annotated[
    bool, typer.Option("--exit-when-idle", help="Exit when no submitted run is left to drive.")
]


def serve_cmd(
    db: DbOpt = DEFAULT_DB,
    max_runs: MaxRunsOpt = 4,
    lease_seconds: LeaseOpt = 30.0,
    poll_seconds: PollOpt = 1.0,
    once: OnceOpt = False,
    exit_when_idle: IdleOpt = False,
) -> None:
    """Claim queued or orphaned runs and drive them; SIGINT/SIGTERM hand them back and stop."""
    from agentctl.coordinator.launch import run_trio
    from agentctl.coordinator.serve import ServeOptions, serve_queue

    if not 1 <= max_runs <= MAX_RUNS:
        raise ValidationError(f"--max-runs must be 1..{MAX_RUNS}")
    for flag, seconds in (("--lease-seconds", lease_seconds), ("--poll-seconds", poll_seconds)):
        # nan and inf would reach the clock's arithmetic (an internal error) or never wake
        if not (math.isfinite(seconds) and 0 < seconds <= MAX_SECONDS):
            raise ValidationError(f"{flag} must be a number > 0 and ≤ {MAX_SECONDS:g}")
    if once and exit_when_idle:  # two different ends: taking one silently is a guess
        raise ValidationError("--once and --exit-when-idle are mutually exclusive")
    opts = ServeOptions(db, max_runs, lease_seconds, poll_seconds, once, exit_when_idle)
    report = run_trio(serve_queue, opts)
    data = report.to_json()
    tally = report.counts()

    def human(_s: Settings) -> str:
        counts = ", ".join(f"{k} {v}" for k, v in sorted(tally.items()))
        return f"serve {data['holder']} stopped ({data['stoppedBy']}): {counts or 'no runs'}"

    deliver(Outcome("ServeReport", data, human=human))
