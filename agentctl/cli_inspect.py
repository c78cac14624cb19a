"""Inspection commands over stored runs: ``inspect``, ``cancel``, ``runs list`` and ``effects``.

Each opens the ledger for one short read (or one guarded write: ``cancel``, ``effects
reconcile``) and delivers one outcome; none of them drives a run. ``effects continue-remote``
also observes one remote task through a worker (``coordinator.continuation``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, NoReturn

import typer

from agentctl.cli_effectview import (
    effect_inspection_view,
    effect_list_view,
    reconciliation_view,
)
from agentctl.cli_options import DbOpt, completes_to
from agentctl.clikit import (
    DEFAULT_DB,
    command_line,
    deliver,
    json_file,
    path_parser,
    statement,
)
from agentctl.core.jsonschema_text import type_article, type_of
from agentctl.core.jsonvalue import JsonObject, JsonValue, as_list, as_object
from agentctl.core.states import RunState
from agentctl.errors import NotFoundError, RunNotFoundError, ValidationError
from agentctl.render import Outcome, Settings

app = typer.Typer()
_HEX = re.compile(r"[0-9a-fA-F]+")  # effect ids are bare hex; run ids never are
MAX_LIMIT = 2**63 - 1  # SQLite's LIMIT is a signed 64-bit integer


@app.command("cancel")
def cancel_cmd(
    run: Annotated[str, typer.Argument(help="Run id (or a unique prefix).")],
    db: DbOpt = DEFAULT_DB,
) -> None:
    """Record a durable cancellation request; the driving coordinator honours it."""
    from agentctl.coordinator import api

    data, state = api.cancel(run, db=db)

    def human(_s: Settings) -> str:
        if state == "cancelled":  # nothing was driving it, or its driver has already stopped
            return f"run {data['runId']} cancelled (open approvals, if any, are closed)"
        if state == "paused":  # the next resume honours it before any work (exit 130)
            return (
                f"cancellation requested for {data['runId']}; the run stays paused until "
                f"`{command_line('resume', str(data['runId']), db=db)}`, which ends it cancelled"
            )
        return f"cancellation requested for {data['runId']}"

    deliver(Outcome("Cancellation", data, human=human))


@app.command("inspect")
def inspect_cmd(
    run: Annotated[str, typer.Argument(help="Run id (or a unique prefix).")],
    db: DbOpt = DEFAULT_DB,
    html: Annotated[
        Path | None,
        typer.Option(
            "--html", parser=path_parser("--html"), help="Also write a self-contained HTML report."
        ),
    ] = None,
) -> None:
    """Show a run: tasks, effects, reconciliations, approvals, checkpoints and audit."""
    from agentctl.cli_report import deliver_inspection

    deliver_inspection(run, db, html)


runs_app = typer.Typer(help="List, analyze or upgrade runs.", no_args_is_help=True)
RUN_STATES = tuple(state.value for state in RunState)


def check_run_state(value: str | None) -> str | None:
    """``--state`` names a run state exactly: a typo would otherwise list nothing, exit 0,
    and a script would take "no failed runs" for the truth."""
    if value is not None and value not in RUN_STATES:
        raise ValidationError(
            f"invalid value {value!r} for --state; expected one of: {', '.join(RUN_STATES)}"
        )
    return value


def check_workflow_name(value: str | None) -> str | None:
    """``--workflow ""`` (an unset shell variable) can name no workflow — ``metadata.name``
    is never empty — so it is bad input, not "no runs"; a name no run has is an honest empty
    list (workflows are known only by their runs)."""
    if value == "":
        raise ValidationError("--workflow must not be empty: a workflow's metadata.name never is")
    return value


@runs_app.command("list")
def runs_list_cmd(
    db: DbOpt = DEFAULT_DB,
    state: Annotated[
        str | None,
        typer.Option(
            "--state",
            help=f"Only runs in this state: {', '.join(RUN_STATES)}.",
            callback=check_run_state,
            autocompletion=completes_to(*RUN_STATES),
        ),
    ] = None,
    workflow: Annotated[
        str | None,
        typer.Option(
            "--workflow",
            help="Only runs of this workflow (its metadata.name; not empty).",
            callback=check_workflow_name,
        ),
    ] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, max=MAX_LIMIT)] = 50,
) -> None:
    """Runs newest first: runId, state, mode, workflow, duration (and created)."""
    from agentctl.cli_runview import runs_text
    from agentctl.coordinator import api

    data = api.list_runs(db=db, state=state, limit=limit, workflow=workflow)
    deliver(Outcome("RunList", data, human=lambda settings: runs_text(data, settings)))


effects_app = typer.Typer(
    help="List, inspect, reconcile and continue effects.", no_args_is_help=True
)


@effects_app.command("list")
def effects_list_cmd(
    run: Annotated[str, typer.Argument(help="Run id (or a unique prefix).")],
    db: DbOpt = DEFAULT_DB,
    task: Annotated[
        str | None,
        typer.Option(
            "--task",
            help="Only this task's effects (an expanded child's id too); a task the run "
            "does not have is exit 5.",
        ),
    ] = None,
) -> None:
    """The effects of a run (optionally of one task) and their reconciliations."""
    from agentctl.coordinator import api

    _list(api.effects_list(run, db=db, task=task), db)


@effects_app.command("inspect")
def effects_inspect_cmd(
    effect: Annotated[
        str, typer.Argument(help="Effect id (64 hex) or a unique prefix of it (6+ hex).")
    ],
    db: DbOpt = DEFAULT_DB,
    task: Annotated[
        str | None, typer.Option("--task", help="Older form: EFFECT is a run; as effects list.")
    ] = None,
) -> None:
    """One effect with its append-only reconciliation history."""
    from agentctl.coordinator import api

    # The original's older `effects inspect RUN [--task T]` listed a run's effects; scripts
    # written for it still run.
    if task is not None:
        # With --task the argument is a run; an effect id there is the likeliest slip.
        _older_form(
            effect,
            db,
            task,
            f"run {effect!r} not found: with --task, `effects inspect` takes a run id (the "
            "older form, as `effects list RUN --task T`); drop --task to inspect an effect",
        )
    if not _HEX.fullmatch(effect):
        # Asked for an effect: say so, not only that no run has this id. (A missing database
        # or an ambiguous prefix keeps its own error.)
        _older_form(
            effect,
            db,
            None,
            f"effect {effect} not found (nor a run of that id, for the older "
            "`effects inspect RUN` form)",
        )
    data = api.effects_inspect(effect, db=db)
    needs = _approvals_needed([as_object(data.get("effect"))], db)
    deliver(Outcome("EffectInspection", data, human=effect_inspection_view(data, db, needs)))


def _older_form(run_ref: str, db: str, task: str | None, missing: str) -> NoReturn:
    """``effects inspect RUN [--task T]``: the run's effects, or ``missing`` (exit 5)."""
    from agentctl.coordinator import api

    try:
        listed = api.effects_list(run_ref, db=db, task=task)
    except RunNotFoundError:
        raise NotFoundError(missing) from None
    _list(listed, db)


