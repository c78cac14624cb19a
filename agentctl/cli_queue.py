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
# The shortest lease a serve keeps. Its heartbeat (``coordinator.serve._heartbeat``) renews
# each held lease every third of the lease, so a renewal has two thirds of it to get through:
# a thread hop behind the control connection's one-call limiter (a claim may hold it), a write
# transaction queued for the one write lock behind the drives' commits (an fsync each on
# SQLite, a round trip on PostgreSQL), and a trio loop a drive's pure work may be holding.
# Expiries are stored to the millisecond, so under 1 ms a lease expires as it is written; at
# 0.01 s a serve of 8 drives on a 2-core host lost 5 of 16 runs to its own next claim (its
# expired lease taken over: the drive fenced out, its effect left uncertain). One second
# leaves a renewal 0.67 s, thousands of commits long, for 3 heartbeat commits a second.
MIN_LEASE_SECONDS = 1.0
# Drives one process holds at once, each with its own worker slot: far beyond a host's
# processes, a larger number is a typo (it would also mint that many traces every round).
MAX_RUNS = 1024

MaxRunsOpt = Annotated[int, typer.Option("--max-runs", help="Runs driven at once.")]
LeaseOpt = Annotated[
    float,
    typer.Option(
        "--lease-seconds",
        help=f"Lease length, at least {MIN_LEASE_SECONDS:g} s; a heartbeat renews it every third.",
    ),
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

    _check_serve_options(max_runs, lease_seconds, poll_seconds)
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


def _check_serve_options(max_runs: int, lease_seconds: float, poll_seconds: float) -> None:
    if not 1 <= max_runs <= MAX_RUNS:
        raise ValidationError(f"--max-runs must be 1..{MAX_RUNS}")
    # nan and inf would reach the clock's arithmetic (an internal error) or never wake
    if not (math.isfinite(lease_seconds) and MIN_LEASE_SECONDS <= lease_seconds <= MAX_SECONDS):
        raise ValidationError(
            f"--lease-seconds must be a number ≥ {MIN_LEASE_SECONDS:g} and ≤ {MAX_SECONDS:g}: "
            "a heartbeat renews the lease every third of it, and a shorter lease can expire "
            "before its renewal commits"
        )
    if not (math.isfinite(poll_seconds) and 0 < poll_seconds <= MAX_SECONDS):
        raise ValidationError(f"--poll-seconds must be a number > 0 and ≤ {MAX_SECONDS:g}")