def _list(data: JsonObject, db: str) -> NoReturn:
    needs = _approvals_needed([as_object(e) for e in as_list(data.get("effects"))], db)
    deliver(Outcome("EffectList", data, human=effect_list_view(data, db, needs)))


def _approvals_needed(effects: list[JsonObject], db: str) -> frozenset[str]:
    """Of the unresolved ``effects``, those the policy lets be reconciled only with
    ``--approved`` (the human views print it in the commands they suggest)."""
    from agentctl.coordinator.reconcile import UNRESOLVED, read_approvals_to_reconcile

    ids = [str(e.get("effectId")) for e in effects if e.get("status") in UNRESOLVED]
    return read_approvals_to_reconcile(ids, db=db)


_ResultOpt = Annotated[
    Path | None,
    typer.Option(
        "--result-file",
        parser=path_parser("--result-file"),
        help=(
            "The effect's result (JSON); with applied it must meet the task's output "
            "contract (default: a JSON object)."
        ),
    ),
]
_ResultSchemaOpt = Annotated[
    Path | None,
    typer.Option(
        "--result-schema-file",
        parser=path_parser("--result-schema-file"),
        help="A JSON Schema the --result-file result must satisfy.",
    ),
]
_ApprovedOpt = Annotated[
    bool,
    typer.Option(
        "--approved",
        help="Give the approval the run's policy requires to reconcile this effect "
        "(never overrides a denial); stored with the record.",
    ),
]


@effects_app.command("reconcile")
def effects_reconcile_cmd(
    effect: Annotated[
        str, typer.Argument(help="Effect id (64 hex) or a unique prefix of it (6+ hex).")
    ],
    status: Annotated[
        str,
        typer.Option(
            "--status",
            "--outcome",
            help="applied | not-applied | compensated",
            autocompletion=completes_to("applied", "not-applied", "compensated"),
        ),
    ],
    reason: Annotated[str, typer.Option("--reason", help="Why (required).")],
    db: DbOpt = DEFAULT_DB,
    actor: Annotated[str, typer.Option("--actor")] = "cli-user",
    evidence_file: Annotated[
        Path | None, typer.Option("--evidence-file", parser=path_parser("--evidence-file"))
    ] = None,
    result_file: _ResultOpt = None,
    result_schema_file: _ResultSchemaOpt = None,
    compensation_effect: Annotated[str | None, typer.Option("--compensation-effect")] = None,
    approved: _ApprovedOpt = False,
) -> None:
    """Append an operator's conclusion about an uncertain or started effect."""
    from agentctl.coordinator import api

    status = _status(status)
    reason, actor = statement(reason, "--reason"), statement(actor, "--actor")
    said: JsonValue = {"kind": "operator_statement", "statement": reason}
    data = api.effects_reconcile(
        effect,
        db=db,
        status=status,
        reason=reason,
        actor=actor,
        evidence=_evidence(evidence_file) if evidence_file else said,
        result=_result(result_file, status) if result_file else None,
        compensation_effect_id=compensation_effect,
        result_schema=_result_schema(result_schema_file) if result_schema_file else None,
        approved=approved,
    )
    deliver(Outcome("EffectReconciliation", data, human=reconciliation_view(data, db)))


def _evidence(path: Path) -> JsonObject:
    """``--evidence-file``'s evidence: a non-empty JSON object, refused (exit 2, nothing
    recorded) otherwise. A reconciliation needs evidence (spec/cli.md §4): an empty object or
    ``null`` would record none, and a bare string, number or array is not an evidence record."""
    given = json_file(path, "evidence file")
    if isinstance(given, dict) and given:
        return given
    found = "an empty object" if given == {} else type_article(type_of(given))
    raise ValidationError(
        f"evidence file {path} must hold a non-empty JSON object (such as "
        f'{{"kind": "observation", "detail": "…"}}), not {found}; nothing was recorded'
    )


def _result(path: Path, status: str) -> JsonValue:
    """``--result-file``'s result, any JSON value; but ``null`` is no result, so it cannot be
    the result an ``applied`` effect carries on with (refused here, exit 2, rather than told
    that the file is missing). Whether the task can deliver it (its output contract) is
    ``coordinator.reconcile``'s check, against the run's plan."""
    result = json_file(path, "result file")
    if result is None and status == "applied":
        raise ValidationError(
            f"result file {path} holds null, which records no result: --status applied needs "
            "the result the task carries on with (JSON, as the effect would have returned "
            "it); nothing was recorded"
        )
    return result


def _result_schema(path: Path) -> JsonValue:
    """``--result-schema-file``'s schema; ``null`` is no schema (it would be recorded as none
    given and check nothing), so it is refused as the unusable schema it is (exit 2)."""
    schema = json_file(path, "result schema file")
    if schema is None:
        raise ValidationError(
            f"--result-schema-file is not a usable JSON Schema: {path} holds null, and a "
            "schema must be an object or a boolean; nothing was recorded"
        )
    return schema


def _status(given: str) -> str:
    """The stored form of ``--status`` (``not-applied`` → ``not_applied``). Only the three
    documented spellings (spec/cli.md §1, the original's): the stored ``not_applied`` was
    once taken too, so ``--status not-applied --outcome not_applied`` was refused as two
    different values of what this accepted as one."""
    if given not in ("applied", "not-applied", "compensated"):
        stored = given == "not_applied"
        hint = " (write not-applied; not_applied is how it is stored)" if stored else ""
        raise ValidationError(
            f"--status must be applied, not-applied or compensated, not {given!r}{hint}"
        )
    return given.replace("-", "_")


@effects_app.command("continue-remote")
def effects_continue_remote_cmd(
    effect: Annotated[
        str, typer.Argument(help="Effect id (64 hex) or a unique prefix of it (6+ hex).")
    ],
    db: DbOpt = DEFAULT_DB,
    actor: Annotated[str, typer.Option("--actor")] = "cli-user",
    reason: Annotated[
        str | None, typer.Option("--reason", help="Why (default: what was seen).")
    ] = None,
    approved: _ApprovedOpt = False,
) -> None:
    """Observe the persisted remote task of an unresolved a2a.delegate effect (never
    resubmits); when it completed, record its result as an applied reconciliation."""
    from agentctl.coordinator.continuation import continue_remote

    actor = statement(actor, "--actor")  # recorded on the reconciliation, as `reconcile`'s
    reason = None if reason is None else statement(reason, "--reason")
    data = continue_remote(effect, db=db, actor=actor, reason=reason, approved=approved)
    deliver(Outcome("EffectReconciliation", data, human=reconciliation_view(data, db)))


def register(main_app: typer.Typer) -> None:
    main_app.registered_commands.extend(app.registered_commands)
    main_app.add_typer(runs_app, name="runs")
    main_app.add_typer(effects_app, name="effects")
